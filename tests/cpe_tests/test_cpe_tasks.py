"""Memory-bound CPE kernels as tuning tasks (tuner.kinds.cpe_kernel, issue #10 item 3): a model's softmax,
layer_norm and padded max pool become workloads that round-trip through JSON, get a space whose
analysis agrees with the compiler's kernel, are measured by the simulator with noise, are searched
by their own strategy, and compile at the tuned config (SIMD included), checked on swemu against torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.baseline import baseline_config  # noqa: E402
from tuner.bridge.extract import extract_relax, torch_to_relax  # noqa: E402
from tuner.errors import InvalidWorkloadError, UnsupportedStrategyError  # noqa: E402
from tuner.kinds.cpe_kernel.search import CpeKernelSearch  # noqa: E402
from tuner.measure.base import Status  # noqa: E402
from tuner.measure.simulator import Simulator  # noqa: E402
from tuner.search import strategy_names  # noqa: E402
from tuner.search.base import RandomSearch  # noqa: E402
from tuner.space.cpe.cuts import dma_plan  # noqa: E402
from tuner.space.cpe.plan import CpeOp  # noqa: E402
from tuner.space.cpe.space import CpeKernelSpace  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.task_kind import kind_of  # noqa: E402
from tuner.workloads import workload_from_json  # noqa: E402

TARGET = "sw26010"


class _Net(torch.nn.Module):
    """A layer_norm over channels-last rows, a softmax, and a padded max pool (multi-block ops)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x: Any) -> Any:
        y = torch.softmax(self.norm(x), dim=-1)
        return torch.nn.functional.max_pool2d(y, 3, 2, 1)


@pytest.fixture(scope="module")
def model() -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    net, x = _Net().eval(), torch.randn(1, 8, 16, 64)
    with torch.no_grad():
        net.norm.weight.normal_()
        net.norm.bias.normal_()
    return net, x, torch_to_relax(net, (x,))


@pytest.fixture(scope="module")
def tasks(model: Any) -> dict[str, Any]:
    layers = extract_relax(model[2]).layers
    return {layer.workload.name: layer.workload for layer in layers if layer.workload.op == "cpe_kernel"}


@pytest.mark.slow
def test_multi_block_operators_are_tasks_that_round_trip(tasks: dict[str, Any]) -> None:
    assert set(tasks) == {"nn_layer_norm", "nn_softmax", "nn_max_pool2d"}
    for wl in tasks.values():
        back = workload_from_json(wl.to_json())
        assert back.key == wl.key and back.key.startswith("cpe-") and back.flops > 0
    # layer_norm's gamma and beta are constants of the model: parameters named const_* in its identity
    assert "const_1" in tasks["nn_layer_norm"].script and "const_2" in tasks["nn_layer_norm"].script
    with pytest.raises(InvalidWorkloadError):
        workload_from_json({"op": "cpe_kernel", "name": "bad", "script": "not a script"})
    with pytest.raises(InvalidWorkloadError):
        workload_from_json({**tasks["nn_softmax"].to_json(), "dtype": "float64"})


@pytest.mark.slow
def test_space_agrees_with_the_compiled_kernel_and_the_pool_cuts_rows(tasks: dict[str, Any]) -> None:
    for name, wl in tasks.items():
        space = space_for(wl, TARGET)
        assert isinstance(space, CpeKernelSpace) and len(space.valid_rows) >= 20, (name, space)
        default = space.default_config()
        assert baseline_config(space) == default  # the baseline is what the untuned program runs
        seconds, _ = space.exact_seconds(default)
        table = float(space.analyze(space.encode(default)[None, :]).seconds[0])
        assert seconds == pytest.approx(table, rel=1e-9)  # the default is counted on its own body
    assert "rows" in space_for(tasks["nn_max_pool2d"], TARGET).plans  # 3x3 stride 2 pad 1: a halo cut
    # a cut along the normalised axis would change the result: not in the space
    assert "axis3" not in space_for(tasks["nn_softmax"], TARGET).plans
    # SIMD is a knob and vectorises the softmax body: fewer cycles at 4 lanes than scalar, same blocks
    space = space_for(tasks["nn_softmax"], TARGET)
    scalar = {**space.default_config(), "simd": 1}
    vector = {**scalar, "simd": 4}
    assert space.exact_seconds(vector)[0] < space.exact_seconds(scalar)[0]


def test_simulator_measures_with_noise_and_reports_bad_configs_as_data(tasks: dict[str, Any]) -> None:
    wl = tasks["nn_softmax"]
    space = space_for(wl, TARGET)
    default = space.default_config()
    got = Simulator(noise=0.02, repeats=3).measure(wl, TARGET, [default, {**default, "cut": "axis9"},
                                                                {**default, "block": 10**6}])
    assert got[0].status is Status.OK and len(set(got[0].times)) == 3
    assert got[0].details["model_seconds"] == pytest.approx(space.exact_seconds(default)[0])
    assert [r.status for r in got[1:]] == [Status.INVALID_CONFIG, Status.INVALID_CONFIG]


