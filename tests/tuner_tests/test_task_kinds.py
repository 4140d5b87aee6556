"""The TaskKind protocol and registry: the declared kinds, and a new kind (tests/toy_kind.py) that
becomes a full task kind from one module and one registration line."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import toy_kind

from tuner.baseline import baseline_config, baseline_time
from tuner.bridge.extract import memory_bound
from tuner.errors import InvalidWorkloadError
from tuner.measure.base import Status
from tuner.measure.simulator import Simulator
from tuner.space.factory import space_for
from tuner.task_kind import TaskKind, kind_of, kind_of_op, kinds, register, unregister
from tuner.tune import tune_workloads
from tuner.workloads import WORKLOAD_TYPES, Dense, workload_from_json

TARGET = "sw26010"


@pytest.fixture
def axpy() -> Iterator[TaskKind]:
    kind = register(toy_kind.KIND)  # the one registration line
    yield kind
    unregister(kind)


def test_the_declared_kinds_are_registered_and_own_disjoint_ops() -> None:
    declared = {k.name: k for k in kinds()}
    assert {"builtin", "expr", "cpe_kernel"} <= set(declared)
    assert all(isinstance(k, TaskKind) for k in declared.values())
    owners = [op for k in declared.values() for op in k.ops]
    assert len(owners) == len(set(owners))
    assert {kind_of_op(op).name for op in WORKLOAD_TYPES} == {"builtin"}
    assert kind_of_op("expr").name == "expr" and kind_of_op("cpe_kernel").name == "cpe_kernel"


def test_an_unknown_op_names_the_known_ones() -> None:
    with pytest.raises(InvalidWorkloadError, match=r"unknown op 'conv9'; expected one of .*'cpe_kernel'.*'dense'"):
        workload_from_json({"op": "conv9"})


def test_a_class_that_misses_part_of_the_protocol_is_refused() -> None:
    class Half:
        name, ops, feature_family = "half", ("half",), "half"

        def space(self, workload, target, restrict):  # noqa: ANN001, ANN201
            return None

    with pytest.raises(TypeError, match="TaskKind"):
        register(Half())  # type: ignore[arg-type]


def test_a_new_kind_is_parsed_simulated_baselined_and_tuned_with_no_other_change(axpy: TaskKind) -> None:
    wl = workload_from_json({"op": "test_axpy", "n": 1 << 16})
    assert isinstance(wl, toy_kind.Axpy) and kind_of(wl) is axpy
    assert workload_from_json(wl.canonical_json()) == wl
    with pytest.raises(InvalidWorkloadError, match="'n'"):
        workload_from_json({"op": "test_axpy", "m": 3})
    space = space_for(wl, TARGET)
    assert isinstance(space, toy_kind.AxpySpace)
    ok, overflow, bad = Simulator(noise=0.0).measure(wl, TARGET, [{"block": 1024, "active": 64},
                                                                  {"block": 65536, "active": 64},
                                                                  {"block": 3, "active": 64}])
    assert ok.status is Status.OK and ok.mean_time == pytest.approx(space.seconds(ok.config))
    assert overflow.status is Status.LDM_OVERFLOW and bad.status is Status.INVALID_CONFIG
    assert baseline_config(space) == {"block": 16, "active": 64}
    base = baseline_time(wl, TARGET)
    assert base is not None and math.isclose(base, space.seconds(baseline_config(space)))
    assert memory_bound(wl) and not memory_bound(Dense(16, 16, 16))
    (result,) = tune_workloads([wl], TARGET, trials=12, strategy="random", seed=0, noise=0.0)
    assert result.trials == 12
    assert result.best_time <= base / 4  # 16-element blocks waste the DMA engine: bigger ones win


def test_an_unregistered_kind_is_an_unknown_op(axpy: TaskKind) -> None:
    unregister(axpy)
    with pytest.raises(InvalidWorkloadError, match="unknown op 'test_axpy'"):
        workload_from_json({"op": "test_axpy", "n": 64})
    register(axpy)
