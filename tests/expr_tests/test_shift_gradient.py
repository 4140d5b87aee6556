"""A shift's gradient is the opposite shift (tuner/expr/gather_form.py's triangular solve).

A grouped shift reads ``X[(u*K + v)*C_g + q, i + u, j + v]``: the group (u, v) indexes the channel and
the rows and columns. Solved one dimension at a time -- the channel's parts u, v, q first, then the row
and column, with u and v substituted -- its data gradient is a gather, ``dX[u, v, q, i', j'] =
dY[.., i' - u, j' - v]`` with zeros outside the output, and not a sum over every group under a guard
(K*K times the work). Checked against torch autograd exactly (float32 and float64: each input element
receives one output element or none), including the rows and columns no shift reaches, and through a
zero padding inside the operator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

te = pytest.importorskip("tvm.te")
torch = pytest.importorskip("torch")
from tvm import tirx  # noqa: E402

from tuner.codegen.grad_check import autograd_errors, fd_errors  # noqa: E402
from tuner.expr.autodiff import differentiate  # noqa: E402
from tuner.ir import llvm  # noqa: E402

N, CG, H, W, K = 2, 3, 5, 6, 3
P = (K - 1) // 2
C = K * K * CG


def grouped_shift(dtype: str, padded_inside: bool):
    """out[n, u, v, q, i, j] = Xp[n, (u*K + v)*C_g + q, i + u, j + v]: with ``padded_inside`` Xp is a
    zero-padding stage of X[n, C, H, W] in the operator (composed through by the derivation), else X is
    the padded input itself."""
    if padded_inside:
        x = te.placeholder((N, C, H, W), dtype, name="X")
        xp = te.compute((N, C, H + 2 * P, W + 2 * P), lambda b, c, y, z: tirx.if_then_else(
            tirx.all(y >= P, y < H + P, z >= P, z < W + P), x[b, c, y - P, z - P], tirx.const(0.0, dtype)), name="Xp")
    else:
        x = xp = te.placeholder((N, C, H + 2 * P, W + 2 * P), dtype, name="X")
    out = te.compute((N, K, K, CG, H, W), lambda b, u, v, q, i, j: xp[b, (u * K + v) * CG + q, i + u, j + v],
                     name="shift")
    return [x, out]


def shift_torch(x, padded_inside: bool):
    xp = torch.nn.functional.pad(x, (P, P, P, P)) if padded_inside else x
    return torch.stack([torch.stack([xp[:, (u * K + v) * CG:(u * K + v + 1) * CG, u:u + H, v:v + W]
                                     for v in range(K)], 1) for u in range(K)], 1)


def _data_operator(grad):
    (op,) = [op for op in grad.operators if op.wrt == "X"]
    return op


@pytest.mark.parametrize("padded_inside", [False, True], ids=["padded-input", "padding-stage"])
def test_a_grouped_shift_s_gradient_is_the_opposite_shift_and_matches_torch_in_float64(padded_inside):
    tensors = grouped_shift("float64", padded_inside)
    assert max(autograd_errors(tensors, lambda x: shift_torch(x, padded_inside)).values()) <= 1e-15
    assert max(fd_errors(tensors).values()) <= 1e-6
    op = _data_operator(differentiate(tensors))
    # one read of the head per point, no reduction: the channel viewed as (u, v, q), rows and columns shifted back
    body = op.tensors[-1].op.body[0]
    assert type(body).__name__ != "Reduce" and op.macs == int(np.prod([int(s) for s in op.tensors[-1].shape]))
    assert op.radix[1] == (K, K, CG)
    assert op.operands["grad_shift"].zeros  # outside the output: zeros
    op.workload()


@pytest.mark.parametrize("padded_inside", [False, True], ids=["padded-input", "padding-stage"])
def test_a_grouped_shift_s_gradient_equals_torch_autograd_exactly_in_float32_borders_included(padded_inside):
    tensors = grouped_shift("float32", padded_inside)
    grad = differentiate(tensors)
    x, out = tensors
    rng = np.random.default_rng(5)
    xs = rng.standard_normal([int(s) for s in x.shape]).astype("float32")
    head = rng.standard_normal([int(s) for s in out.shape]).astype("float32")
    (got,) = llvm.run(te.create_prim_func(grad.program()), [xs, head], [(xs.shape, "float32")])
    xt = torch.tensor(xs, requires_grad=True)
    (shift_torch(xt, padded_inside) * torch.tensor(head)).sum().backward()
    want = xt.grad.numpy()
    assert np.array_equal(got, want)
    # the borders: each element is read by one output point or none (the rows and columns no shift group
    # reaches, the padding's), and the derived gradient is zero exactly where none reads it
    ones = torch.tensor(xs, requires_grad=True)
    shift_torch(ones, padded_inside).sum().backward()
    reads = ones.grad.numpy()
    assert set(np.unique(reads)) == {0.0, 1.0}
    assert not got[reads == 0].any() and np.count_nonzero(got[reads == 1]) == np.count_nonzero(reads)


def test_the_shift_conv_s_data_gradient_reduces_over_output_channels_only():
    """ShiftNet's operator (the shift fused into its 1 x 1 conv): the data gradient is a 1 x 1 conv's
    (sum over output channels) of the head shifted back, not K*K of them under a guard."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "novel"))
    try:
        from shiftnet import shift_conv, shift_conv_torch
    finally:
        sys.path.pop(0)
    n, c, h, w, k_out = 2, 18, 6, 6, 8
    tensors = shift_conv(n=n, c=c, h=h, w=w, k_out=k_out, k=3, dtype="float64")
    assert max(autograd_errors(tensors, shift_conv_torch).values()) <= 1e-12
    (op,) = [op for op in differentiate(tensors).operators if op.wrt == "data_pad"]
    assert op.macs == n * c * (h + 2) * (w + 2) * k_out
    assert op.workload().expr.gemm_like
