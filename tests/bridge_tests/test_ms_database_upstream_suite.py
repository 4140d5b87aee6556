"""Upstream's MetaSchedule database tests, run against swtune's adapter (issue 48).

The cases of Apache TVM's tests/python/s_tir/meta_schedule/test_meta_schedule_database.py (identical
at v0.26.0 and v0.27.dev0; Apache License 2.0), rewritten here with one change: where upstream
builds one of its own databases, the test builds the adapter over a fresh store of the backend under
test (``new_database`` below; each such line says what upstream builds):

- ``_create_tmp_database(tmpdir, mod_eq)``, upstream's JSONDatabase in a temporary directory, and
  ``ms.database.MemoryDatabase(module_equality=mod_eq)``: ``new_database(mod_eq)``;
- the JSONDatabase that test_meta_schedule_database_reload reopens over the same two files: the
  adapter reopened over the same store.

The PyDatabase subclasses the file defines for itself (PyMemoryDatabaseDefault / Override) stay: they
are what its pydatabase tests test (TVM's Python database interface, which the adapter is built on).

Not run: test_meta_schedule_database_create, which only checks that a JSONDatabase created its two
JSON files on disk (the adapter keeps no files).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tuner.bridge.ms_database import SwtuneDatabase

tvm = pytest.importorskip("tvm")
import tvm_ffi  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import Schedule  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.script import tirx as T  # noqa: E402


@pytest.fixture
def new_database(ms_store_factory: Callable[[], Any]) -> Callable[..., Any]:
    """The swap: a database over a fresh store, where upstream builds a JSON or memory database."""
    return lambda mod_eq="structural": SwtuneDatabase(ms_store_factory(), module_equality=mod_eq)


# fmt: off
@tvm.script.ir_module
class Matmul:
    @T.prim_func(s_tir=True)
    def main(a: T.handle, b: T.handle, c: T.handle) -> None:
        T.func_attr({"global_symbol": "main"})
        A = T.match_buffer(a, (1024, 1024), "float32")
        B = T.match_buffer(b, (1024, 1024), "float32")
        C = T.match_buffer(c, (1024, 1024), "float32")
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.sblock("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@tvm.script.ir_module
class MatmulRelu:
    @T.prim_func(s_tir=True)
    def main(a: T.handle, b: T.handle, d: T.handle) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        A = T.match_buffer(a, (16, 16), "float32")
        B = T.match_buffer(b, (16, 16), "float32")
        D = T.match_buffer(d, (16, 16), "float32")
        C = T.sblock_alloc_buffer((16, 16), "float32")
        for i, j, k in T.grid(16, 16, 16):
            with T.sblock("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(16, 16):
            with T.sblock("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(C[vi, vj], 0.0)
# fmt: on


def _schedule_matmul(sch: Schedule) -> None:
    i, j, k = sch.get_loops(block=sch.get_sblock("matmul"))
    i_0, i_1, i_2, i_3 = sch.split(loop=i, factors=[1, 1, 2, 512])
    j_0, j_1, j_2, j_3 = sch.split(loop=j, factors=[1, 512, 1, 2])
    k_0, k_1 = sch.split(loop=k, factors=[256, 4])
    sch.reorder(i_0, j_0, i_1, j_1, k_0, i_2, j_2, k_1, i_3, j_3)


def _create_schedule(mod: Any, sch_fn: Callable[[Schedule], None]) -> Schedule:
    sch = Schedule(mod=mod, debug_mask="all")
    sch_fn(sch)
    return sch


def _record(mod: Any, workload: Any, run_secs: Any, trace: Any = None) -> Any:
    """A record of the matmul schedule for llvm, with the arguments of mod's main."""
    return ms.database.TuningRecord(trace if trace is not None else _create_schedule(mod, _schedule_matmul).trace,
                                    workload, run_secs, tvm.target.Target("llvm"),
                                    ms.arg_info.ArgInfo.from_prim_func(func=mod["main"]))


