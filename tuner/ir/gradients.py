"""Relax gradients that TVM 0.27 lacks or gets wrong, registered above TVM's own.

``relax.transform.Gradient`` differentiates a Relax function operator by operator, through each operator's
``FPrimalGradient``. TVM 0.27 registers 52 of its 230 operators (tvm/relax/op/_op_gradient.py); a model that
uses any other one cannot be differentiated at all. ``register()`` adds the ones swtune's models need:

- element-wise: ``nn.relu`` (overriding TVM's: torch's value at 0, no bool tensor), ``erf``, ``nn.gelu``,
  ``nn.gelu_tanh``, ``clip`` (relu6, hardtanh), ``nn.leakyrelu``;
- layout: ``squeeze``, ``strided_slice`` (any axes, steps, out-of-range bounds), ``nn.pad`` (constant mode:
  one slice per padded axis);
- ``nn.layer_norm`` (trailing axes), ``nn.group_norm``, ``gather_elements`` (torch's decomposed
  cross-entropy), ``nn.adaptive_avg_pool2d`` to an output size that divides the input, and ``image.resize2d``
  (linear at any size and coordinate mode; nearest at integer scales);
- ``nn.conv2d_transpose`` (one group): a conv2d and that conv2d's weight gradient; ``nn.conv1d``: the conv2d
  gradient of its height-1 views;
- ``nn.conv2d`` with dilation: TVM's gradient builds the data gradient's ``conv2d_transpose`` with an output
  padding that ignores the dilation, which fails for every dilated convolution; this one overrides it
  (level 11) with the dilation in the padding and TVM's own weight gradient.

Each gradient is written with Relax operators, so the backward graph legalizes and compiles like any other
(checked against torch autograd in tests/bridge_tests/test_relax_gradients.py). Registration happens once per
process, on the first ``register()`` call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from tvm import relax
from tvm.relax.op import _op_gradient as tvm_gradients
from tvm.relax.op import (
    erf,
    exp,
    greater,
    greater_equal,
    less_equal,
    logical_and,
    multiply,
    reshape,
    sign,
    slice_scatter,
    strided_slice,
    tanh,
    where,
    zeros,
)
from tvm.relax.op.base import register_gradient
from tvm.relax.op.grad import no_grad
from tvm.relax.op.nn import conv2d_transpose

DEFAULT_LEVEL = 10  # TVM's own registrations
OVERRIDE_LEVEL = 11  # above them

Gradient = Callable[[Any, Any, Any, Any], list[Any]]


def _dtype(expr: Any) -> str:
    return str(expr.ty.dtype)


def _shape(expr: Any) -> list[int]:
    return [int(d) for d in expr.ty.shape]


def _const(value: float, like: Any) -> Any:
    return relax.const(value, _dtype(like))


def _number(arg: Any) -> float:
    """A scalar operand (an IntImm or FloatImm, possibly wrapped once more) as a float."""
    value = arg.value
    return float(value if isinstance(value, int | float) else value.value)


# --- element-wise -------------------------------------------------------------------------------------------
def erf_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """d erf(x) = 2/sqrt(pi) exp(-x^2)."""
    x = call.args[0]
    return [multiply(dy, multiply(_const(2.0 / math.sqrt(math.pi), x), exp(multiply(multiply(x, x), _const(-1.0, x)))))]


def gelu_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """gelu(x) = x Phi(x): d = Phi(x) + x phi(x)."""
    x = call.args[0]
    cdf = multiply(_const(0.5, x), relax.op.add(_const(1.0, x), erf(multiply(x, _const(1.0 / math.sqrt(2.0), x)))))
    pdf = multiply(_const(1.0 / math.sqrt(2.0 * math.pi), x), exp(multiply(multiply(x, x), _const(-0.5, x))))
    return [multiply(dy, relax.op.add(cdf, multiply(x, pdf)))]


def gelu_tanh_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """gelu_tanh(x) = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3):
    d = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u)."""
    x = call.args[0]
    k, c = math.sqrt(2.0 / math.pi), 0.044715
    x2 = multiply(x, x)
    t = tanh(multiply(_const(k, x), relax.op.add(x, multiply(_const(c, x), multiply(x2, x)))))
    one = _const(1.0, x)
    du = multiply(_const(k, x), relax.op.add(one, multiply(_const(3.0 * c, x), x2)))
    d = relax.op.add(multiply(_const(0.5, x), relax.op.add(one, t)),
                     multiply(multiply(_const(0.5, x), x), multiply(relax.op.subtract(one, multiply(t, t)), du)))
    return [multiply(dy, d)]


def clip_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """The gradient passes where min <= x <= max (torch's clamp); the bounds are not differentiable."""
    x, low, high = call.args
    inside = logical_and(greater_equal(x, _const(_number(low), x)), less_equal(x, _const(_number(high), x)))
    return [where(inside, dy, _const(0.0, x)), no_grad(low), no_grad(high)]


def relu_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """dy * sign(relu(x)): torch's rule (0 at x = 0, where TVM's ``where(x < 0, 0, dy)`` passes dy), and
    two float element-wise operators the CPE cutter slices, where TVM's ``less`` makes a bool tensor
    that stays on the MPE."""
    return [multiply(dy, sign(orig_var))]


def leakyrelu_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    x = call.args[0]
    alpha = float(call.attrs.alpha)
    return [where(greater(x, _const(0.0, x)), dy, multiply(dy, _const(alpha, x)))]


# --- layout -------------------------------------------------------------------------------------------------
def squeeze_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    return [reshape(dy, _shape(call.args[0]))]


def strided_slice_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """dy scattered into zeros of x's shape, one sliced axis at a time (slice_scatter takes one axis)."""
    x, axes, begins, ends = call.args[:4]
    steps = call.args[4] if len(call.args) > 4 else None
    shape = _shape(x)
    current = _shape(dy)
    grad = dy
    for i, axis_expr in enumerate(axes):
        axis = int(axis_expr.value) % len(shape)
        step = int(steps[i].value) if steps is not None else 1
        if step <= 0:
            raise NotImplementedError("the gradient of a strided_slice with a negative step is not implemented")
        start, stop, step = slice(int(begins[i].value), int(ends[i].value), step).indices(shape[axis])
        current[axis] = shape[axis]
        grad = slice_scatter(zeros(list(current), _dtype(x)), grad, start, stop, step, axis)
    return [grad, no_grad(axes), no_grad(begins), no_grad(ends), *([no_grad(steps)] if steps is not None else [])]


def pad_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """Constant padding: the gradient is dy's interior (the padding is a constant)."""
    mode = str(call.attrs.pad_mode)
    if mode != "constant":
        raise NotImplementedError(f"the gradient of nn.pad in mode {mode!r} is not implemented (constant only)")
    x = call.args[0]
    widths = [int(w) for w in call.attrs.pad_width]
    shape = _shape(x)
    # one slice per padded axis: a slice of one axis is a region copy or a whole-row copy the CPEs run
    # (tuner.aot.cpe_region), where one slice of two (an image's rows and columns) runs on the MPE
    grad = dy
    for axis, n in enumerate(shape):
        if widths[2 * axis] or widths[2 * axis + 1]:
            grad = strided_slice(grad, [axis], [widths[2 * axis]], [widths[2 * axis] + n])
    return [grad, *map(no_grad, call.args[1:])]


# --- normalisation, gather, pooling ---------------------------------------------------------------------------
def layer_norm_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """y = xhat * gamma + beta over the trailing axes A, xhat = (x - mean) * rstd:
    dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat)) with g = dy * gamma; dgamma = sum(dy * xhat) and
    dbeta = sum(dy) over the leading axes."""
    x, gamma, _ = call.args
    attrs = call.attrs
    rank = len(_shape(x))
    axes = sorted(int(a) % rank for a in attrs.axes)
    if axes != list(range(rank - len(axes), rank)) or not (attrs.center and attrs.scale):
        raise NotImplementedError("the gradient of layer_norm is implemented over trailing axes with a scale and "
                                  "a shift (center=scale=True)")
    rstd = relax.op.rsqrt(relax.op.add(relax.op.variance(x, axes, keepdims=True), _const(float(attrs.epsilon), x)))
    xhat = multiply(relax.op.subtract(x, relax.op.mean(x, axes, keepdims=True)), rstd)
    g = multiply(dy, gamma)
    dx = multiply(rstd, relax.op.subtract(relax.op.subtract(g, relax.op.mean(g, axes, keepdims=True)),
                                          multiply(xhat, relax.op.mean(multiply(g, xhat), axes, keepdims=True))))
    leading = list(range(rank - len(axes)))
    return [dx, relax.op.sum(multiply(dy, xhat), leading), relax.op.sum(dy, leading)]


def gather_elements_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """Each gathered element's gradient added back where it came from."""
    x, indices = call.args
    scattered = relax.op.scatter_elements(zeros(_shape(x), _dtype(x)), indices, dy, int(call.attrs.axis), "add")
    return [scattered, no_grad(indices)]


def adaptive_avg_pool2d_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """An output size that divides the input is an average pool of kernel = stride = input / output."""
    x = call.args[0]
    if str(call.attrs.layout) != "NCHW":
        raise NotImplementedError("the gradient of adaptive_avg_pool2d is implemented for NCHW")
    _, _, h, w = _shape(x)
    _, _, oh, ow = _shape(orig_var)
    if h % oh or w % ow:
        raise NotImplementedError(f"the gradient of adaptive_avg_pool2d from {h}x{w} to {oh}x{ow} (an output "
                                  "size that does not divide the input) is not implemented")
    kernel = (h // oh, w // ow)
    return [relax.op.grad.avg_pool2d_backward(dy, x, kernel, kernel)]


def group_norm_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """Channels (axis 1) in G groups, each normalised over its channels and the spatial axes: the layer_norm
    gradient of the [N, G, C/G * spatial] view, with the per-channel scale applied before the view."""
    x, gamma, _ = call.args
    attrs = call.attrs
    shape = _shape(x)
    spatial = list(range(2, len(shape)))
    if int(attrs.channel_axis) != 1 or sorted(int(a) for a in attrs.axes) != spatial or not (attrs.center and
                                                                                            attrs.scale):
        raise NotImplementedError("the gradient of group_norm is implemented for channels on axis 1, normalised "
                                  "over every later axis, with a scale and a shift")
    groups = int(attrs.num_groups)
    view = [shape[0], groups, math.prod(shape[1:]) // groups]
    channel = [1, shape[1]] + [1] * len(spatial)  # gamma broadcast over batch and spatial axes
    xv = reshape(x, view)
    rstd = relax.op.rsqrt(relax.op.add(relax.op.variance(xv, [2], keepdims=True), _const(float(attrs.epsilon), x)))
    xhat = multiply(relax.op.subtract(xv, relax.op.mean(xv, [2], keepdims=True)), rstd)
    g = reshape(multiply(dy, reshape(gamma, channel)), view)
    dx = multiply(rstd, relax.op.subtract(relax.op.subtract(g, relax.op.mean(g, [2], keepdims=True)),
                                          multiply(xhat, relax.op.mean(multiply(g, xhat), [2], keepdims=True))))
    reduce = [0, *spatial]
    return [reshape(dx, shape), relax.op.sum(multiply(dy, reshape(xhat, shape)), reduce), relax.op.sum(dy, reduce)]


def _resize_matrix(n_in: int, n_out: int, method: str, mode: str) -> np.ndarray:
    """The [n_out, n_in] matrix of one axis of a linear or nearest resize (TVM's coordinates: indices clamped
    to the input, the source coordinate itself not)."""
    o = np.arange(n_out, dtype=np.float64)
    if mode == "align_corners":
        src = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    elif mode == "asymmetric":
        src = o * (n_in / n_out)
    elif mode in ("half_pixel", "pytorch_half_pixel"):
        src = (o + 0.5) * (n_in / n_out) - 0.5 if n_out > 1 or mode == "half_pixel" else np.zeros(n_out)
    else:
        raise NotImplementedError(f"the gradient of resize2d with coordinates {mode!r} is not implemented")
    matrix = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if method == "linear":
        low = np.floor(src)
        weight = src - low
        np.add.at(matrix, (rows, np.clip(low, 0, n_in - 1).astype(int)), 1.0 - weight)
        np.add.at(matrix, (rows, np.clip(low + 1, 0, n_in - 1).astype(int)), weight)
    else:  # nearest: only integer scales, where every rounding rule picks the same pixel
        if n_out % n_in:
            raise NotImplementedError(f"the gradient of a nearest resize from {n_in} to {n_out} (not an integer "
                                      "scale) is not implemented")
        matrix[rows, rows // (n_out // n_in)] = 1.0
    return matrix


def resize2d_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """A linear or nearest resize is separable and linear: out = R_h x R_w^T per plane, so dx = R_h^T dy R_w."""
    x = call.args[0]
    attrs = call.attrs
    method, mode = str(attrs.method), str(attrs.coordinate_transformation_mode)
    if str(attrs.layout) != "NCHW" or method not in ("linear", "nearest_neighbor"):
        raise NotImplementedError(f"the gradient of resize2d is implemented for NCHW linear and nearest resizes, "
                                  f"not {attrs.layout} {method}")
    _, _, h, w = _shape(x)
    _, _, oh, ow = _shape(orig_var)
    dtype = _dtype(x)
    rows = relax.const(_resize_matrix(h, oh, method, mode).T.astype(dtype), dtype)
    cols = relax.const(_resize_matrix(w, ow, method, mode).astype(dtype), dtype)
    return [relax.op.matmul(relax.op.matmul(rows, dy), cols), no_grad(call.args[1])]


# --- conv2d with dilation -----------------------------------------------------------------------------------
def conv2d_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """TVM's gradient with the data gradient's output padding counting the dilation: the transposed conv of
    a dilated kernel spans dilation * (kernel - 1) + 1 input pixels, not kernel."""
    attrs = call.attrs
    _, weight_grad = tvm_gradients.conv2d_grad(orig_var, call, dy, ctx)  # NCHW/OIHW only, as TVM's
    data, weight = call.args
    _, _, grad_h, grad_w = _shape(orig_var)
    _, _, in_h, in_w = _shape(data)
    _, _, kernel_h, kernel_w = _shape(weight)
    top, left, bottom, right = (int(p) for p in attrs.padding)
    stride_h, stride_w = (int(s) for s in attrs.strides)
    dil_h, dil_w = (int(d) for d in attrs.dilation)
    out_h = (grad_h - 1) * stride_h - top - bottom + dil_h * (kernel_h - 1) + 1
    out_w = (grad_w - 1) * stride_w - left - right + dil_w * (kernel_w - 1) + 1
    data_grad = conv2d_transpose(dy, weight, attrs.strides, attrs.padding, (in_h - out_h, in_w - out_w),
                                 attrs.dilation, attrs.groups, attrs.out_layout,
                                 attrs.kernel_layout[1] + attrs.kernel_layout[0] + attrs.kernel_layout[2:],
                                 attrs.data_layout, attrs.out_dtype)
    return [data_grad, weight_grad]


def conv1d_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """conv1d is the conv2d of height 1 (as swtune compiles it): the conv2d gradient of the [N, C, 1, W] views."""
    x, weight = call.args
    attrs = call.attrs
    if str(attrs.data_layout) != "NCW" or str(attrs.kernel_layout) != "OIW" or str(attrs.out_layout) != "NCW":
        raise NotImplementedError("the gradient of conv1d is implemented for NCW data and OIW weights")
    (n, c, w), (o, i, k), (_, _, wo) = _shape(x), _shape(weight), _shape(orig_var)
    x4 = ctx.emit(reshape(x, (n, c, 1, w)))
    w4 = ctx.emit(reshape(weight, (o, i, 1, k)))
    dy4 = ctx.emit(reshape(dy, (n, o, 1, wo)))
    left, right = (int(p) for p in attrs.padding)
    as_2d = relax.op.nn.conv2d(x4, w4, (1, int(attrs.strides[0])), (0, left, 0, right), (1, int(attrs.dilation[0])),
                               int(attrs.groups), "NCHW", "OIHW", "NCHW", attrs.out_dtype)
    data_grad, weight_grad = conv2d_grad(dy4, as_2d, dy4, ctx)  # dy4: typed with the output's shape
    return [reshape(data_grad, (n, c, w)), reshape(weight_grad, (o, i, k))]


def conv2d_transpose_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """y = conv2d_transpose(x, w) is the adjoint of z -> conv2d(z, w) (w: [Ci, Co, R, S] read as OIHW), so
    dx = conv2d(dy, w), and dw is that conv2d's weight gradient with dy as its data and x as its output's
    gradient (TVM's, which is right for every stride and dilation)."""
    x, weight = call.args
    attrs = call.attrs
    if (int(attrs.groups) != 1 or str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "IOHW"
            or str(attrs.out_layout) != "NCHW"):
        raise NotImplementedError("the gradient of conv2d_transpose is implemented for NCHW data, IOHW weights "
                                  "and one group")
    forward = relax.op.nn.conv2d(dy, weight, attrs.strides, attrs.padding, attrs.dilation, 1, "NCHW", "OIHW",
                                 "NCHW", _dtype(x))
    _, weight_grad = tvm_gradients.conv2d_grad(x, forward, x, ctx)  # x: the output (its shape) and its gradient
    return [forward, weight_grad]


GRADIENTS: dict[str, tuple[Gradient, int]] = {  # Relax operator -> (gradient, registration level)
    "relax.erf": (erf_grad, DEFAULT_LEVEL),
    "relax.nn.gelu": (gelu_grad, DEFAULT_LEVEL),
    "relax.nn.gelu_tanh": (gelu_tanh_grad, DEFAULT_LEVEL),
    "relax.clip": (clip_grad, DEFAULT_LEVEL),
    "relax.nn.leakyrelu": (leakyrelu_grad, DEFAULT_LEVEL),
    "relax.squeeze": (squeeze_grad, DEFAULT_LEVEL),
    "relax.strided_slice": (strided_slice_grad, DEFAULT_LEVEL),
    "relax.nn.pad": (pad_grad, DEFAULT_LEVEL),
    "relax.nn.layer_norm": (layer_norm_grad, DEFAULT_LEVEL),
    "relax.gather_elements": (gather_elements_grad, DEFAULT_LEVEL),
    "relax.nn.adaptive_avg_pool2d": (adaptive_avg_pool2d_grad, DEFAULT_LEVEL),
    "relax.nn.group_norm": (group_norm_grad, DEFAULT_LEVEL),
    "relax.image.resize2d": (resize2d_grad, DEFAULT_LEVEL),
    "relax.nn.conv2d_transpose": (conv2d_transpose_grad, DEFAULT_LEVEL),
    "relax.nn.conv1d": (conv1d_grad, DEFAULT_LEVEL),
    "relax.nn.conv2d": (conv2d_grad, OVERRIDE_LEVEL),
    "relax.nn.relu": (relu_grad, OVERRIDE_LEVEL),
}


@cache
def register() -> tuple[str, ...]:
    """Register every gradient of :data:`GRADIENTS` (once per process); returns the operators' names."""
    for op, (function, level) in GRADIENTS.items():
        register_gradient(op, function, level=level)
    return tuple(GRADIENTS)
