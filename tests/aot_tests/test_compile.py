"""AOT compilation of whole models: the output builds against swemu and matches TVM's llvm result.

AlexNet-like (max pool, flatten, dense) and ResNet-18-like (batch_norm, residual adds, global
average pooling) narrow models; a small model for the remaining MPE operators (depthwise conv, avg
and adaptive pooling, batch_matmul with a runtime operand, softmax, concat, a tuple output). Half of
the distinct workloads get a sampled tuned config, the rest fall back with a warning naming them.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import AotError, apply_best, compile_model, current_lookup  # noqa: E402
from tuner.space.space import ScheduleSpace  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")


def _relax(module: Any, inputs: tuple[Any, ...]) -> Any:
    from tuner.bridge.extract import torch_to_relax

    return torch_to_relax(module, inputs)


def _half_tuned(mod: Any) -> tuple[Any, set[str], set[str]]:
    """A lookup that returns a sampled valid config for every other distinct workload."""
    from tuner.bridge.extract import extract_relax

    # the GEMM-like tasks (memory-bound expression and CPE kernel tasks stay untuned: their generic lowering)
    keys = [layer.workload.key for layer in extract_relax(mod).layers
            if layer.workload.op not in ("expr", "cpe_kernel")]
    tuned, untuned = set(keys[1::2]), set(keys[0::2])

    def lookup(workload: Any) -> dict[str, Any] | None:
        if workload.key not in tuned:
            return None
        space = ScheduleSpace(workload, TARGET)
        return space.decode(space.sample(1, rng=7)[0])

    return lookup, tuned, untuned


def _reference(mod: Any, x: np.ndarray) -> np.ndarray:
    import tvm
    from tvm import relax

    exe = tvm.compile(mod, target="llvm")
    out = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x))
    parts = out if not hasattr(out, "numpy") else [out]
    return np.concatenate([np.asarray(p.numpy()).ravel() for p in parts])


def _build_and_run(out_dir: Path, x: np.ndarray) -> np.ndarray:
    run = run_model(out_dir, [x], TARGET)
    assert "SWTUNE_MODEL_SECONDS=" in run.stdout
    assert run.report["status"] == "ok" and not run.report["errors"]
    return run.output


def _check(name: str, module: Any, inputs: tuple[Any, ...], tmp_path: Path, caplog: Any,
           via_context: bool = False) -> Any:
    mod = _relax(module, inputs)
    lookup, tuned, untuned = _half_tuned(mod)
    with caplog.at_level(logging.WARNING, logger="tuner.aot"):
        if via_context:  # the compile-time context manager: every compilation in the block is tuned
            with apply_best(lookup):
                result = compile_model(mod, TARGET, tmp_path / name, None, name=name)
            assert current_lookup() is None
        else:
            result = compile_model(mod, TARGET, tmp_path / name, lookup, name=name)
    warned = " ".join(r.getMessage() for r in caplog.records if r.name == "tuner.aot")
    named = set(re.findall(r"workload (\S+) on ", warned))  # a plain key is a prefix of its fused form's
    for key in untuned:  # every fallback is announced, naming the workload
        assert key in named
    for key in tuned:
        assert key not in named
    statuses = {k.workload.key: k.status for k in result.kernels}
    assert {k for k, s in statuses.items() if s == "tuned"} == tuned
    assert {k for k, s in statuses.items() if s != "tuned"} == untuned
    assert tuned and untuned
    x = inputs[0].numpy().astype(np.float32)
    got = _build_and_run(result.out_dir, x)
    ref = _reference(mod, x)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5 * float(np.abs(ref).max()))
    assert np.abs(ref).max() > 0
    return result


@pytest.mark.slow
def test_alexnet_like(tmp_path: Path, caplog: Any) -> None:
    from tuner.models.torch_models import build

    module, inputs = build("alexnet", batch=1, width=0.0625, image=224)  # 224: its fc expects 6x6 maps
    result = _check("alexnet", module, inputs, tmp_path, caplog)
    where = {(r.relax_op, r.where) for r in result.rows}
    # the pools run where their simulated time is lower (MPE, or a CPE kernel of tuner.aot.cpe_ops)
    assert {("nn.max_pool2d", "MPE"), ("nn.max_pool2d", "CPE (memory-bound)")} & where
    assert ("reshape", "view (no-op)") in where
    assert sum(k.calls for k in result.kernels) == 8  # 5 conv + 3 dense
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["outputs"] == [{"shape": [1, 1000]}]


@pytest.mark.slow
def test_resnet18_like(tmp_path: Path, caplog: Any) -> None:
    from tuner.models.torch_models import build

    module, inputs = build("resnet18", batch=1, width=0.0625, image=32)
    result = _check("resnet18", module, inputs, tmp_path, caplog, via_context=True)
    ops = {r.relax_op for r in result.rows if r.where in ("MPE", "CPE (memory-bound)")}
    assert {"mean", "nn.max_pool2d"} <= ops
    fused = {r.relax_op for r in result.rows if r.where == "fused epilogue"}
    # conv -> bn -> relu, and the shortcut add with the relu after it, run inside the conv kernels
    assert {"nn.batch_norm", "nn.relu", "add"} <= fused
    assert any(k.workload.key.endswith("-ep_residual_add") for k in result.kernels)
    # each distinct (workload, config) is generated once and called per occurrence
    assert sum(k.calls for k in result.kernels) == 21 and len(result.kernels) < 21
    cpe_ops = {id(n.attrs["cpe"]) for n in result.graph.nodes if n.op == "cpe"}  # memory-bound ops' kernels
    entries = re.findall(r"^void swtune_kernel_\d+\(", (result.out_dir / "slave.c").read_text(), flags=re.M)
    assert len(entries) == len(result.kernels) + len(cpe_ops)


class _Extra(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.lin = torch.nn.Linear(16, 12)

    def forward(self, x: Any) -> Any:
        f = torch.nn.functional
        y = f.avg_pool2d(self.dw(torch.sigmoid(self.conv(x))), 2)
        z = f.adaptive_avg_pool2d(y, 2)
        t = y.flatten(2)
        s = torch.softmax(torch.matmul(t, t.transpose(1, 2)), dim=-1)
        u = self.lin(t)
        return torch.cat([s.flatten(1), u.flatten(1), z.flatten(1)], dim=1), torch.tanh(y).mean(dim=1)


@pytest.mark.slow
def test_other_operators(tmp_path: Path, caplog: Any) -> None:
    torch.manual_seed(0)
    result = _check("extra", _Extra().eval(), (torch.randn(1, 3, 8, 8),), tmp_path, caplog)
    assert {k.workload.op for k in result.kernels} == {"conv2d", "dense", "batch_matmul"}
    assert len(result.output_shapes) == 2


def test_an_operator_without_legalization_is_named_with_its_binding(tmp_path: Path) -> None:
    """An extern call (call_dps_packed) has no TIR: the error names the operator and the binding."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.call_dps_packed("my_extern_op", (x,), relax.TensorType((2, 3), "float32")),
                        name_hint="ext")
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    with pytest.raises(AotError, match=r"relax\.call_dps_packed \(binding ext\)"):
        compile_model(bb.get(), TARGET, tmp_path / "ext", lambda w: None)