def test_search_finds_the_best_config_in_few_measurements(tasks: dict[str, Any]) -> None:
    wl = tasks["nn_layer_norm"]
    space = space_for(wl, TARGET)
    kind = kind_of(space.workload)
    assert isinstance(kind.strategy(space, "model", seed=0), CpeKernelSearch)  # its own model-guided search
    drawn = kind.strategy(space, "random", seed=0)  # random as asked, never the model in its place
    configs = drawn.ask(8)
    assert isinstance(drawn, RandomSearch) and len(configs) == 8
    assert space.is_valid(np.stack([space.encode(c) for c in configs])).all()
    assert not kind.runs_strategy("tpe")
    with pytest.raises(UnsupportedStrategyError, match="runs the search strategies"):
        kind.strategy(space, "tpe", seed=0)
    assert "cpe_model" not in strategy_names()  # not offered for other spaces
    best = min(space.exact_seconds(space.decode(r))[0] for r in space.valid_rows)
    search, backend = CpeKernelSearch(space, seed=0), Simulator(noise=0.02, seed=1)
    for _ in range(4):
        configs = search.ask(4)
        search.tell(configs, backend.measure(wl, TARGET, configs))
    found = space.exact_seconds(search.best_config)[0]
    assert found <= best * 1.05, (found, best)
    assert search.n_measured == 16 and len({tuple(r) for r in search.measured_index}) == 16


@pytest.mark.slow
def test_compile_runs_the_tuned_configs_and_matches_torch_on_the_emulator(model: Any, tasks: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    net, x, mod = model
    chosen = {}
    for wl in tasks.values():  # a config other than the compiler's own choice, SIMD where it vectorises
        space = space_for(wl, TARGET)
        default = space.default_config()
        rows = [space.decode(r) for r in space.valid_rows]
        others = [c for c in rows if c != default and c["simd"] == max(space.codes[4])] or \
            [c for c in rows if c != default]
        chosen[wl.key] = others[len(others) // 2]
    # each kernel at its tuned config (fused, a faster kernel would replace them: test_cpe_fusion.py)
    result = compile_model(mod, TARGET, tmp_path / "out", lambda w: chosen.get(w.key), fuse_cpe=False)
    ops = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe" and isinstance(n.attrs["cpe"], CpeOp)]
    assert len(ops) == 3 and all(op.tuned and op.config == chosen[op.workload.key] for op in ops)
    assert any(op.lanes > 1 for op in ops)
    run = run_model(tmp_path / "out", [x.numpy()], TARGET)
    with torch.no_grad():
        ref = net(x).numpy()
    np.testing.assert_allclose(run.output.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)
    # the emulator's DMA: the sum of the analysis' counts of each kernel's configuration
    keys = ("get_reqs", "get_bytes", "put_reqs", "put_bytes")
    every = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    assert every == ops  # nothing else runs on the CPEs here
    assert {k: run.report["totals"][k] for k in keys} == {k: sum(dma_plan(op, 4)[k] for op in ops) for k in keys}


def test_simd_configs_start_at_blocks_long_enough_to_vectorise() -> None:
    """An element-wise gelu cut along its last axis: blocks of 1 or 2 elements have no loop of 4 lanes
    (NO_BODY at simd 4), larger ones do; the SIMD configurations are counted from those."""
    from tvm import relax

    from tuner.ir.relax_reader import read_relax
    from tuner.space.cpe.task import kernel_workload

    x = relax.Var("x", relax.TensorType((4, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.gelu(x)))
        bb.emit_func_output(out)
    (node,) = [n for n in read_relax(bb.get(), "sw26010").nodes if n.op == "tir"]
    space = space_for(kernel_workload(node, "float32"), TARGET)
    assert "axis1" in space.plans
    vector = [space.decode(r) for r in space.valid_rows if space.decode(r)["simd"] == 4]
    assert {c["cut"] for c in vector} >= {"axis1"} and min(c["block"] for c in vector if c["cut"] == "axis1") >= 4
    short = {"cut": "axis1", "block": 2, "db": 0, "active": 32, "simd": 4}
    assert not space.analyze(space.encode(short)[None, :]).valid[0]
    long = {**short, "block": 16, "active": 16}
    assert space.exact_seconds(long)[0] < space.exact_seconds({**long, "simd": 1})[0]


def test_an_operator_that_does_not_legalize_on_a_slice_has_no_plan_there() -> None:
    """TVM's errors (RuntimeError subclasses) while legalizing a slice mean "no plan", not a crash: a
    layer_norm over the last axis given a slice that cuts that axis (its gamma then mismatches)."""
    from tvm import relax

    from tuner.space.cpe.cuts import _legalize_sliced

    x = relax.Var("x", relax.TensorType((1, 8, 16), "float32"))
    g = relax.Var("g", relax.TensorType((16,), "float32"))
    call = relax.op.nn.layer_norm(x, g, g, [-1])
    assert _legalize_sliced(call, [(1, 8, 16), None, None], "float32") is not None
    assert _legalize_sliced(call, [(1, 8, 4), None, None], "float32") is None
