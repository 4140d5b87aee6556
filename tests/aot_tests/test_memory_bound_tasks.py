"""Memory-bound operators as tuned expression tasks (issue #10 item 3): element-wise operators that do
not fuse, a broadcast multiply, a residual-style add of two activations, a transpose, an unpadded max
pool and a sum are listed by task extraction with their call counts, compiled as tuned expression
kernels on the CPEs when their tuned time beats the untuned lowering (rule-picked CPE blocks or the
MPE), timed as CPE kernels with their simulated time, and checked against torch on swemu.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.launch_groups import phase_seconds  # noqa: E402
from tuner.aot.timing import CPE, kernel_seconds  # noqa: E402
from tuner.baseline import openacc_baseline  # noqa: E402
from tuner.measure.simulator import simulate  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"
MEMORY_BOUND = {"nn.relu", "multiply", "add", "permute_dims", "nn.max_pool2d", "sum"}
needs_gcc = pytest.mark.needs("gcc", "make")


class _Net(torch.nn.Module):
    """A conv whose output has two readers (so nothing after its bias add fuses), then memory-bound
    operators: relu, two scalings by 0.5 (one operator, two calls), an add of two activations, a
    transpose, a 2x2 max pool without padding and a sum over the spatial axes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 32, 3, padding=1)

    def forward(self, x: Any) -> Any:
        y = self.conv(x)
        z = torch.relu(y) * 0.5 + y * 0.5
        return z.permute(0, 2, 3, 1), torch.nn.functional.max_pool2d(z, 2).sum(dim=(2, 3))


@pytest.fixture(scope="module")
def model() -> tuple[Any, Any, Any]:
    from tuner.bridge.extract import torch_to_relax

    torch.manual_seed(0)
    module, x = _Net().eval(), torch.randn(1, 8, 48, 48)
    return module, x, torch_to_relax(module, (x,))


@pytest.fixture(scope="module")
def tasks(model: tuple[Any, Any, Any]) -> Any:
    from tuner.bridge.extract import extract_relax

    return extract_relax(model[2])


def _best(w: Any, n: int = 256) -> dict[str, Any]:
    """The simulator's best of ``n`` sampled configs and the baseline: a stand-in for tune-model."""
    space = space_for(w, TARGET)
    rows = np.concatenate([space.sample(n, rng=5), space.encode(openacc_baseline(space))[None, :]])
    return space.decode(rows[int(np.argmin(simulate(space, rows)))])


@pytest.fixture(scope="module")
def configs(tasks: Any) -> dict[str, dict[str, Any]]:
    return {layer.workload.key: _best(layer.workload) for layer in tasks.layers}


def _reference(module: Any, x: Any) -> np.ndarray:
    with torch.no_grad():
        return np.concatenate([o.numpy().ravel() for o in module(x)])


def test_extraction_lists_the_memory_bound_tasks_with_their_counts(tasks: Any) -> None:
    from tuner.bridge.extract import memory_bound

    by_name = {layer.name.rsplit("_", 1)[0]: layer for layer in tasks.layers}
    assert set(by_name) == {"conv2d", "relu", "multiply", "add", "transpose", "max_pool2d", "sum"}
    assert by_name["multiply"].weight == 2  # y * 0.5 and relu(y) * 0.5: one operator, two calls
    assert all(by_name[n].weight == 1 for n in ("relu", "add", "transpose", "max_pool2d", "sum"))
    assert all(memory_bound(layer.workload) for name, layer in by_name.items() if name != "conv2d")
    pool, total = by_name["max_pool2d"].workload.expr, by_name["sum"].workload.expr
    assert pool.reducer.value == "max" and [a.extent for a in pool.reduce] == [2, 2]
    assert total.reducer.value == "sum" and [a.extent for a in total.spatial] == [1, 32]
    assert not by_name["add"].workload.expr.reduce and len(by_name["add"].workload.expr.inputs) == 2
    assert "nn.relu" not in tasks.untuned and "sum" not in tasks.untuned  # taken, not listed untuned


def test_memory_bound_tasks_take_a_share_of_the_model_budget(tasks: Any) -> None:
    from tuner.bridge.extract import trial_budget

    # one conv at 64 trials, six memory-bound tasks at a quarter of that (at least 8)
    assert trial_budget(tasks.layers, 64) == 64 + 6 * 16
    assert trial_budget(tasks.layers, 16) == 16 + 6 * 8
    assert trial_budget(tasks.layers, 4) == 4 + 6 * 4  # never more than a GEMM-like task's trials


def test_the_space_of_a_memory_bound_operator_makes_sense(tasks: Any) -> None:
    """Work split over the CPEs, DMA blocks, double buffering and SIMD along the contiguous axis,
    for an operator with no reduction; the analysis is vectorised (thousands of configs at once)."""
    relu = next(layer.workload for layer in tasks.layers if layer.name.startswith("relu"))
    space = space_for(relu, TARGET)
    names = {k.name for k in space.knobs}
    assert {"grid", "dma", "db_a", "db_b", "db_c", "simd", "inner", "put_lines"} <= names
    rows = space.sample(2000, rng=0)
    a = space.analyze(rows)
    assert a.valid.all() and len(rows) == 2000
    assert (a.active_cpes > 1).any() and a.active_cpes.max() == 64  # the work spreads over the mesh
    assert (a.simd_width > 1).any() and a.c.block_bytes.max() >= 128  # vector lanes; whole-row DMA blocks
    assert a.double_buffer_b.any() and (a.double_buffer_c).any()
    times = simulate(space, rows, a)
    assert times.min() < 0.5 * np.median(times)  # the schedule matters: tuning has something to find


