"""The adapter agrees with upstream's MemoryDatabase on the same commits and queries: each
module_equality mode, and each rule of validity and order (issue 48). Every test runs on every store."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tuner.bridge.ms_database import SwtuneDatabase

tvm = pytest.importorskip("tvm")
import tvm_ffi  # noqa: E402
from tvm import te  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

LLVM = tvm.target.Target({"kind": "llvm", "num-cores": 1})
MODES = ["structural", "ignore-tensor", "anchor-block"]


def matmul(n: int, epilogue: Any = None, weights: list[float] | None = None) -> Any:
    """A matmul (block C, the anchor block), an optional epilogue (block D) and constant weights."""
    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    out = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    if epilogue is not None:
        c = out
        out = te.compute((n, n), lambda i, j: epilogue(c[i, j]), name="D")
    return _module(te.create_prim_func([a, b, out]), weights)


def add(n: int, weights: list[float]) -> Any:
    """No reduction, so no anchor block: anchor-block compares it as ignore-tensor does."""
    a, b = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    return _module(te.create_prim_func([a, b, te.compute((n,), lambda i: a[i] + b[i], name="C")]), weights)


def _module(func: Any, weights: list[float] | None) -> Any:
    if weights is not None:  # constants the module carries, as a bound parameter would be
        func = func.with_attr("weights", tvm.runtime.tensor(np.array(weights, dtype="float32")))
    return tvm.IRModule({"main": func})


MODULES = {
    "relu": matmul(16, lambda x: te.max(x, tvm.tirx.const(0, "float32"))),
    "plus_one": matmul(16, lambda x: x + tvm.tirx.const(1, "float32")),  # same anchor block as relu
    "weights_a": matmul(16, weights=[1, 2]),
    "weights_b": matmul(16, weights=[3, 4]),  # differs from weights_a only in its constants
    "small": matmul(8),
    "add_a": add(16, [1]),
    "add_b": add(16, [2]),
}
UNSEEN = matmul(12)


def schedule(mod: Any, split: int = 4, *, before: bool = True, postproc: bool = False, after: bool = False) -> Any:
    """A trace: instructions (split block C's first loop), a postproc instruction, more instructions."""
    sch = tvm.s_tir.Schedule(mod)
    for wanted, factor in ((before, split), (postproc, None), (after, 2)):
        if wanted and factor is None:
            sch.enter_postproc()
        elif wanted:
            sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, factor])
    return sch.trace


def seen(records: list[Any]) -> list[tuple[list[float] | None, str]]:
    return [(None if r.run_secs is None else [float(s) for s in r.run_secs], str(r.trace)) for r in records]


def upstream_and_ours(store: Any, mode: str = "structural") -> list[Any]:
    return [ms.database.MemoryDatabase(module_equality=mode), SwtuneDatabase(store, module_equality=mode)]


@pytest.mark.parametrize("mode", MODES)
def test_each_module_equality_mode_agrees_with_upstream(ms_store: Any, mode: str) -> None:
    observed = []
    for db in upstream_and_ours(ms_store, mode):
        workloads = {}
        for n, (name, mod) in enumerate(MODULES.items()):
            workload = workloads[name] = db.commit_workload(mod)
            db.commit_tuning_record(ms.database.TuningRecord(schedule(workload.mod, split=2 + n % 3), workload,
                                                             run_secs=[float(10 - n)], target=LLVM))
        first = list(workloads.values())
        observed.append({
            # which modules share a workload, its hash and module
            "classes": [next(i for i, w in enumerate(first) if w.same_as(workload)) for workload in first],
            "hashes": [w.as_json()[0] for w in first],
            "has": [db.has_workload(mod) for mod in [*MODULES.values(), UNSEEN]],
            "top": {name: [seen(db.get_top_k(db.commit_workload(mod), k)) for k in (0, 1, 2, 10)]
                    for name, mod in MODULES.items()},
            "query": [seen([db.query_tuning_record(mod, LLVM, "main") or ms.database.TuningRecord(
                schedule(mod), workloads[name])]) for name, mod in MODULES.items()],
            "len": len(db),
            "all": seen(db.get_all_tuning_records()),
        })
        observed[-1]["mods"] = [w.mod for w in first]
    upstream, ours = observed
    assert all(tvm_ffi.structural_equal(a, b) for a, b in zip(upstream.pop("mods"), ours.pop("mods")))
    assert ours == upstream
    classes = {"structural": [0, 1, 2, 3, 4, 5, 6], "ignore-tensor": [0, 1, 2, 2, 4, 5, 5],
               "anchor-block": [0, 0, 0, 0, 4, 5, 5]}
    assert ours["classes"] == classes[mode]  # the modes really differ on these modules


RUN_SECS = [
    [1e10],  # failed: invalid
    [1e10, 1e10],  # all failed: invalid
    [2e10],  # slow, not failed: valid
    [1e10 + 1.0],  # not exactly 1e10: valid
    [3.0, 1e10],  # one success: valid, its mean counts the 1e10
    [5.0],
    [0.0],  # a mean of 0.0 sorts first
    [],  # no run times: invalid
    None,
    [0.0, 0.0],  # ties with [0.0]: commit order
    [-0.0],
]
TRACES: dict[str, dict[str, bool]] = {
    "plain": {},
    "postproc after instructions": {"postproc": True, "after": True},  # valid: instructions before it
    "postproc first": {"before": False, "postproc": True, "after": True},  # invalid
    "only postproc": {"before": False, "postproc": True},  # invalid
    "empty": {"before": False},  # invalid
}


@pytest.mark.slow
def test_validity_and_order_agree_with_upstream(ms_store: Any) -> None:
    observed = []
    for db in upstream_and_ours(ms_store):
        workload = db.commit_workload(MODULES["small"])
        for n, run_secs in enumerate(RUN_SECS):
            for where in TRACES.values():
                trace = schedule(workload.mod, split=2 ** (1 + n % 3), **where)
                db.commit_tuning_record(ms.database.TuningRecord(trace, workload, run_secs=run_secs, target=LLVM))
        size = len(db)
        observed.append([seen(db.get_top_k(workload, k)) for k in range(size + 2)])
    upstream, ours = observed
    assert ours == upstream
    best = [secs for secs, _ in ours[-1]]
    assert len(best) == 7 * 2  # the valid run times, each with the two valid traces
    assert best[:6] == [[0.0]] * 2 + [[0.0, 0.0]] * 2 + [[-0.0]] * 2  # means of 0.0 first, in commit order
    assert best[-4:] == [[1e10 + 1.0]] * 2 + [[2e10]] * 2


def test_length_and_listing_agree_on_scope(ms_store: Any) -> None:
    upstream, ours = upstream_and_ours(ms_store)
    for target in (LLVM, tvm.target.Target("c"), LLVM):
        for db in (upstream, ours):
            workload = db.commit_workload(MODULES["small"])
            db.commit_tuning_record(ms.database.TuningRecord(schedule(workload.mod), workload, [1.0], target))
    assert len(ours) == len(ours.get_all_tuning_records()) == len(upstream) == 3
    for_llvm = SwtuneDatabase(ms_store, target=LLVM)
    assert len(for_llvm) == len(for_llvm.get_all_tuning_records()) == 2
    anchored = SwtuneDatabase(ms_store, module_equality="anchor-block")  # its own workloads, none yet
    assert len(anchored) == len(anchored.get_all_tuning_records()) == 0
