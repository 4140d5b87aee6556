"""A TVM MetaSchedule database over swtune's tuning log, keyed by target as well as workload.

TVM users on any target can pass ``SwtuneDatabase(store)`` to ``ms.tune_tir`` / ``tune_relax`` and to
``compile_tir`` / ``compile_relax``. It follows upstream's database semantics -- workloads are
deduplicated by structural equality, ``get_top_k`` sorts by mean run time (stable) and skips records
without run times, with only failed run times (1e10) or with an empty trace -- with one difference:
records remember their target, and lookups (``query_*`` with a target, or a database opened for one
target) only return records tuned for that target. Storage is a ``MetaScheduleStore``; the db package
provides the SQL one (PostgreSQL or SQLite, next to the rest of the tuning log), ``MemoryStore`` keeps
records in memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

FAILED_RUN_SECS = 1e10  # what MetaSchedule records for a failed run


class MetaScheduleStore(Protocol):
    def find_workloads(self, shash: str) -> list[tuple[int, Any]]:
        """(id, workload JSON) of stored workloads with this structural hash."""

    def add_workload(self, shash: str, workload_json: Any) -> int:
        ...

    def workload_json(self, workload_id: int) -> Any:
        ...

    def add_record(self, workload_id: int, target: str, record_json: Any, mean_run_secs: float | None) -> None:
        ...

    def records(self, workload_id: int | None = None, target: str | None = None) -> list[tuple[int, Any]]:
        """(workload id, record JSON) in commit order, optionally filtered."""

    def count(self) -> int:
        ...


@dataclass
class MemoryStore:
    """MetaScheduleStore in memory (tests, one-off sessions)."""

    workloads: list[tuple[str, Any]] = field(default_factory=list)
    rows: list[tuple[int, str, Any]] = field(default_factory=list)

    def find_workloads(self, shash: str) -> list[tuple[int, Any]]:
        return [(i, w) for i, (h, w) in enumerate(self.workloads) if h == shash]

    def add_workload(self, shash: str, workload_json: Any) -> int:
        self.workloads.append((shash, workload_json))
        return len(self.workloads) - 1

    def workload_json(self, workload_id: int) -> Any:
        return self.workloads[workload_id][1]

    def add_record(self, workload_id: int, target: str, record_json: Any, mean_run_secs: float | None) -> None:
        self.rows.append((workload_id, target, record_json))

    def records(self, workload_id: int | None = None, target: str | None = None) -> list[tuple[int, Any]]:
        return [(w, r) for w, t, r in self.rows
                if (workload_id is None or w == workload_id) and (target is None or t == target)]

    def count(self) -> int:
        return len(self.rows)


def target_key(target: Any) -> str:
    """A stable string for a tvm Target (its JSON export), '' for none."""
    if target is None:
        return ""
    try:
        return json.dumps(target.export(), sort_keys=True, default=str)
    except Exception:  # noqa: BLE001 - older targets without export(): fall back to their text
        return str(target)


def _mean_run_secs(record: Any) -> float | None:
    secs = record.run_secs
    if secs is None or len(secs) == 0:
        return None
    values = [float(s) for s in secs]
    if all(v >= FAILED_RUN_SECS for v in values):
        return None
    return sum(values) / len(values)


def _usable(record: Any) -> bool:
    """Upstream's rules for get_top_k: run times, not all failed, a non-empty trace."""
    return _mean_run_secs(record) is not None and len(record.trace.insts) > 0


def SwtuneDatabase(store: MetaScheduleStore | None = None, target: Any = None) -> Any:  # noqa: N802 (a factory)
    """Create the database (the class is built lazily: tvm is imported only when it is used)."""
    return _database_class()(store if store is not None else MemoryStore(), target)


_CLASS: Any = None


def _database_class() -> Any:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    import tvm
    import tvm_ffi
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class _SwtuneDatabase(ms.database.PyDatabase):
        def __init__(self, store: MetaScheduleStore, target: Any = None) -> None:
            super().__init__()
            self.store = store
            self.target = target_key(target) if target is not None else None
            self._ids: dict[int, int] = {}  # id(tvm Workload) -> store id, for get_top_k

        # -- workloads ------------------------------------------------------------------------
        def _lookup(self, mod: Any) -> tuple[int, Any] | None:
            shash = str(tvm_ffi.structural_hash(mod))
            for wid, wjson in self.store.find_workloads(shash):
                workload = ms.database.Workload.from_json(wjson)
                if tvm_ffi.structural_equal(workload.mod, mod):
                    return wid, workload
            return None

        def has_workload(self, mod: Any) -> bool:
            return self._lookup(mod) is not None

        def commit_workload(self, mod: Any) -> Any:
            found = self._lookup(mod)
            if found is None:
                workload = ms.database.Workload(mod)
                wid = self.store.add_workload(str(tvm_ffi.structural_hash(mod)), workload.as_json())
            else:
                wid, workload = found
            self._ids[workload.__hash__()] = wid
            return workload

        def _workload_id(self, workload: Any) -> int:
            wid = self._ids.get(workload.__hash__())
            if wid is None:
                wid, _ = self._lookup(workload.mod) or (None, None)
                if wid is None:
                    wid = self.store.add_workload(str(tvm_ffi.structural_hash(workload.mod)), workload.as_json())
                self._ids[workload.__hash__()] = wid
            return wid

        # -- records --------------------------------------------------------------------------
        def commit_tuning_record(self, record: Any) -> None:
            wid = self._workload_id(record.workload)
            self.store.add_record(wid, target_key(record.target), record.as_json(), _mean_run_secs(record))

        def _records(self, workload: Any | None, target: str | None) -> list[Any]:
            wid = self._workload_id(workload) if workload is not None else None
            out = []
            cache: dict[int, Any] = {}
            for rwid, rjson in self.store.records(wid, target):
                if workload is None and rwid not in cache:
                    cache[rwid] = ms.database.Workload.from_json(self.store.workload_json(rwid))
                out.append(ms.database.TuningRecord.from_json(rjson, workload or cache[rwid]))
            return out

        def _top(self, workload: Any, top_k: int, target: str | None) -> list[Any]:
            usable = [r for r in self._records(workload, target) if _usable(r)]
            usable.sort(key=lambda r: _mean_run_secs(r) or math.inf)  # stable, like upstream
            return usable[:top_k]

        def get_top_k(self, workload: Any, top_k: int) -> list[Any]:
            if top_k < 0:
                raise ValueError("top_k must be non-negative")
            return self._top(workload, top_k, self.target)

        def get_all_tuning_records(self) -> list[Any]:
            return self._records(None, self.target)

        def query_tuning_record(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
            found = self._lookup(mod)
            if found is None:
                return None
            top = self._top(found[1], 1, target_key(target) if target is not None else self.target)
            return top[0] if top else None

        def query_schedule(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
            record = self.query_tuning_record(mod, target, workload_name)
            if record is None:
                return None
            sch = tvm.s_tir.Schedule(record.workload.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            return sch

        def query_ir_module(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
            sch = self.query_schedule(mod, target, workload_name)
            return sch.mod if sch is not None else None

        def __len__(self) -> int:
            return self.store.count()

    _CLASS = _SwtuneDatabase
    return _CLASS
