"""swtune's Relax gradients (tuner/ir/gradients.py) against torch autograd: each operator TVM 0.27 cannot
differentiate (or differentiates wrongly: dilated conv2d), inside a small torch model, through
``relax.transform.Gradient``, compiled for the host and run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

from tuner.ir.gradients import GRADIENTS, register  # noqa: E402


class _Op(torch.nn.Module):
    """loss = sum(f(x, params) * r): a random weighting, so no gradient vanishes by symmetry."""

    def __init__(self, f: Any, out_shape: tuple[int, ...], **params: Any) -> None:
        super().__init__()
        self.f = f
        self.params = torch.nn.ParameterDict({k: torch.nn.Parameter(v) for k, v in params.items()})
        self.register_buffer("r", torch.randn(out_shape, dtype=torch.float64))

    def forward(self, x: Any) -> Any:
        return (self.f(x, **self.params) * self.r).sum()


def _relax_gradients(module: torch.nn.Module, x: torch.Tensor) -> list[np.ndarray]:
    """The loss's gradients with respect to x and every parameter, from TVM."""
    ep = torch.export.export(module, (x,))
    mod = from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)
    params = [p for p in mod["main"].params if str(p.ty.dtype).startswith("float")]
    mod = relax.transform.Gradient("main", require_grads=params)(mod)
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    # from_exported_program puts the input first, then the parameters in module order
    args = [x, *(p for p in module.parameters())]
    _, grads = vm["main_adjoint"](*(tvm.runtime.tensor(a.detach().numpy()) for a in args))
    return [g.numpy() for g in grads]


def _torch_gradients(module: torch.nn.Module, x: torch.Tensor) -> list[np.ndarray]:
    x = x.clone().requires_grad_(True)
    module(x).backward()
    return [x.grad.numpy(), *(p.grad.numpy() for p in module.parameters())]


INDEX = torch.tensor([[0, 5, 2], [1, 1, 4], [3, 0, 0], [5, 2, 2]])

CASES = {  # name -> (f, its output shape, its parameters); x is (4, 6) unless SHAPES says otherwise
    "layer_norm": (lambda x, w, b: torch.nn.functional.layer_norm(x, (6,), w, b), (4, 6),
                   {"w": torch.randn(6), "b": torch.randn(6)}),
    "layer_norm_2d": (lambda x, w, b: torch.nn.functional.layer_norm(x, (3, 4), w, b), (2, 3, 4),
                      {"w": torch.randn(3, 4), "b": torch.randn(3, 4)}),
    "group_norm": (lambda x, w, b: torch.nn.functional.group_norm(x, 3, w, b), (2, 6, 4, 5),
                   {"w": torch.randn(6), "b": torch.randn(6)}),
    "resize_nearest": (lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest"), (2, 6, 8, 10), {}),
    "resize_bilinear": (lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear"), (2, 6, 8, 10),
                        {}),
    "resize_bilinear_odd": (lambda x: torch.nn.functional.interpolate(x, size=(7, 9), mode="bilinear"), (2, 6, 7, 9),
                            {}),
    "resize_bilinear_corners": (lambda x: torch.nn.functional.interpolate(x, size=(7, 3), mode="bilinear",
                                                                          align_corners=True), (2, 6, 7, 3), {}),
    "gather": (lambda x: torch.gather(x, 1, INDEX), (4, 3), {}),
    "adaptive_avg_pool2d": (lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (2, 3)), (1, 2, 2, 3), {}),
    "erf": (lambda x: torch.erf(x), (4, 6), {}),
    "gelu": (lambda x: torch.nn.functional.gelu(x), (4, 6), {}),
    "gelu_tanh": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), (4, 6), {}),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.7), (4, 6), {}),
    "relu6": (lambda x: torch.nn.functional.relu6(x * 4), (4, 6), {}),
    "leaky_relu": (lambda x: torch.nn.functional.leaky_relu(x, 0.1), (4, 6), {}),
    # column 0 is exactly 0: torch's gradient there is 0 (TVM's own relu gradient passes dy)
    "relu_at_zero": (lambda x: torch.relu(x - x[:, :1]), (4, 6), {}),
    "squeeze": (lambda x: x.unsqueeze(1).squeeze(1) * 2, (4, 6), {}),
    "strided_slice": (lambda x: x[1:, 1:6:2], (3, 3), {}),
    "strided_slice_negative": (lambda x: x[:-1, -4:], (3, 4), {}),
    "pad": (lambda x: torch.nn.functional.pad(x, (1, 2, 0, 3)), (7, 9), {}),
}


