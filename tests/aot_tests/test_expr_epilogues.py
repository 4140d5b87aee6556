"""A residual add or multiply fused into an expression kernel (tuner.aot.fusion): a conv3d (an
expression operator) whose output is multiplied by another activation of its shape -- as a backward
pass multiplies a derived data gradient by relu's mask. Task extraction lists the fused form; the
compiler builds it where it is tuned (the operand's tile fetched by a get per put, as planned) and
undoes the fusion where only the plain form is. Checked against torch on swemu.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.timing import kernel_seconds  # noqa: E402
from tuner.errors import InvalidWorkloadError  # noqa: E402
from tuner.expr.workload import ExprWorkload  # noqa: E402
from tuner.measure.simulator import epilogue_cycles  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")


class _GatedConv3d(torch.nn.Module):
    """conv3d (no bias: the multiply reads the kernel's own output) times a second input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(4, 8, 3, bias=False)

    def forward(self, x: Any, gate: Any) -> Any:
        return self.conv(x) * gate


def _model() -> tuple[Any, list[Any], Any]:
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(0)
    module = _GatedConv3d().eval()
    inputs = [torch.randn(1, 4, 5, 7, 7), torch.randn(1, 8, 3, 5, 5)]
    return module, inputs, torch_to_relax(module, tuple(inputs))


def _config(workload: Any) -> dict[str, Any]:
    space = space_for(workload, get_target(TARGET))
    return dict(space.decode(space.sample(1, rng=5)[0]))


def _compile(mod: Any, out: Path, configs: dict[str, dict[str, Any]], fuse: bool = True) -> Any:
    return compile_model(mod, TARGET, out, lambda w: configs.get(w.key), name="gated", cpe_mode="none",
                         group_launches=False, fuse=fuse)


def _reference(module: Any, inputs: list[Any]) -> np.ndarray:
    with torch.no_grad():
        return module(*inputs).numpy().ravel()


@pytest.mark.slow
def test_the_fused_form_is_the_task_and_runs_with_the_planned_gets(tmp_path: Path) -> None:
    from tuner.bridge.extract import extract_relax, memory_bound

    module, inputs, mod = _model()
    (layer,) = [layer for layer in extract_relax(mod).layers if not memory_bound(layer.workload)]
    fused = layer.workload
    assert isinstance(fused, ExprWorkload) and fused.epilogue == "residual_multiply"
    assert fused.key.endswith("-ep_residual_multiply")  # tuned in the form the compiler builds
    plain = replace(fused, epilogue="none")
    config = _config(fused)
    result = _compile(mod, tmp_path / "fused", {fused.key: config})
    (k,) = result.kernels
    assert k.workload.key == fused.key and k.status == "tuned"
    assert k.epilogue is not None and k.epilogue.residual and k.epilogue.name == "multiply"
    assert not [n for n in result.graph.nodes if n.op == "tir" and n.relax_op == "multiply"]
    run = run_model(result.out_dir, [t.numpy() for t in inputs], TARGET)
    np.testing.assert_allclose(run.output, _reference(module, inputs), rtol=1e-4, atol=1e-5)
    # the same schedule without the epilogue (the multiply then runs on the MPE, moving nothing by DMA)
    base_result = _compile(mod, tmp_path / "plain", {plain.key: config}, fuse=False)
    assert [k.workload.key for k in base_result.kernels] == [plain.key]
    base = run_model(base_result.out_dir, [t.numpy() for t in inputs], TARGET)
    space = space_for(fused, get_target(TARGET))
    a = space.analyze(space.encode(config)[None, :])
    assert a.epilogue is not None
    assert run.report["totals"]["get_reqs"] == base.report["totals"]["get_reqs"] + int(a.epilogue.get.total_requests[0])
    assert run.report["totals"]["get_bytes"] == base.report["totals"]["get_bytes"] + int(a.epilogue.get.total_bytes[0])


@pytest.mark.slow
def test_where_only_the_plain_form_is_tuned_the_fusion_is_undone(tmp_path: Path) -> None:
    from tuner.bridge.extract import extract_relax, memory_bound

    module, inputs, mod = _model()
    (layer,) = [layer for layer in extract_relax(mod).layers if not memory_bound(layer.workload)]
    plain = replace(layer.workload, epilogue="none")
    result = _compile(mod, tmp_path / "m", {plain.key: _config(plain)})
    (k,) = result.kernels
    assert k.workload.key == plain.key and k.epilogue is None
    # the multiply is a step of its own again, right after the kernel (and the copy that strips a
    # pitched output's padding), and no note claims it fused
    nodes = result.graph.nodes
    at = next(i for i, n in enumerate(nodes) if n.op == "kernel")
    written = nodes[at + 1].output if nodes[at + 1].op == "unpitch" else nodes[at].output
    mul = nodes[at + 1 + (nodes[at + 1].op == "unpitch")]
    assert mul.op == "tir" and mul.relax_op == "multiply" and mul.inputs[0].root is written.root
    assert not [r for r in result.rows if r.relax_op == "multiply" and "fused" in r.where]
    run = run_model(result.out_dir, [t.numpy() for t in inputs], TARGET)
    np.testing.assert_allclose(run.output, _reference(module, inputs), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_untuned_the_fused_form_runs_its_default_schedule(tmp_path: Path) -> None:
    """Issue #46: neither form tuned, the fused form runs the kind's baseline with its epilogue."""
    module, inputs, mod = _model()
    result = _compile(mod, tmp_path / "m", {})
    (k,) = result.kernels
    assert k.status == "fallback: untuned" and k.epilogue is not None and k.workload.epilogue == "residual_multiply"
    assert not [n for n in result.graph.nodes if n.op == "tir" and n.relax_op in ("nn.conv3d", "multiply")]
    run = run_model(result.out_dir, [t.numpy() for t in inputs], TARGET)
    np.testing.assert_allclose(run.output, _reference(module, inputs), rtol=1e-4, atol=1e-5)


def test_an_expression_workload_carries_its_epilogue_through_json() -> None:
    from tuner.bridge.extract import extract_relax, memory_bound

    _, _, mod = _model()
    (layer,) = [layer for layer in extract_relax(mod).layers if not memory_bound(layer.workload)]
    w = layer.workload
    assert w.to_json()["epilogue"] == "residual_multiply"
    back = ExprWorkload.from_json(w.to_json())
    assert back.key == w.key and back.epilogue == w.epilogue
    plain = replace(w, epilogue="none")
    assert "epilogue" not in plain.to_json() and plain.key == w.key.removesuffix("-ep_residual_multiply")
    with pytest.raises(InvalidWorkloadError, match="epilogue"):
        ExprWorkload.from_json({**w.to_json(), "epilogue": "residual_divide"})
    # the operand's tile costs a get per put and LDM for one output tile: the fused kernel is slower ...
    tgt = get_target(TARGET)
    config = _config(w)
    fused_space, plain_space = space_for(w, tgt), space_for(plain, tgt)
    fa, pa = (s.analyze(s.encode(config)[None, :]) for s in (fused_space, plain_space))
    assert fa.epilogue is not None and pa.epilogue is None
    assert fa.epilogue.get.total_bytes[0] == pa.c.total_bytes[0] > 0  # the output's tiles, read once more
    assert fa.ldm_total[0] > pa.ldm_total[0]
    fused_s, plain_s = (kernel_seconds(s, [config])[0][0] for s in (fused_space, plain_space))
    # ... whose gets run under the tile's compute (issued when the tile starts): less than all of it added
    ep_dma, ep_work = epilogue_cycles(tgt, fa)
    assert 0 < fused_s - plain_s < float(ep_dma[0] + ep_work[0]) / tgt.clock_hz
