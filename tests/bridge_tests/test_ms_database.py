"""The MetaSchedule database adapter: TVM's database semantics, plus records keyed by target."""

from __future__ import annotations

import pytest

from tuner.bridge.ms_database import MemoryStore, SwtuneDatabase

tvm = pytest.importorskip("tvm")
from tvm import te  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

LLVM = {"kind": "llvm", "num-cores": 1}


def matmul(n: int = 32):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def record(db, mod, run_secs, target=LLVM, split=4, empty_trace=False):
    workload = db.commit_workload(mod)
    sch = tvm.s_tir.Schedule(mod)
    if not empty_trace:
        block = sch.get_sblock("C")
        i, _, _ = sch.get_loops(block)
        sch.split(i, [None, split])
    rec = ms.database.TuningRecord(sch.trace, workload, run_secs=run_secs,
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
    assert len(ms_store.find_workloads(str(__import__('tvm_ffi').structural_hash(mod)))) == 1


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
                builder=ms.builder.LocalBuilder(max_workers=1, timeout_sec=300),
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
