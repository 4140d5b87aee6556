"""space_for and the workload JSON round-trip: an expression operator travels like a built-in op."""

import json
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from tuner.errors import InvalidWorkloadError
from tuner.expr.workload import ExprWorkload, workload_from_op
from tuner.measure.simulator import Simulator
from tuner.space import ScheduleSpace, space_for
from tuner.space.expr_space import ExprSpace
from tuner.workloads import Dense, workload_from_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"


def _weighted_gemm() -> ExprWorkload:
    return workload_from_op(f"{EXAMPLES}/linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36})


def test_space_for_picks_the_space_class():
    assert type(space_for(Dense(8, 8, 8), "sw26010")) is ScheduleSpace
    space = space_for(_weighted_gemm(), "sw26010", restrict={"share": ["none"]})
    assert isinstance(space, ExprSpace)
    assert space.knobs[space.knob_index["share"]].choices == ("none",)


def test_expr_workload_round_trips_through_workload_from_json():
    wl = _weighted_gemm()
    spec = json.loads(wl.canonical_json())
    assert spec["op"] == "expr" and "T.prim_func" in spec["script"]
    back = workload_from_json(json.dumps(spec))
    assert isinstance(back, ExprWorkload)
    assert back.key == wl.key and back == wl and back.expr == wl.expr
    # the rebuilt operator's space is the same space (same knobs, same valid configs)
    a, b = space_for(wl, "sw26010"), space_for(back, "sw26010")
    rows = a.sample(64, 0)
    assert a.names == b.names and b.analyze(rows).valid.all()


def test_simulator_measures_an_expression_workload_from_its_json():
    wl = workload_from_json(_weighted_gemm().to_json())
    space = space_for(wl, "sw26010")
    configs = [space.decode(r) for r in space.sample(3, 1)]
    results = Simulator(noise=0.0).measure(wl, "sw26010", configs)
    assert [r.status for r in results] == ["ok"] * 3
    assert all(r.mean_time > 0 for r in results)


@pytest.mark.parametrize("spec, fragment", [
    ({"op": "expr", "script": 3}, "string 'script'"),
    ({"op": "expr", "script": "not a script"}, "does not parse"),
    ({"op": "expr", "script": "x", "extra": 1}, "unknown fields"),
])
def test_bad_expr_specs_are_invalid_workloads(spec, fragment):
    with pytest.raises(InvalidWorkloadError, match=fragment):
        workload_from_json(spec)
