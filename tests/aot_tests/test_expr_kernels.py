"""AOT compilation of a model's novel GEMM-like operators (issue #9): a conv3d that task extraction
tunes as an expression operator (tuner.bridge.extract) runs its tuned kernel in the compiled model,
with its operands by role and constant operands packed at compile time for ``pack=b``; without a
config it runs a default schedule on the CPEs, with a warning naming it. Checked against torch on swemu.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")


class _Conv3dNet(torch.nn.Module):
    """Two conv3d layers (no built-in reader takes them), a bias add and a relu between."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv3d(4, 8, 3)
        self.c2 = torch.nn.Conv3d(8, 8, 1)

    def forward(self, x: Any) -> Any:
        return self.c2(torch.relu(self.c1(x)))


def _model() -> tuple[Any, Any, Any]:
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(0)
    module, x = _Conv3dNet().eval(), torch.randn(1, 4, 5, 7, 7)
    return module, x, torch_to_relax(module, (x,))


def _configs(mod: Any) -> dict[str, dict[str, Any]]:
    """A valid config from each expression task's space: the first with pack=b (weights packed at
    compile time), the second without."""
    from tuner.bridge.extract import extract_relax, memory_bound

    # the two conv3d layers (the bias adds and relu between them are memory-bound tasks of their own)
    layers = [layer for layer in extract_relax(mod).layers if not memory_bound(layer.workload)]
    assert [layer.workload.op for layer in layers] == ["expr", "expr"]
    tgt = get_target(TARGET)
    out = {}
    for i, layer in enumerate(layers):
        space = space_for(layer.workload, tgt, {"pack": ["b" if i == 0 else "none"]})
        out[layer.workload.key] = space.decode(space.sample(1, rng=3)[0])
    return out


def _run(out_dir: Path, x: np.ndarray) -> np.ndarray:
    run = run_model(out_dir, [x], TARGET)
    assert run.report["status"] == "ok" and not run.report["errors"]
    return run.output


@pytest.mark.slow
def test_conv3d_runs_its_tuned_expression_kernels(tmp_path: Path, caplog: Any) -> None:
    module, x, mod = _model()
    configs = _configs(mod)
    with caplog.at_level(logging.WARNING, logger="tuner.aot"):
        result = compile_model(mod, TARGET, tmp_path / "m", lambda w: configs.get(w.key), name="conv3d")
    assert not [r for r in caplog.records if r.name == "tuner.aot" and "expression operator" in r.getMessage()
                and any(k in r.getMessage() for k in configs)]
    assert {k.workload.key: k.status for k in result.kernels} == dict.fromkeys(configs, "tuned")
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    tuned = [s for s in manifest["steps"] if s["where"] == "tuned kernel"]
    assert [s["relax_op"] for s in tuned] == ["nn.conv3d", "nn.conv3d"]
    assert {k["workload_key"] for k in manifest["kernels"]} == set(configs)
    # the pack=b kernel reads its weights packed at compile time: no packing step at run time
    assert any(k.packs for k in result.kernels) and not [n for n in result.graph.nodes if n.op == "pack_b"]
    # both kernels are in the simulated whole-model time as CPE kernels
    assert result.timing is not None
    assert sum(1 for s in result.timing.steps if s.relax_op == "nn.conv3d" and s.where == "CPE kernel") == 2
    got = _run(result.out_dir, x.numpy())
    with torch.no_grad():
        ref = module(x).numpy().ravel()
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5)


@pytest.mark.slow
def test_untuned_conv3d_runs_a_default_schedule_on_the_cpes(tmp_path: Path, caplog: Any) -> None:
    """Issue #46: without a record, the expression operator runs a near record or the OpenACC-like
    baseline on the CPEs (tuner.aot.untuned), as an untuned built-in conv does."""
    module, x, mod = _model()
    configs = _configs(mod)
    first = next(iter(configs))
    with caplog.at_level(logging.WARNING, logger="tuner.aot"):
        result = compile_model(mod, TARGET, tmp_path / "m", lambda w: configs.get(w.key) if w.key == first else None,
                               name="conv3d")
    warned = [r.getMessage() for r in caplog.records if r.name == "tuner.aot"]
    (untuned,) = set(configs) - {first}
    assert any(untuned in m and "untuned expression operator" in m for m in warned)
    status = {k.workload.key: k.status for k in result.kernels}
    assert status[first] == "tuned" and status[untuned].startswith("fallback: ")
    where = [r.where for r in result.rows if r.relax_op == "nn.conv3d"]
    assert sorted(where) == ["fallback kernel", "tuned kernel"]
    got = _run(result.out_dir, x.numpy())
    with torch.no_grad():
        ref = module(x).numpy().ravel()
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5)


def _einsum(runtime_b: bool) -> tuple[Any, list[np.ndarray], np.ndarray]:
    """``einsum("ik,kj,k->ij")``: three operands (roles a, b, a1), the scale vector a constant and
    the [k, j] operand a constant or a second model input."""
    from tvm import relax

    rng = np.random.default_rng(0)
    x, w, s = (rng.standard_normal(shape).astype(np.float32) for shape in ((20, 24), (24, 16), (24,)))
    bb = relax.BlockBuilder()
    params = [relax.Var("x", relax.TensorType(x.shape, "float32"))]
    if runtime_b:
        params.append(relax.Var("w", relax.TensorType(w.shape, "float32")))
    with bb.function("main", params):
        with bb.dataflow():
            b = params[1] if runtime_b else relax.const(w)
            out = bb.emit_output(bb.emit(relax.op.einsum((params[0], b, relax.const(s)), "ik,kj,k->ij")))
        bb.emit_func_output(out)
    return bb.get(), [x, w] if runtime_b else [x], np.einsum("ik,kj,k->ij", x, w, s)


@pytest.mark.parametrize(("runtime_b", "cpe_mode"), [(False, "faster"), (True, "none"), (True, "all")],
                         ids=["constant", "runtime-mpe-pack", "runtime-cpe-pack"])
def test_three_operand_einsum_with_packed_b(tmp_path: Path, runtime_b: bool, cpe_mode: str) -> None:
    from tuner.bridge.extract import extract_relax

    mod, inputs, ref = _einsum(runtime_b)
    (layer,) = extract_relax(mod).layers
    space = space_for(layer.workload, get_target(TARGET), {"pack": ["b"]})
    config = space.decode(space.sample(1, rng=3)[0])
    result = compile_model(mod, TARGET, tmp_path / "e", lambda w: config if w.key == layer.workload.key else None,
                           name="einsum", cpe_mode=cpe_mode)
    (k,) = result.kernels
    assert k.tuned and len(k.roles) == 3 and k.packs
    header = (result.out_dir / "swtune_kernel.h").read_text()
    assert all(f"*{r};" in header or f"*{r}," in header for r in k.roles)
    # a constant b is packed at compile time; a model input by a step before each call: the MPE's loop
    # nest, or (cpe_mode all) the CPE transpose of b split into tiles
    packs = [n for n in result.graph.nodes if n.op == "pack_b" or n.attrs.get("mpe_op") == "pack_b"]
    assert len(packs) == (1 if runtime_b else 0)
    assert all(n.op == ("cpe" if cpe_mode == "all" else "pack_b") for n in packs)
    got = run_model(result.out_dir, list(inputs), TARGET).output
    np.testing.assert_allclose(got, ref.ravel(), rtol=1e-3, atol=1e-5)