@pytest.mark.slow
@needs_gcc
def test_compiled_with_tuned_expression_kernels_matches_torch(model: tuple[Any, Any, Any], tasks: Any,
                                                              configs: dict[str, dict[str, Any]],
                                                              tmp_path: Path, caplog: Any) -> None:
    """With the MPE as the untuned lowering (cpe_mode none), every memory-bound operator's tuned
    kernel is faster, so all of them run as tuned expression kernels on the CPEs."""
    module, x, mod = model
    with caplog.at_level(logging.WARNING, logger="tuner.aot"):
        result = compile_model(mod, TARGET, tmp_path / "m", lambda w: configs.get(w.key), name="mb",
                               cpe_mode="none")
    assert not [r for r in caplog.records if r.name == "tuner.aot"]
    tuned = {r.relax_op for r in result.rows if r.where == "tuned kernel"}
    assert MEMORY_BOUND <= tuned
    assert {k.workload.key for k in result.kernels} == set(configs) and all(k.tuned for k in result.kernels)
    assert result.timing is not None  # each one's step: a CPE kernel with the simulator's time
    steps = [s for s in result.timing.steps if s.detail.startswith("expr-")]
    assert {s.relax_op for s in steps} == MEMORY_BOUND and all(s.where == CPE and s.tuned_s > 0 for s in steps)
    got = run_model(result.out_dir, [x.numpy()], TARGET)
    assert got.report["status"] == "ok" and not got.report["errors"]
    np.testing.assert_allclose(got.output, _reference(module, x), rtol=1e-3, atol=1e-5)


@pytest.mark.slow
@needs_gcc
def test_default_compile_keeps_the_faster_lowering_and_times_it(model: tuple[Any, Any, Any],
                                                                  configs: dict[str, dict[str, Any]],
                                                                  tmp_path: Path, monkeypatch: Any) -> None:
    """By default the rule-picked CPE blocks compete: a memory-bound operator runs its tuned kernel only
    where that simulates faster; its step is a CPE kernel with the simulator's time, its baseline the
    untuned lowering's; the MPE's share does not grow. The transpose has no rule-picked kernel here
    (its untuned lowering is the MPE's copy), so at least its tuned kernel wins."""
    import tuner.aot.cpe_ops as cpe_ops

    monkeypatch.setattr(cpe_ops, "plan_transpose", lambda *a: None)
    module, x, mod = model
    untuned = compile_model(mod, TARGET, tmp_path / "u", lambda w: configs.get(w.key) if w.op != "expr" else None)
    result = compile_model(mod, TARGET, tmp_path / "t", lambda w: configs.get(w.key))
    assert untuned.timing is not None and result.timing is not None
    kernel_steps = [n for n in result.graph.nodes if n.op == "kernel" and n.attrs["workload"].op == "expr"]
    assert "permute_dims" in {n.relax_op for n in kernel_steps}, "the tuned transpose did not beat the MPE"
    by_key = {k.workload.key: k for k in result.kernels}
    tgt = get_target(TARGET)
    for n in kernel_steps:
        w = n.attrs["workload"]
        times, prepass = kernel_seconds(space_for(w, TARGET), [by_key[w.key].config])
        # it won against the untuned lowering, like with like: CPE kernels as if they shared a spawn,
        # the MPE's C with none
        shared = phase_seconds(tgt)
        untuned_cost = n.attrs["untuned_s"] + (shared if n.attrs["untuned_on_cpe"] else 0.0)
        assert float(times[0] + prepass[0]) + shared < untuned_cost
        step = next(s for s in result.timing.steps if s.source == n.source and s.detail.startswith(w.key))
        # a later phase of a shared spawn: a barrier instead of its spawn + join (in the baseline program
        # too when its untuned lowering runs on the CPEs)
        grouped = 0.0 if step.spawned else shared
        base_grouped = grouped if n.attrs["untuned_on_cpe"] else 0.0
        assert step.where == CPE and step.baseline_s == pytest.approx(n.attrs["untuned_s"] + base_grouped)
        assert step.tuned_s == pytest.approx(float(times[0]) + grouped)
    assert result.timing.tuned_s < untuned.timing.tuned_s
    assert result.timing.mpe_fraction <= untuned.timing.mpe_fraction + 1e-12
    got = run_model(result.out_dir, [x.numpy()], TARGET)
    np.testing.assert_allclose(got.output, _reference(module, x), rtol=1e-3, atol=1e-5)


def test_transpose_kernel_is_a_layout_copy_expression() -> None:
    from tuner.ir.relax_ops import transpose_expression

    w = transpose_expression((2, 3, 4), (0, 2, 1), "float32")
    e = w.expr
    assert not e.reduce and [a.extent for a in e.spatial] == [2, 4, 3]
    # out[i, j, k] = x[i, k, j]: the input's last index moves with the output's middle axis
    assert [d.coefs for d in e.inputs[0].dims] == [((e.axes[0].name, 1),), ((e.axes[2].name, 1),),
                                                   ((e.axes[1].name, 1),)]
    assert w.key == transpose_expression((2, 3, 4), (0, 2, 1), "float32").key
