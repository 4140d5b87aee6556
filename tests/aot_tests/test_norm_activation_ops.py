"""Per-channel affine, normalisation, activation and scan operators of issue #28 item 2, compiled from torch, run on the
athread emulator and checked against torch: group_norm, instance_norm, layer_norm over several axes,
hardswish, hardsigmoid, leaky_relu, elu, silu, mish, tanh-GELU, masked softmax, cumsum, argmax and
constant, reflect and replicate pads.
Where each runs is asserted too: every step of each runs as a CPE kernel when every operator that
slices is offloaded (``cpe_mode="all"``), mish's bool intermediate and argmax's int64 result included
(stored in the model's dtype, as on the MPE).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import assert_outputs_match, run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")
F = torch.nn.functional
torch.manual_seed(0)
GN = torch.nn.GroupNorm(4, 16).requires_grad_(False)
IN = torch.nn.InstanceNorm2d(16, affine=True).requires_grad_(False)
with torch.no_grad():  # affine parameters that are not the identity, so a dropped one is caught
    for m in (GN, IN):
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
CAUSAL = torch.ones(8, 8, dtype=torch.bool).tril()
SCALE, SHIFT = torch.randn(16, 1, 1), torch.randn(16, 1, 1)

# name -> function of x [2, 16, 8, 8]
OPS: dict[str, Any] = {
    "per_channel_affine": lambda x: x * SCALE + SHIFT,  # an unfused batch_norm's form
    "group_norm": lambda x: GN(x),
    "instance_norm": lambda x: IN(x),
    "layer_norm_hw": lambda x: F.layer_norm(x, (8, 8)),
    "hardswish": lambda x: F.hardswish(x * 4),
    "hardsigmoid": lambda x: F.hardsigmoid(x * 4),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "elu": lambda x: F.elu(x),
    "silu": lambda x: F.silu(x),
    "mish": lambda x: F.mish(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "masked_softmax": lambda x: torch.softmax(torch.where(CAUSAL, x, float("-inf")), dim=-1),
    "cumsum": lambda x: torch.cumsum(x, dim=-1),
    "argmax": lambda x: torch.argmax(x, dim=-1).to(x.dtype),
    # pads that feed no conv (a conv input's pad is a step of the conv: "nn.pad (conv input)")
    "pad_constant": lambda x: F.pad(x, (1, 2, 0, 1), value=0.5),
    "pad_reflect": lambda x: F.pad(x, (2, 2, 1, 1), mode="reflect"),
    "pad_replicate": lambda x: F.pad(x, (1, 1, 2, 2), mode="replicate"),
}

class _Ops(torch.nn.Module):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def forward(self, x: Any) -> Any:
        return tuple(OPS[n](x) for n in self.names)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "all"])
def test_each_operator_matches_torch_on_the_emulator(tmp_path: Path, mode: str) -> None:
    from tuner.bridge.extract import torch_to_relax

    names = list(OPS)
    x = torch.randn(2, 16, 8, 8)
    model = _Ops(names).eval()
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / mode, lambda w: None, cpe_mode=mode)
    with torch.no_grad():
        refs = [r.numpy() for r in model(x)]
    assert_outputs_match(run_model(result.out_dir, [x.numpy()], TARGET).output, refs, names)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OPS))
def test_where_each_operator_runs(tmp_path: Path, name: str) -> None:
    from tuner.bridge.extract import torch_to_relax

    x = torch.randn(2, 16, 8, 8)
    result = compile_model(torch_to_relax(_Ops([name]).eval(), (x,)), TARGET, tmp_path / name, lambda w: None,
                           cpe_mode="all")
    steps = [r.where for r in result.rows if r.where in ("MPE", "CPE (memory-bound)")]
    assert steps and set(steps) == {"CPE (memory-bound)"}, result.rows


# name -> its CPE kernels when each runs alone
KERNELS = {"per_channel_affine": 2, "cumsum": 1, "masked_softmax": 2, "mish": 7, "argmax": 2, "pad_reflect": 2}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_dma_matches_its_plan(tmp_path: Path, name: str) -> None:
    """The emulator's DMA counts of a kernel with a per-channel operand sliced along the channels, of the
    scan, of a where reading a bool mask constant, of mish's comparison writing a bool tensor, of
    argmax writing int64 (both stored in the model's dtype) and of a reflect pad (a take of constant
    indices per padded axis) equal the plan."""
    from tuner.bridge.extract import torch_to_relax
    from tuner.space.cpe.cuts import dma_plan

    x = torch.randn(1, 16, 8, 8)
    model = _Ops([name]).eval()
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / name, lambda w: None, cpe_mode="all",
                           fuse_cpe=False)  # each kernel alone: its DMA against its own plan
    ops = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    assert len(ops) == KERNELS[name]
    run = run_model(result.out_dir, [x.numpy()], TARGET)
    plans = [dma_plan(op, 4) for op in ops]
    expected = {k: sum(p[k] for p in plans) for k in plans[0]}
    assert {k: run.report["totals"][k] for k in expected} == expected
    with torch.no_grad():
        (ref,) = [r.numpy() for r in model(x)]
    np.testing.assert_allclose(run.output.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("groups,shape", [
    (4, (1, 32, 32, 32)),  # a group of 8 channels x 32 x 32 floats (32 KB): a row is a channel
    (2, (1, 4, 128, 128)),  # a channel of 64 KB: four rows of 16 KB each
    (2, (2, 8, 64, 64)),  # a batch of two
])
@pytest.mark.slow
def test_a_group_larger_than_ldm_runs_in_two_passes_on_the_cpes(tmp_path: Path, groups: int,
                                                                  shape: tuple[int, ...]) -> None:
    """group_norm holding a group in LDM (in and out) does not fit when the group is larger than half of
    it; such a group is normalised in two passes (rows' statistics, combined per group, then one
    multiply and add per row), every step a CPE kernel, and the result is torch's on data whose mean
    is far from zero (where E[x^2] - E[x]^2 would lose digits)."""
    from tuner.bridge.extract import torch_to_relax

    gn = torch.nn.GroupNorm(groups, shape[1]).requires_grad_(False).eval()
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
    x = torch.randn(*shape) * 0.5 + 20
    result = compile_model(torch_to_relax(gn, (x,)), TARGET, tmp_path / "gn", lambda w: None, cpe_mode="all")
    steps = [r.where for r in result.rows if r.relax_op == "nn.group_norm"]
    assert len(steps) > 3 and set(steps) == {"CPE (memory-bound)"}, result.rows
    with torch.no_grad():
        ref = gn(x).numpy()
    got = run_model(result.out_dir, [x.numpy()], TARGET).output
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-4)


class _ConcatThenBatchNorm(torch.nn.Module):
    """DenseNet's pre-activation: a batch norm (then relu) of a concat, which no kernel produces."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 8, 1)
        self.bn = torch.nn.BatchNorm2d(24)
        with torch.no_grad():  # running statistics that are not the identity
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: Any) -> Any:
        return F.relu(self.bn(torch.cat([x, self.conv(x)], 1)))


