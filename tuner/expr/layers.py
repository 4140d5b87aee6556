"""Built-in layers written as tensor expressions, for deriving their gradients (tuner/expr/autodiff.py).

The convolution a Relax model's ``nn.conv2d`` computes (NCHW data, OIHW weights, any stride, padding,
dilation and groups), in two stages as TOPI writes it: the zero padding, then the sum over channels
of the group and taps. Its derived gradient composes through the padding and splits by stride residue.
Imports tvm inside functions only.
"""

from __future__ import annotations

from typing import Any

from tuner.expr.adjoint_ops import PAD_ATTR, PAD_MODE_ATTR


def conv2d(data: tuple[int, int, int, int], weight: tuple[int, int, int, int], strides: tuple[int, int],
           padding: tuple[int, int, int, int], dilation: tuple[int, int], groups: int, dtype: str) -> list[Any]:
    """[data, weight, output] te tensors; ``padding`` is (top, left, bottom, right) as Relax's."""
    from tvm import te, tirx

    n, c, h, w = data
    k, cg, r, s = weight
    top, left, bottom, right = padding
    x = te.placeholder(data, dtype, name="data")
    wt = te.placeholder(weight, dtype, name="weight")
    hp, wp = h + top + bottom, w + left + right
    if any(padding):
        xp = te.compute((n, c, hp, wp), lambda b, ch, y, z: tirx.if_then_else(
            tirx.all(y >= top, y < h + top, z >= left, z < w + left), x[b, ch, y - top, z - left],
            tirx.const(0.0, dtype)), name="data_pad",
            attrs={PAD_ATTR: [0, 0, 0, 0, top, bottom, left, right], PAD_MODE_ATTR: "constant"})
    else:
        xp = x
    oh = (hp - dilation[0] * (r - 1) - 1) // strides[0] + 1
    ow = (wp - dilation[1] * (s - 1) - 1) // strides[1] + 1
    kg = k // groups
    rc, ry, rx = te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, r), "ry"), te.reduce_axis((0, s), "rx")
    out = te.compute((n, k, oh, ow), lambda b, f, y, z: te.sum(
        xp[b, (f // kg) * cg + rc, y * strides[0] + ry * dilation[0], z * strides[1] + rx * dilation[1]]
        * wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv2d")
    return [x, wt, out]
