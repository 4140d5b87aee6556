"""Operators compiled through the generic path (Relax LegalizeOps -> TIR -> C on the MPE), run on the
athread emulator and checked against torch (numpy arrays), each op on its own output so a wrong one
is named. Also the ONNX forms that used to fail (Clip -> isnan/where, exact GELU -> erf, layer_norm).
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

# name -> function of x [2, 4, 6, 6]; every one is a single operator (or a short chain) without a kernel
OPS: dict[str, Any] = {
    "layer_norm": lambda x: F.layer_norm(x, (6,)),
    "softmax": lambda x: torch.softmax(x, dim=1),
    "gelu_erf": lambda x: F.gelu(x),
    "relu6_clip": lambda x: F.relu6(x * 4),
    "where_isnan": lambda x: torch.where(torch.isnan(torch.log(x)), torch.zeros_like(x), x),
    "mean": lambda x: x.mean(dim=(2, 3)),
    "sum": lambda x: x.sum(dim=1),
    "max_reduce": lambda x: x.max().reshape(1),
    "max_pool": lambda x: F.max_pool2d(x, 3, 2, 1),
    "avg_pool": lambda x: F.avg_pool2d(x, 2),
    "adaptive_pool": lambda x: F.adaptive_avg_pool2d(x, 1),
    "transpose": lambda x: x.transpose(1, 3).contiguous() * 2,
    "concat": lambda x: torch.cat([x, x * 2], dim=1),
    "split": lambda x: torch.split(x, 2, dim=1)[1] + 1,
    "broadcast_add": lambda x: x + x.mean(dim=1, keepdim=True),
    "sigmoid_tanh_exp": lambda x: torch.sigmoid(x) * torch.tanh(x) + torch.exp(-x * x),
    "sin_cos": lambda x: torch.sin(x) + torch.cos(x),
    "rsqrt_abs": lambda x: torch.rsqrt(x.abs() + 1),
    "silu": lambda x: F.silu(x),
    "hardswish": lambda x: F.hardswish(x),
    "pow_div": lambda x: torch.pow(x.abs() + 0.5, 1.5) / (x * x + 1),
}


class Ops(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return tuple(fn(x) for fn in OPS.values())


def _run(out_dir: Path, x: np.ndarray) -> np.ndarray:
    return run_model(out_dir, [x], TARGET).output


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "all"])
def test_every_generic_operator_matches_torch_on_the_emulator(tmp_path: Path, mode: str) -> None:
    """mode none: every operator as plain C on the MPE; all: every one that slices as a CPE kernel."""
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 6)
    mod = torch_to_relax(Ops().eval(), (x,))
    result = compile_model(mod, TARGET, tmp_path / "ops", lambda w: None, cpe_mode=mode)
    assert not result.kernels  # none of these is a GEMM-like kernel
    generic = [r for r in result.rows if r.where in ("MPE", "CPE (memory-bound)")]
    assert {"nn.layer_norm", "nn.softmax", "nn.gelu", "clip", "isnan", "where", "mean", "sum", "max",
            "nn.max_pool2d", "nn.avg_pool2d", "concat", "split",
            "sin"} <= {r.relax_op for r in generic}
    on_cpe = {r.relax_op for r in generic if r.where == "CPE (memory-bound)"}
    if mode == "none":
        assert not on_cpe and all("legalized TIR" in r.detail for r in generic if r.relax_op != "permute_dims")
    else:  # normalisations, softmax, pools, reductions over trailing axes, element-wise and broadcast ops
        assert {"nn.layer_norm", "nn.softmax", "nn.gelu", "clip", "nn.max_pool2d", "nn.avg_pool2d", "mean",
                "sin", "add", "multiply", "concat", "split"} <= on_cpe  # concat, split: tuner.aot.cpe_region
    with torch.no_grad():
        refs = [t.numpy() for t in Ops()(x)]
    assert_outputs_match(_run(result.out_dir, x.numpy()), refs, list(OPS))


class _OnnxBlock(torch.nn.Module):
    """ReLU6 (ONNX Clip), exact GELU (ONNX Erf) and LayerNorm around a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.lin = torch.nn.Linear(8, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x: Any) -> Any:
        y = F.relu6(self.conv(x))  # [1, 8, 4, 4]
        t = y.flatten(2).transpose(1, 2)  # [1, 16, 8]
        return self.ln(F.gelu(self.lin(t)))


