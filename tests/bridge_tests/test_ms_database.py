"""The MetaSchedule database adapter: TVM's database semantics, plus records keyed by target.

Agreement with upstream's MemoryDatabase is in test_ms_database_upstream_rules.py, upstream's own
database tests in test_ms_database_upstream_suite.py.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import pytest

from tuner.bridge.ms_database import MemoryStore, SwtuneDatabase, target_key

tvm = pytest.importorskip("tvm")
import tvm_ffi  # noqa: E402
from tvm import te  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

LLVM = {"kind": "llvm", "num-cores": 1}


def matmul(n: int = 32):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def trace(mod, split=4, empty=False):
    sch = tvm.s_tir.Schedule(mod)
    if not empty:
        block = sch.get_sblock("C")
        i, _, _ = sch.get_loops(block)
        sch.split(i, [None, split])
    return sch.trace


def record(db, mod, run_secs, target=LLVM, split=4, empty_trace=False):
    workload = db.commit_workload(mod)
    rec = ms.database.TuningRecord(trace(mod, split, empty_trace), workload, run_secs=run_secs,
                                   target=tvm.target.Target(target) if target else None)
    db.commit_tuning_record(rec)
    return rec


def secs(records):
    return [float(r.run_secs[0]) for r in records]


def test_workloads_are_deduplicated_by_structure(ms_store):
    db = SwtuneDatabase(ms_store)
    mod = matmul()
    assert not db.has_workload(mod)
    db.commit_workload(mod)
    db.commit_workload(matmul())  # a structurally equal copy
    assert db.has_workload(matmul()) and not db.has_workload(matmul(16))
    assert len(ms_store.workload_ids("structural", str(tvm_ffi.structural_hash(mod)))) == 1


def test_get_top_k_sorts_stably_and_skips_unusable_records(ms_store):
    db = SwtuneDatabase(ms_store)
    mod = matmul()
    record(db, mod, [3.0], split=2)
    first_tie = record(db, mod, [1.0], split=4)
    record(db, mod, None)  # no run time
    record(db, mod, [1e10, 1e10])  # failed runs
    record(db, mod, [0.5], empty_trace=True)  # empty trace
    second_tie = record(db, mod, [1.0], split=8)  # ties keep commit order
    record(db, mod, [2.0, 4.0])  # mean 3.0
    workload = db.commit_workload(mod)
    top = db.get_top_k(workload, 10)
    assert secs(top) == [1.0, 1.0, 3.0, 2.0]
    assert [str(r.trace) for r in top[:2]] == [str(first_tie.trace), str(second_tie.trace)]
    assert str(first_tie.trace) != str(second_tie.trace)
    assert len(db.get_top_k(workload, 2)) == 2 and db.get_top_k(workload, 0) == []
    assert len(db) == 7 and len(db.get_all_tuning_records()) == 7


def test_lookups_are_target_aware(ms_store):
    db = SwtuneDatabase(ms_store)
    mod = matmul()
    record(db, mod, [2.0], target=LLVM)
    record(db, mod, [1.0], target={"kind": "c"})
    llvm = tvm.target.Target(LLVM)
    assert secs([db.query_tuning_record(mod, llvm, "main")]) == [2.0]
    assert secs([db.query_tuning_record(mod, tvm.target.Target({"kind": "c"}), "main")]) == [1.0]
    assert db.query_tuning_record(mod, tvm.target.Target({"kind": "llvm", "num-cores": 2}), "main") is None
    only_llvm = SwtuneDatabase(db.store, target=llvm)
    assert secs(only_llvm.get_top_k(only_llvm.commit_workload(mod), 5)) == [2.0]
    assert isinstance(db.query_schedule(mod, llvm, "main"), tvm.s_tir.Schedule)


def test_queries_of_every_kind_and_the_current_database(ms_store):
    db = SwtuneDatabase(ms_store)
    mod = matmul()
    rec = record(db, mod, [1.0])
    sch = tvm.s_tir.Schedule(mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    llvm = tvm.target.Target(LLVM)
    assert str(db.query(mod, llvm, kind="record").trace) == str(rec.trace)
    assert tvm_ffi.structural_equal(db.query(mod, llvm, kind="schedule").mod, sch.mod)
    assert tvm_ffi.structural_equal(db.query(mod, llvm, kind="ir_module"), sch.mod)
    with db:
        assert ms.database.Database.current() == db


def test_a_module_sharing_another_modules_hash_never_gets_its_records(ms_store):
    """Hashes may collide; equality decides. The store is primed with a forged collision: another
    module's workload under this module's hash, with a faster record."""
    db = SwtuneDatabase(ms_store)
    mod, other = matmul(32), matmul(16)
    forged = ms_store.add_workload("structural", str(tvm_ffi.structural_hash(mod)),
                                   ms.database.Workload(other).as_json())
    faster = ms.database.TuningRecord(trace(other), ms.database.Workload(other), run_secs=[0.1])
    ms_store.add_record(forged, target_key(tvm.target.Target(LLVM)), faster.as_json(), True, 0.1)
    record(db, mod, [1.0])
    assert secs(db.get_top_k(db.commit_workload(mod), 5)) == [1.0]
    assert secs([db.query_tuning_record(mod, tvm.target.Target(LLVM), "main")]) == [1.0]
    assert db.has_workload(mod) and not db.has_workload(other)


def test_records_reload_from_storage(ms_store):
    store = ms_store
    first = SwtuneDatabase(store)
    record(first, matmul(), [1.5])
    again = SwtuneDatabase(store)  # a new process over the same tuning log
    assert again.has_workload(matmul())
    assert secs(again.get_top_k(again.commit_workload(matmul()), 1)) == [1.5]


def test_negative_top_k_is_an_error():
    db = SwtuneDatabase(MemoryStore())
    with pytest.raises(Exception, match="top_k"):
        db.get_top_k(db.commit_workload(matmul()), -1)


def test_an_unknown_module_equality_is_a_value_error():
    with pytest.raises(ValueError, match="module_equality 'anchor'.*'structural', 'ignore-tensor', 'anchor-block'"):
        SwtuneDatabase(MemoryStore(), module_equality="anchor")


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Full collections that walk only the objects made inside the block (gc.freeze sets the rest
    aside), so a test can force one after every query: thousands of them take seconds, not minutes."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_the_mode_reaches_tvms_database_node():
    """MetaSchedule's search asks the C++ node for the mode: a name it does not know fails there."""
    from types import SimpleNamespace

    from tuner.bridge.ms_database import _database_class

    with pytest.raises(Exception, match="Unknown module equality bogus"):
        _database_class()(MemoryStore(), None, SimpleNamespace(value="bogus"))