@pytest.mark.slow
def test_a_batch_norm_with_no_kernel_to_fuse_into_runs_on_the_cpes(tmp_path: Path) -> None:
    from tuner.bridge.extract import torch_to_relax

    x = torch.randn(1, 16, 8, 8)
    model = _ConcatThenBatchNorm().eval()
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "out", lambda w: None)
    bn = [r.where for r in result.rows if r.relax_op == "nn.batch_norm"]
    assert bn and set(bn) == {"CPE (memory-bound)"}, result.rows
    got = run_model(result.out_dir, [x.numpy()], TARGET).output
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)


class _GroupNormByHand(torch.nn.Module):
    """Group norm as ONNX's GroupNormalization imports: mean, variance and the centring over a
    [N, G, C/G * H * W] view, here with 32 KB groups."""

    def forward(self, x: Any) -> Any:
        v = x.reshape(x.shape[0], 8, -1)
        mean = v.mean(-1, keepdim=True)
        var = v.var(-1, keepdim=True, unbiased=False)
        return ((v - mean) / torch.sqrt(var + 1e-5)).reshape(x.shape)


@pytest.mark.slow
def test_a_long_variance_and_a_per_row_operand_run_on_the_cpes(tmp_path: Path) -> None:
    """A variance over rows too long for LDM is pooled from shorter rows' moments; the centring reads
    a [N, G, 1] mean per block of the [N, G, L] rows cut along L (an operand that varies with the
    leading indices only). Every step is a CPE kernel, the DMA counts equal the plans, and the result
    is torch's on data off zero mean (not far off: the mean itself is TVM's sequential float32 sum of
    8192 elements, which drifts from torch's pairwise one as the values grow)."""
    from tuner.bridge.extract import torch_to_relax
    from tuner.space.cpe.cuts import dma_plan

    model = _GroupNormByHand().eval()
    x = torch.randn(1, 64, 32, 32) * 0.5 + 3
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "gn", lambda w: None, cpe_mode="all",
                           fuse_cpe=False)
    steps = {r.relax_op: r.where for r in result.rows if r.where in ("MPE", "CPE (memory-bound)")}
    assert set(steps.values()) == {"CPE (memory-bound)"} and "variance" in steps, result.rows
    centring = [r.detail for r in result.rows if r.relax_op == "subtract"]
    assert centring and all("along axis 2" in d for d in centring), centring
    run = run_model(result.out_dir, [x.numpy()], TARGET)
    plans = [dma_plan(n.attrs["cpe"], 4) for n in result.graph.nodes if n.op == "cpe"]
    assert {k: run.report["totals"][k] for k in plans[0]} == {k: sum(p[k] for p in plans) for k in plans[0]}
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(run.output.reshape(ref.shape), ref, rtol=1e-3, atol=1e-4)
