"""A TVM MetaSchedule database over swtune's tuning log, keyed by target as well as workload.

TVM users on any target can pass ``SwtuneDatabase(store)`` to ``ms.tune_tir`` / ``tune_relax`` and to
``compile_tir`` / ``compile_relax``. It follows upstream's ``MemoryDatabase`` exactly: workloads are
one per class of ``module_equality`` ("structural", "ignore-tensor" or "anchor-block", ms_equality),
and ``get_top_k`` returns the valid records of every stored workload equal to the one asked for, by
mean run time, stably (ms_rules). Differences, on purpose:

- records remember their target, and lookups (``query_*`` with a target, or a database opened for one
  target) only return records tuned for that target; ``len`` and ``get_all_tuning_records`` count and
  list the records of the database's own mode (and target, if it has one);
- a workload is found by its module, hashed and compared under the database's mode; upstream also
  compares the hash a ``Workload`` object carries, so a ``Workload(mod)`` built by hand (always hashed
  structurally) finds nothing there wherever the mode's hash differs (anchor-block), and here does;
- a record comes back with the stored workload of its class, as from upstream's JSONDatabase after a
  reload, not with the ``Workload`` object it was committed with;
- a database finds the workloads committed under its own mode (each stored with its mode): tune and
  compile with the same one.

Workloads are identified by their stored ids, found again from a module's hash and equality each
time, never from a Python or C object's identity (whose address a later object may reuse). Storage is
a ``MetaScheduleStore`` (ms_store): the db package provides the SQL one, ``MemoryStore`` keeps
records in memory.
"""

from __future__ import annotations

import json
from typing import Any

from tuner.bridge.ms_equality import ModuleEquality
from tuner.bridge.ms_rules import rank
from tuner.bridge.ms_store import MemoryStore, MetaScheduleStore

__all__ = ["MemoryStore", "MetaScheduleStore", "ModuleEquality", "SwtuneDatabase", "target_key"]


def target_key(target: Any) -> str:
    """A stable string for a tvm Target (its JSON export), '' for none."""
    if target is None:
        return ""
    try:
        return json.dumps(target.export(), sort_keys=True, default=str)
    except Exception:  # noqa: BLE001 - older targets without export(): fall back to their text
        return str(target)


def SwtuneDatabase(store: MetaScheduleStore | None = None, target: Any = None,  # noqa: N802 (a factory)
                   module_equality: str = ModuleEquality.STRUCTURAL) -> Any:
    """Create the database (the class is built lazily: tvm is imported only when it is used).

    ``module_equality`` is upstream's argument of the same name; an unknown one is a ValueError."""
    mode = ModuleEquality.parse(module_equality)
    return _database_class()(store if store is not None else MemoryStore(), target, mode)


_CLASS: Any = None


def _database_class() -> Any:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    Workload, TuningRecord = ms.database.Workload, ms.database.TuningRecord  # noqa: N806 (tvm classes)
    interface = ms.database.PyDatabase
    node_class = interface._tvm_metadata["cls"]

    class _NodeWithModuleEquality(node_class):  # type: ignore[misc, valid-type]
        # derived_object hands the C++ node only the methods, so it would always be "structural";
        # MetaSchedule's search deduplicates candidates by the database's mode, so it is passed on
        # (derived_object passes the "fields" first)
        __slots__ = ()

        def __init__(self, module_equality: str, *methods: Any) -> None:
            super().__init__(*methods, module_equality=module_equality)

    class _Interface(interface):  # type: ignore[misc, valid-type]
        _tvm_metadata = {**interface._tvm_metadata, "cls": _NodeWithModuleEquality, "fields": ["module_equality"]}

    @derived_object
    class _SwtuneDatabase(_Interface):
        def __init__(self, store: MetaScheduleStore, target: Any, mode: ModuleEquality) -> None:
            self.store = store
            self.target = target_key(target) if target is not None else None
            self.mode = mode
            self._workloads: dict[int, Any] = {}  # stored id -> Workload (rows never change)

        @property
        def module_equality(self) -> str:
            return self.mode.value

        # -- workloads ------------------------------------------------------------------------
        def _workload(self, workload_id: int) -> Any:
            workload = self._workloads.get(workload_id)
            if workload is None:
                workload = Workload.from_json(self.store.workload_json(workload_id))
                self._workloads[workload_id] = workload
            return workload

        def _hash(self, mod: Any) -> str:
            return str(self.mode.hash_module(mod))

        def _is(self, workload_id: int, mod: Any) -> bool:
            return self.mode.modules_equal(self._workload(workload_id).mod, mod)

        def _find(self, mod: Any) -> tuple[str, list[int]]:
            """The module's hash under the mode, and the ids of the stored workloads equal to it."""
            shash = self._hash(mod)
            return shash, [wid for wid in self.store.workload_ids(self.mode.value, shash) if self._is(wid, mod)]

        def _commit(self, mod: Any) -> int:
            shash, ids = self._find(mod)
            if ids:
                return ids[0]  # the first one committed; more only after a race of two writers
            workload = Workload(mod)
            # the stored hash is the mode's, as upstream's MemoryDatabase gives its workloads
            workload_json = [shash, workload.as_json()[1]]
            if self.mode is not ModuleEquality.STRUCTURAL:
                workload = Workload.from_json(workload_json)
            workload_id = self.store.add_workload(self.mode.value, shash, workload_json)
            self._workloads[workload_id] = workload
            return workload_id

        def has_workload(self, mod: Any) -> bool:
            return bool(self._find(mod)[1])

        def commit_workload(self, mod: Any) -> Any:
            return self._workload(self._commit(mod))

        # -- records --------------------------------------------------------------------------
        def commit_tuning_record(self, record: Any) -> None:
            workload_id = self._commit(record.workload.mod)
            record_json = record.as_json()
            verdict = rank(record_json)
            self.store.add_record(workload_id, target_key(record.target), record_json, verdict.valid,
                                  verdict.mean_run_secs)

        def _loaded(self, rows: list[tuple[int, Any]]) -> list[Any]:
            return [TuningRecord.from_json(record_json, self._workload(wid)) for wid, record_json in rows]

        def _top(self, mod: Any, top_k: int, target: str | None) -> list[Any]:
            # one query for the best records of every workload with the module's hash; they are the
            # answer when all their workloads equal the module (the top k of a superset, all inside
            # the set), which only a hash shared by unequal modules can break
            rows = self.store.top_records(self.mode.value, self._hash(mod), target, top_k)
            if all(self._is(wid, mod) for wid in {wid for wid, _ in rows}):
                return self._loaded(rows)
            ids = self._find(mod)[1]
            return self._loaded(self.store.top_records_of(ids, target, top_k)) if ids else []

        def get_top_k(self, workload: Any, top_k: int) -> list[Any]:
            if top_k < 0:
                raise ValueError("top_k must be non-negative")
            return self._top(workload.mod, top_k, self.target) if top_k else []

        def get_all_tuning_records(self) -> list[Any]:
            return self._loaded(self.store.records(self.mode.value, self.target))

        def query_tuning_record(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
            top = self._top(mod, 1, target_key(target) if target is not None else self.target)
            return top[0] if top else None

        # query_schedule and query_ir_module are upstream's own (they apply query_tuning_record's trace)

        def __len__(self) -> int:
            return self.store.count(self.mode.value, self.target)

    _CLASS = _SwtuneDatabase
    return _CLASS