@pytest.mark.parametrize("mode", ["structural", "ignore-tensor", "anchor-block"])
def test_a_workload_built_by_hand_finds_its_records_in_every_mode(mode):
    """A difference on purpose: upstream's anchor-block MemoryDatabase also compares the structural
    hash such a Workload carries, and finds nothing."""
    db = SwtuneDatabase(MemoryStore(), module_equality=mode)
    record(db, matmul(), [1.0])
    assert secs(db.get_top_k(ms.database.Workload(matmul()), 5)) == [1.0]


def _answers(db, mod, secs):
    """Whether the best record of mod for llvm is the one with these run times, on mod."""
    found = db.query_tuning_record(mod, tvm.target.Target(LLVM), "main")
    return found is not None and [float(s) for s in found.run_secs] == secs and tvm_ffi.structural_equal(
        found.workload.mod, mod)


@pytest.mark.slow
def test_two_modules_queried_in_turn_never_get_each_others_records(ms_store):
    """Each result is dropped at once and collected, so its objects' addresses are free for the next
    query's objects: an id cached by address would hand one module the other's record (issue 48)."""
    db = SwtuneDatabase(ms_store)
    mods = [matmul(32), matmul(16)]
    record(db, mods[0], [1.0])
    record(db, mods[1], [2.0])
    wrong = 0
    with frozen_heap():
        for i in range(2000):
            wrong += not _answers(db, mods[i % 2], [1.0 + i % 2])
            gc.collect()
    assert wrong == 0


