"""Issue #45: framework-style execution, the reference novel networks are measured against
(tuner.aot.framework_style, tuner.train.framework_style). One library call per primitive operator:
nothing fused across calls, no spawn shared across calls, GEMM kernels at the log's schedule for their
plain workload, a new operator composed from its torch twin; a layer without a twin refused."""

from __future__ import annotations

import copy
import textwrap
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from train_helpers import emulate_beside_torch  # noqa: E402

from tuner.aot.framework_style import calls_per_binding  # noqa: E402
from tuner.ir.expr_layer import MissingTwinError, decomposed, expression_layer  # noqa: E402
from tuner.ir.optimizers import Optimizer, OptimizerKind  # noqa: E402
from tuner.ir.training import Loss, Phase, target_shape, training_step  # noqa: E402
from tuner.train import data as train_data  # noqa: E402
from tuner.train.framework_style import library_calls  # noqa: E402
from tuner.train.program import compile_training  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GATED = ROOT / "examples" / "train" / "gated_mlp.py"
SGD = Optimizer(OptimizerKind.SGD, 0.05)


def _mlp() -> tuple[Any, tuple[Any, ...]]:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))
    return module, (torch.randn(8, 16),)


def _step(module: Any, inputs: tuple[Any, ...], framework: bool) -> Any:
    with decomposed() if framework else nullcontext():
        return training_step(copy.deepcopy(module), inputs, Loss.CROSS_ENTROPY, SGD)


def test_a_linear_layer_is_one_gemm_call_with_its_transpose_and_bias_and_the_activation_another() -> None:
    from tuner.ir.importers import torch_to_relax

    module, inputs = _mlp()
    mod = torch_to_relax(module.eval(), inputs)
    calls = calls_per_binding(mod).of_binding
    from tuner.aot.framework_style import bindings_of

    ops = {b.var.name: b.value.op.name for b in bindings_of(mod["main"]) if hasattr(b.value, "op")}
    by_call: dict[int, list[str]] = {}
    for name, call in calls.items():
        if name in ops:  # the output's binding is no operator
            by_call.setdefault(call, []).append(ops[name])
    assert sorted(sorted(v) for v in by_call.values()) == sorted(
        [sorted(["relax.permute_dims", "relax.matmul", "relax.add"])] * 2 + [["relax.tanh"]])


def test_a_primitives_backward_is_one_call_and_the_update_another() -> None:
    module, inputs = _mlp()
    step = _step(module, inputs, framework=True)
    calls = library_calls(step).of_binding
    backward = [n for n, p in step.phases.items() if p == Phase.BACKWARD]
    # tanh's backward: 1 - y*y times the adjoint, three bindings ending in the adjoint of tanh's input
    tanh_in = next(n for n in backward if n.endswith("_adjoint") and
                   len([m for m in backward if calls[m] == calls[n]]) == 3)
    assert len({calls[n] for n in backward if calls[n] == calls[tanh_in]}) == 1
    update = {calls[n] for n, p in step.phases.items() if p == Phase.UPDATE and n in calls}
    assert len(update) == 1 and not update & {calls[n] for n in backward}


def _lookup_of(step: Any) -> tuple[Any, dict[str, Any]]:
    """A tuning log of one record per plain GEMM-like workload of ``step``: a valid config other than
    the default one (so a kernel at the default would show)."""
    from tuner.bridge.extract import extract_relax
    from tuner.space import ScheduleSpace, space_for

    records: dict[str, Any] = {}
    for layer in extract_relax(step.module, fused=False).layers:
        space = space_for(layer.workload, "sw26010")
        if isinstance(space, ScheduleSpace):  # a GEMM-like task
            records[layer.workload.key] = space.decode(space.sample(8, 1)[-1])
    return (lambda w: records.get(w.key)), records


def test_framework_style_fuses_nothing_across_calls_and_runs_each_gemm_at_the_logs_schedule(tmp_path: Path) -> None:
    module, inputs = _mlp()
    ours_step, step = _step(module, inputs, framework=False), _step(module, inputs, framework=True)
    lookup, records = _lookup_of(step)
    assert records, "the step has GEMM-like tasks"
    program = compile_training(step, "sw26010", tmp_path / "fw", lookup, "mlp", framework_style=True)
    calls = library_calls(step)
    graph = program.result.graph
    for k in program.result.kernels:
        assert k.epilogue is None and getattr(k.workload, "epilogue", "none") in (None, "none")
        if k.workload.key in records:
            assert k.config == records[k.workload.key]
    for n in graph.nodes:
        members = n.attrs.get("members", [n])
        assert len({calls.call(m) for m in members}) == 1, n.relax_op
        group = n.attrs.get("group")
        if group is not None:
            assert len({calls.call(m) for m in group.nodes}) == 1
    ours = compile_training(ours_step, "sw26010", tmp_path / "ours", lookup, "mlp")
    assert program.timing.kernel_launches > ours.timing.kernel_launches