def _equal_record(a: Any, b: Any) -> None:
    assert str(a.trace) == str(b.trace)
    assert str(a.run_secs) == str(b.run_secs)
    assert str(a.target) == str(b.target)  # upstream compares the text of targets too
    tvm.ir.assert_structural_equal(a.workload.mod, b.workload.mod)
    for arg0, arg1 in zip(a.args_info, b.args_info):
        assert str(arg0.as_json()) == str(arg1.as_json())


class _PyMemoryDatabase(ms.database.PyDatabase):
    """The methods of upstream's two Python databases: records in a list, no validity rules."""

    def __init__(self) -> None:
        super().__init__()
        self.tuning_records_: list[Any] = []
        self.workloads_: list[Any] = []

    def has_workload(self, mod: Any) -> bool:
        return any(tvm_ffi.structural_equal(mod, w.mod) for w in self.workloads_)

    def commit_workload(self, mod: Any) -> Any:
        for workload in self.workloads_:
            if tvm_ffi.structural_equal(mod, workload.mod):
                return workload
        workload = ms.database.Workload(mod)
        self.workloads_.append(workload)
        return workload

    def commit_tuning_record(self, record: Any) -> None:
        self.tuning_records_.append(record)

    def get_all_tuning_records(self) -> list[Any]:
        return self.tuning_records_

    def get_top_k(self, workload: Any, top_k: int) -> list[Any]:
        mine = [r for r in self.tuning_records_ if tvm_ffi.structural_equal(workload.mod, r.workload.mod)]
        return sorted(mine, key=lambda r: sum(r.run_secs) / len(r.run_secs) if r.run_secs else 1e9)[:top_k]

    def __len__(self) -> int:
        return len(self.tuning_records_)


@derived_object
class PyMemoryDatabaseDefault(_PyMemoryDatabase):
    """Upstream's PyMemoryDatabaseDefault: TVM's own queries over the methods above."""