def test_records_committed_in_turn_are_filed_under_their_own_workload(ms_store):
    db = SwtuneDatabase(ms_store)
    mods = [matmul(32), matmul(16)]
    with frozen_heap():
        for i in range(100):
            # through a Workload built by hand (as upstream's MemoryDatabase allows), dropped at once
            mod = mods[i % 2]
            db.commit_tuning_record(ms.database.TuningRecord(trace(mod), ms.database.Workload(mod),
                                                             run_secs=[1.0 + i % 2]))
            gc.collect()
    for mod, secs in zip(mods, ([1.0], [2.0])):
        top = db.get_top_k(db.commit_workload(mod), 100)
        assert len(top) == 50 and {float(r.run_secs[0]) for r in top} == set(secs)


def test_get_top_k_of_a_workload_without_records_is_empty(ms_store):
    db = SwtuneDatabase(ms_store)
    tuned, untuned = matmul(32), matmul(16)
    record(db, tuned, [1.0])
    db.commit_workload(untuned)
    with frozen_heap():
        for _ in range(200):
            # Workloads built by hand (a new object each time), as well as the database's own
            assert len(db.get_top_k(ms.database.Workload(tuned), 5)) == 1
            assert db.get_top_k(ms.database.Workload(untuned), 5) == []
            assert db.get_top_k(db.commit_workload(untuned), 5) == []
            gc.collect()


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """MetaSchedule's LocalBuilder's own build and export, run in this process: the LocalBuilder's popen
    worker spends about a minute importing TVM's tensor intrinsics before its first build."""

    def build(self, build_inputs):
        from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export

        results = []
        for given in build_inputs:
            try:
                results.append(ms.builder.BuilderResult(default_export(default_build(given.mod, given.target, None)),
                                                        None))
            except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a result, as upstream's
                results.append(ms.builder.BuilderResult(None, str(exc)))
        return results


@pytest.mark.slow
def test_tune_tir_and_compile_tir_through_the_tuning_log(tmp_path):
    """A short MetaSchedule run on llvm stores its records in swtune's SQL log and compiles from it."""
    import numpy as np

    from db import migrate
    from db.engine import Database
    from db.metaschedule import SqlMetaScheduleStore

    url = f"sqlite:///{tmp_path / 'log.db'}"
    migrate.upgrade(url)
    target = tvm.target.Target(LLVM)
    db = SwtuneDatabase(SqlMetaScheduleStore(Database(url)))
    mod = matmul(64)
    ms.tune_tir(mod, target, str(tmp_path / "work"), max_trials_global=4, num_trials_per_iter=4, database=db,
                strategy="replay-trace", cost_model="random",
                builder=InProcessBuilder(),
                runner=ms.runner.LocalRunner(timeout_sec=120))
    assert len(db) >= 1
    reopened = SwtuneDatabase(SqlMetaScheduleStore(Database(url)))  # e.g. at compile time, another process
    record = reopened.query_tuning_record(mod, target, "main")
    assert record is not None and float(record.run_secs[0]) < 1.0
    assert reopened.query_tuning_record(mod, tvm.target.Target({"kind": "c"}), "main") is None
    sch = ms.tir_integration.compile_tir(reopened, mod, target)
    exe = tvm.compile(sch.mod, target=target)
    a, b = (np.random.default_rng(i).random((64, 64), dtype=np.float32) for i in (0, 1))
    c = tvm.runtime.tensor(np.zeros((64, 64), dtype=np.float32))
    exe(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)