def _gated_step(framework: bool) -> tuple[Any, Any, Any]:
    from tuner.expr.workload import load_function

    module, inputs = load_function(f"{GATED}:model")(batch=8)
    reference = copy.deepcopy(module)
    step = _step(module.train(), tuple(inputs), framework)
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(3, 2, 8, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    return step, reference, batches


def test_a_new_operator_runs_as_its_twins_primitives_in_framework_style() -> None:
    ours, _, _ = _gated_step(framework=False)
    fw, _, _ = _gated_step(framework=True)

    def call_tirs(step: Any) -> int:
        from tuner.aot.framework_style import bindings_of

        ops = [getattr(getattr(b.value, "op", None), "name", "") for b in bindings_of(step.module["main"])]
        return ops.count("relax.call_tir")

    assert call_tirs(ours) > 0 and call_tirs(fw) == 0


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_both_programs_of_a_model_with_a_new_operator_match_torch_on_the_emulator(tmp_path: Path) -> None:
    for framework in (False, True):
        step, reference, batches = _gated_step(framework)
        out = tmp_path / ("fw" if framework else "ours")
        compile_training(step, "sw26010", out, None, "gated", framework_style=framework)
        got = emulate_beside_torch(step, reference, batches, SGD, out, 3)
        assert got.loss_err < 1e-4 and got.param_err < 1e-4, (framework, got.loss_err, got.param_err)


# each network of examples/novel at a size the emulator runs in seconds
SMALL = {
    "lltm": {"features": 8, "hidden": 16, "steps": 2, "classes": 3},
    "sublstm": {"features": 8, "hidden": 16, "steps": 2, "classes": 3},
    "mi_lstm": {"features": 8, "hidden": 16, "steps": 2, "classes": 3},
    "scrnn": {"features": 8, "context": 8, "hidden": 16, "steps": 2, "classes": 3},
    "involution": {"image": 8, "channels": 8, "groups": 2, "k": 3, "reduction": 2, "classes": 3},
    "capsnet": {"channels": 8, "types": 2, "din": 4, "upper": 3, "dout": 4, "iterations": 2, "classes": 3},
    "mixconv": {"image": 8, "channels": 6, "classes": 3},
    "shiftnet": {"image": 8, "channels": 18, "blocks": 1, "classes": 3},
}


def test_every_novel_network_has_a_small_size_here() -> None:
    assert {p.stem for p in (ROOT / "examples" / "novel").glob("*.py")} == set(SMALL)


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
@pytest.mark.parametrize("network", sorted(SMALL))
def test_both_programs_of_each_novel_network_match_torch_on_the_emulator(network: str, tmp_path: Path) -> None:
    from tuner.expr.workload import load_function

    module, inputs = load_function(f"{ROOT / 'examples' / 'novel' / network}.py:model")(batch=4, **SMALL[network])
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(3, 2, 4, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    for framework in (False, True):
        step = _step(module.train(), tuple(inputs), framework)
        out = tmp_path / ("framework" if framework else "swtune")
        compile_training(step, "sw26010", out, None, network, framework_style=framework)
        got = emulate_beside_torch(step, copy.deepcopy(module), batches, SGD, out, 2)
        assert got.loss_err <= 1e-4 and got.param_err <= 1e-4, (framework, got.loss_err, got.param_err)


def test_a_layer_without_a_torch_twin_is_refused_in_framework_style(tmp_path: Path) -> None:
    ops = tmp_path / "twinless.py"
    ops.write_text(textwrap.dedent('''
        from tvm import te

        def scale_rows(m=8, n=16, dtype="float32"):
            x = te.placeholder((m, n), dtype, name="data")
            s = te.placeholder((n,), dtype, name="scale")
            return [x, s, te.compute((m, n), lambda i, j: x[i, j] * s[j], name="scaled")]
    '''))
    layer = expression_layer(f"{ops}:scale_rows", {"m": 8, "n": 16})
    module = torch.nn.Sequential(torch.nn.Linear(4, 16), layer, torch.nn.Linear(16, 3))
    with pytest.raises(MissingTwinError, match="framework-style execution composes"):
        _step(module, (torch.randn(8, 4),), framework=True)
    with pytest.raises(MissingTwinError, match="no torch twin"):
        module(torch.randn(8, 4))