@pytest.mark.slow
def test_onnx_clip_erf_layer_norm(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from tuner.bridge.extract import onnx_to_relax

    torch.manual_seed(1)
    model, x = _OnnxBlock().eval(), torch.randn(1, 3, 4, 4)
    path = tmp_path / "block.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    result = compile_model(onnx_to_relax(path), TARGET, tmp_path / "onnx", lambda w: None)
    ops = {r.relax_op for r in result.rows}
    assert {"isnan", "where", "erf"} & ops or "clip" in ops
    with torch.no_grad():
        ref = model(x).numpy()
    assert_outputs_match(_run(result.out_dir, x.numpy()), [ref], ["onnx block"])


@pytest.mark.slow
def test_memory_bound_kernel_dma_matches_its_plan(tmp_path: Path) -> None:
    """A layer_norm as a CPE kernel: its emulator DMA counts equal the plan the time model uses."""

    from tuner.bridge.extract import torch_to_relax
    from tuner.space.cpe.cuts import dma_plan

    torch.manual_seed(2)
    model, x = torch.nn.LayerNorm(64).eval(), torch.randn(1, 256, 64)
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "ln", lambda w: None, cpe_mode="all")
    (node,) = [n for n in result.graph.nodes if n.op == "cpe"]
    op = node.attrs["cpe"]
    assert op.blocks >= 64 and op.ldm_bytes <= 56 * 1024
    out = result.out_dir
    totals = run_model(out, [x.numpy()], TARGET).report["totals"]
    plan = dma_plan(op, 4)
    assert {k: totals[k] for k in plan} == plan
    with torch.no_grad():
        ref = model(x).numpy()
    assert_outputs_match(np.fromfile(out / "output.bin", dtype=np.float32), [ref], ["layer_norm on the CPEs"])


class _Embedding(torch.nn.Module):
    """Token ids (int64, the first input) into an embedding, plus a gather by the same ids."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)

    def forward(self, ids: Any, x: Any) -> Any:
        return self.emb(ids) * 2 + x, torch.gather(x, 2, ids.unsqueeze(-1).expand(2, 8, 4) % 16)


@pytest.mark.slow
def test_integer_inputs_are_read_in_their_own_dtype(tmp_path: Path) -> None:
    """An int64 input (token ids) is read from its own dtype's file and kept in the model's dtype:
    the model's dtype is its float input's, and the embedding and gather match torch exactly."""
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(3)
    model = _Embedding().eval()
    ids, x = torch.randint(0, 100, (2, 8)), torch.randn(2, 8, 16)
    result = compile_model(torch_to_relax(model, (ids, x)), TARGET, tmp_path / "emb", lambda w: None)
    assert result.graph.dtype == "float32" and [t.dtype for t in result.graph.inputs] == ["int64", "float32"]
    got = run_model(result.out_dir, [ids.numpy(), x.numpy()], TARGET).output
    with torch.no_grad():
        ref = np.concatenate([t.numpy().ravel() for t in model(ids, x)])
    np.testing.assert_array_equal(got, ref)


class _Lookup(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 64)  # 256 KB: no CPE holds the table

    def forward(self, ids: Any) -> Any:
        return self.emb(ids)


@pytest.mark.slow
def test_an_embedding_lookup_gathers_table_rows_on_the_cpes(tmp_path: Path) -> None:
    """A take of table rows by runtime ids runs as the gather kernel (tuner.aot.cpe_gather): the
    result is torch's, exactly, and the emulator's DMA counts are its plan (a get of each block's ids,
    one get per row, one put per block)."""
    from tuner.aot.cpe_gather import GatherOp
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(5)
    model = _Lookup().eval()
    ids = torch.randint(0, 1000, (3, 50))
    result = compile_model(torch_to_relax(model, (ids,)), TARGET, tmp_path / "lookup", lambda w: None)
    assert [r.where for r in result.rows if r.relax_op == "take"] == ["CPE (memory-bound)"], result.rows
    (op,) = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    assert isinstance(op, GatherOp) and (op.v, op.w, op.m) == (1000, 64, 150)
    run = run_model(result.out_dir, [ids.numpy()], TARGET)
    with torch.no_grad():
        np.testing.assert_array_equal(run.output.reshape(3, 50, 64), model(ids).numpy())
    assert {k: run.report["totals"][k] for k in op.dma_plan()} == op.dma_plan()