@derived_object
class PyMemoryDatabaseOverride(_PyMemoryDatabase):
    """Upstream's PyMemoryDatabaseOverride: its own queries, which answer the second best record."""

    def query_tuning_record(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
        if self.has_workload(mod):
            records = self.get_top_k(self.commit_workload(mod), 2)
            if records:
                return records[-1]
        return None

    def query_schedule(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
        record = self.query_tuning_record(mod, target, workload_name)
        if record is None:
            return None
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch

    def query_ir_module(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
        sch = self.query_schedule(mod, target, workload_name)
        return sch.mod if sch is not None else None


def test_meta_schedule_tuning_record_round_trip(new_database: Callable[..., Any]) -> None:
    mod = Matmul
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    workload = database.commit_workload(mod)
    record = _record(mod, workload, [T.float32(1.5), T.float32(2.5), T.float32(1.8)])
    database.commit_tuning_record(record)
    _equal_record(record, ms.database.TuningRecord.from_json(record.as_json(), workload))


@pytest.mark.skip(reason="checks that a JSONDatabase created its workload and record files on disk; "
                         "the adapter keeps no files")
def test_meta_schedule_database_create() -> None:
    pass


def test_meta_schedule_database_has_workload(new_database: Callable[..., Any]) -> None:
    mod, missing_mod = Matmul, MatmulRelu
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    workload = database.commit_workload(mod)
    database.commit_tuning_record(_record(mod, workload, [1.5, 2.5, 1.8]))
    assert len(database) == 1
    assert database.has_workload(mod)
    assert not database.has_workload(missing_mod)


def test_meta_schedule_database_add_entry(new_database: Callable[..., Any]) -> None:
    mod = Matmul
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    workload = database.commit_workload(mod)
    record = _record(mod, workload, [1.5, 2.5, 1.8])
    database.commit_tuning_record(record)
    assert len(database) == 1
    (ret,) = database.get_top_k(workload, 3)
    _equal_record(ret, record)


def test_meta_schedule_database_missing(new_database: Callable[..., Any]) -> None:
    mod, mod_2 = Matmul, MatmulRelu
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    workload = database.commit_workload(mod)
    workload_2 = database.commit_workload(mod_2)
    database.commit_tuning_record(_record(mod, workload, [1.5, 2.5, 1.8]))
    assert len(database.get_top_k(workload_2, 3)) == 0


def _commit_matmul_records(database: Any, run_secs_list: list[list[float]]) -> tuple[Any, list[Any]]:
    mod = Matmul
    token = database.commit_workload(mod)
    trace = _create_schedule(mod, _schedule_matmul).trace
    records = [_record(mod, token, run_secs, trace) for run_secs in run_secs_list]
    for record in records:
        database.commit_tuning_record(record)
    return token, records


def _best_two_are_second_and_third(ret: list[Any], records: list[Any]) -> None:
    """Upstream accepts the two best records in either order."""
    assert len(ret) == 2
    try:
        _equal_record(ret[0], records[2])
        _equal_record(ret[1], records[1])
    except AssertionError:
        _equal_record(ret[0], records[1])
        _equal_record(ret[1], records[2])


def test_meta_schedule_database_sorting(new_database: Callable[..., Any]) -> None:
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    token, records = _commit_matmul_records(database, [
        [7.0, 8.0, 9.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.1, 1.2, 600.0], [1.0, 100.0, 6.0], [4.0, 9.0, 8.0]])
    _best_two_are_second_and_third(database.get_top_k(token, 2), records)


def test_meta_schedule_database_reload(new_database: Callable[..., Any]) -> None:
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    _, records = _commit_matmul_records(database, [[7.0, 8.0, 9.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    # upstream: ms.database.JSONDatabase(path_workload=database.path_workload,
    #                                    path_tuning_record=database.path_tuning_record)
    new_database_ = SwtuneDatabase(database.store)
    token = new_database_.commit_workload(Matmul)
    _best_two_are_second_and_third(new_database_.get_top_k(token, 2), records)


def test_meta_schedule_database_union(new_database: Callable[..., Any]) -> None:
    mod = Matmul
    target = tvm.target.Target("llvm")
    arg_info = ms.arg_info.ArgInfo.from_prim_func(func=mod["main"])
    db_1 = new_database()  # upstream: ms.database.MemoryDatabase()
    db_2 = new_database()  # upstream: ms.database.MemoryDatabase()
    trace = _create_schedule(mod, _schedule_matmul).trace

    def query(db: Any) -> Any:
        return db.query_tuning_record(mod=mod, target=target, workload_name="main").run_secs

    def commit_record(db: Any, run_sec: float) -> None:
        db.commit_tuning_record(ms.database.TuningRecord(trace, workload=db.commit_workload(mod), run_secs=[run_sec],
                                                         target=target, args_info=arg_info))

    commit_record(db_1, 1.0)
    (run_sec,) = query(db_1)
    assert run_sec.value == 1.0
    commit_record(db_2, 0.5)
    (run_sec,) = query(db_2)
    assert run_sec.value == 0.5
    (run_secs,) = query(ms.database.UnionDatabase(db_1, db_2))
    assert run_secs.value == 0.5
    (run_secs,) = query(ms.database.OrderedUnionDatabase(db_1, db_2))
    assert run_secs.value == 1.0


def _query_after_commits(db: Any) -> Callable[..., Any]:
    mod = Matmul
    target = tvm.target.Target("llvm")
    arg_info = ms.arg_info.ArgInfo.from_prim_func(func=mod["main"])

    def commit_and_query(trace: Any, run_sec: float) -> tuple[Any, Any, Any]:
        db.commit_tuning_record(ms.database.TuningRecord(trace, workload=db.commit_workload(mod), run_secs=[run_sec],
                                                         target=target, args_info=arg_info))
        return tuple(db.query(mod=mod, target=target, workload_name="main", kind=kind)
                     for kind in ("record", "schedule", "ir_module"))

    return commit_and_query


# upstream's test_meta_schedule_pydatabase_default_query and ..._override_query: a scheduled trace, then a
# faster empty one; the default database answers the fastest, the override the second best
@pytest.mark.parametrize("database, times, answer", [
    (PyMemoryDatabaseDefault, (1.0, 0.2), "empty"),
    (PyMemoryDatabaseOverride, (1.14, 0.514), "scheduled"),
], ids=["default", "override"])
def test_meta_schedule_pydatabase_query(database: type, times: tuple[float, float], answer: str) -> None:
    mod = Matmul
    sch = _create_schedule(mod, _schedule_matmul)
    commit_and_query = _query_after_commits(database())
    record, sch_res, mod_res = commit_and_query(sch.trace, times[0])
    assert record is not None and record.run_secs[0].value == times[0]
    assert sch_res is not None and tvm_ffi.structural_equal(sch_res.mod, sch.mod)
    assert mod_res is not None and tvm_ffi.structural_equal(mod_res, sch.mod)
    record, sch_res, mod_res = commit_and_query(Schedule(mod).trace, times[1])  # an empty trace
    best_time, best_mod = (times[1], mod) if answer == "empty" else (times[0], sch.mod)
    assert record is not None and record.run_secs[0].value == best_time
    assert sch_res is not None and tvm_ffi.structural_equal(sch_res.mod, best_mod)
    assert mod_res is not None and tvm_ffi.structural_equal(mod_res, best_mod)


def test_meta_schedule_pydatabase_current() -> None:
    db = PyMemoryDatabaseDefault()
    with db:
        assert ms.database.Database.current() == db


def call_get_top_k(run_secs_list: list[Any], database: Any, k: int) -> list[list[float]]:
    mod = Matmul
    workload = database.commit_workload(mod)
    for run_secs in run_secs_list:
        database.commit_tuning_record(_record(mod, workload, run_secs))
    return [[v.value for v in record.run_secs] for record in database.get_top_k(workload, k)]


RUN_SECS_LIST = [[1.5, 4.5], [], [0.0, 2.0], None, [2.0], [3.0, 1e10], [1e10]]


@pytest.mark.parametrize("k,expected", [
    (0, []),
    (1, [[0.0, 2.0]]),
    (4, [[0.0, 2.0], [2.0], [1.5, 4.5], [3.0, 1e10]]),
    (5, [[0.0, 2.0], [2.0], [1.5, 4.5], [3.0, 1e10]]),
])
def test_memory_database_get_top_k(new_database: Callable[..., Any], k: int, expected: list[list[float]]) -> None:
    database = new_database()  # upstream: ms.database.MemoryDatabase()
    assert call_get_top_k(RUN_SECS_LIST, database, k) == expected


@pytest.mark.parametrize("k,expected", [
    (0, []),
    (4, [[0.0, 2.0], [2.0], [1.5, 4.5], [3.0, 1e10]]),
    (5, [[0.0, 2.0], [2.0], [1.5, 4.5], [3.0, 1e10]]),
])
def test_json_database_get_top_k(new_database: Callable[..., Any], k: int, expected: list[list[float]]) -> None:
    database = new_database()  # upstream: _create_tmp_database(tmpdir)
    assert call_get_top_k(RUN_SECS_LIST, database, k) == expected


def MatmulPrimFunc() -> Any:  # noqa: N802 (upstream's name)
    return Matmul


@pytest.mark.parametrize("f_mod", [MatmulPrimFunc])
@pytest.mark.parametrize("mod_eq", ["structural", "ignore-tensor", "anchor-block"])
def test_json_database_commit_workload(new_database: Callable[..., Any], f_mod: Callable[[], Any],
                                       mod_eq: str) -> None:
    database = new_database(mod_eq)  # upstream: _create_tmp_database(tmpdir, mod_eq)
    database.commit_workload(f_mod())


@pytest.mark.parametrize("f_mod", [MatmulPrimFunc])
@pytest.mark.parametrize("mod_eq", ["structural", "ignore-tensor", "anchor-block"])
def test_memory_database_commit_workload(new_database: Callable[..., Any], f_mod: Callable[[], Any],
                                         mod_eq: str) -> None:
    database = new_database(mod_eq)  # upstream: ms.database.MemoryDatabase(module_equality=mod_eq)
    database.commit_workload(f_mod())