SHAPES = {"layer_norm_2d": (2, 3, 4), "adaptive_avg_pool2d": (1, 2, 6, 9), "group_norm": (2, 6, 4, 5),
          "resize_nearest": (2, 6, 4, 5), "resize_bilinear": (2, 6, 4, 5), "resize_bilinear_odd": (2, 6, 4, 5),
          "resize_bilinear_corners": (2, 6, 4, 5)}
FLOAT32 = {"layer_norm", "layer_norm_2d", "group_norm"}


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_elementwise_layout_and_norm_gradients_match_torch(name: str) -> None:
    register()
    f, out_shape, params = CASES[name]
    torch.manual_seed(0)
    # TVM's layer_norm runs in float32 only: those cases compare at float32 precision
    dtype, rtol = (torch.float32, 1e-5) if name in FLOAT32 else (torch.float64, 1e-9)
    module = _Op(f, out_shape, **params).to(dtype)
    x = torch.randn(SHAPES.get(name, (4, 6)), dtype=dtype)
    grads = _relax_gradients(module, x)
    for got, want in zip(grads, _torch_gradients(module, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    if dtype == torch.float64:  # and against central finite differences of the loss, along a random direction
        v = torch.randn(x.shape, dtype=dtype)
        h = 1e-6
        with torch.no_grad():
            fd = float(module(x + h * v) - module(x - h * v)) / (2 * h)
        assert float(np.sum(grads[0] * v.numpy())) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("stride,dilation,padding,groups", [(1, 2, 2, 1), (2, 2, 1, 1), (1, 3, 0, 2), (2, 1, 1, 1)])
def test_conv2d_gradients_match_torch_with_dilation(stride: int, dilation: int, padding: int, groups: int) -> None:
    """TVM's own conv2d gradient fails on every dilated convolution; swtune's overrides it. In float32: the
    torch importer gives every conv2d ``out_dtype`` float32, whatever the model's dtype."""
    register()
    torch.manual_seed(1)
    weight = torch.randn(4, 4 // groups, 3, 3)

    def conv(x: Any, w: Any) -> Any:
        return torch.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)

    x = torch.randn(1, 4, 11, 10)
    out_shape = tuple(conv(x, weight).shape)
    module = _Op(conv, out_shape, w=weight).float()
    for got, want in zip(_relax_gradients(module, x), _torch_gradients(module, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("stride,dilation,padding,output_padding", [(2, 1, 1, 1), (1, 2, 0, 0), (2, 2, 2, 1)])
def test_conv2d_transpose_gradients_match_torch(stride: int, dilation: int, padding: int,
                                                output_padding: int) -> None:
    register()
    torch.manual_seed(2)
    weight = torch.randn(4, 3, 3, 3)

    def deconv(x: Any, w: Any) -> Any:
        return torch.nn.functional.conv_transpose2d(x, w, stride=stride, padding=padding,
                                                    output_padding=output_padding, dilation=dilation)

    x = torch.randn(1, 4, 5, 6)
    module = _Op(deconv, tuple(deconv(x, weight).shape), w=weight).float()
    for got, want in zip(_relax_gradients(module, x), _torch_gradients(module, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("stride,dilation,padding,groups", [(1, 1, 0, 1), (2, 2, 1, 1), (1, 3, 2, 2)])
def test_conv1d_gradients_match_torch(stride: int, dilation: int, padding: int, groups: int) -> None:
    register()
    torch.manual_seed(3)
    weight = torch.randn(6, 4 // groups, 3)

    def conv(x: Any, w: Any) -> Any:
        return torch.nn.functional.conv1d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)

    x = torch.randn(2, 4, 17)
    module = _Op(conv, tuple(conv(x, weight).shape), w=weight).float()
    for got, want in zip(_relax_gradients(module, x), _torch_gradients(module, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_every_registered_operator_is_covered() -> None:
    assert set(register()) == set(GRADIENTS) and len(GRADIENTS) == 17
