"""Where the MetaSchedule database adapter (ms_database) keeps workloads and records.

A store knows nothing of tvm: workloads and records arrive as MetaSchedule's JSON, with the keys the
adapter computed (the module equality mode a workload was deduplicated under, its hash under that
mode, a record's target and its rank by ms_rules). The db package provides the SQL store
(db.metaschedule.SqlMetaScheduleStore); ``MemoryStore`` keeps them in memory.

Scope: a database lists and counts the records of its own mode's workloads (optionally of one
target), so ``len(db)`` always equals ``len(db.get_all_tuning_records())``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class MetaScheduleStore(Protocol):
    def workload_ids(self, module_equality: str, shash: str) -> list[int]:
        """Ids of the workloads stored under this mode with this hash, in commit order."""

    def add_workload(self, module_equality: str, shash: str, workload_json: Any) -> int:
        """Store a workload; returns its id."""

    def workload_json(self, workload_id: int) -> Any:
        ...

    def add_record(self, workload_id: int, target: str, record_json: Any, valid: bool,
                   mean_run_secs: float | None) -> None:
        ...

    def top_records(self, module_equality: str, shash: str, target: str | None, limit: int) -> list[tuple[int, Any]]:
        """(workload id, record JSON) of at most ``limit`` valid records of the workloads stored under
        this mode with this hash (of ``target`` unless None): by mean run time, None last, ties in
        commit order."""

    def top_records_of(self, workload_ids: Sequence[int], target: str | None, limit: int) -> list[tuple[int, Any]]:
        """The same for these workloads only (when unequal modules share a hash)."""

    def records(self, module_equality: str, target: str | None) -> list[tuple[int, Any]]:
        """(workload id, record JSON) of every record of this mode's workloads, in commit order."""

    def count(self, module_equality: str, target: str | None) -> int:
        """How many records ``records`` lists."""


@dataclass
class _Workload:
    module_equality: str
    shash: str
    json: Any


@dataclass
class _Record:
    workload_id: int
    target: str
    json: Any
    valid: bool
    mean_run_secs: float | None


@dataclass
class MemoryStore:
    """MetaScheduleStore in memory (tests, one-off sessions); ids are list positions."""

    workloads: list[_Workload] = field(default_factory=list)
    rows: list[_Record] = field(default_factory=list)

    def workload_ids(self, module_equality: str, shash: str) -> list[int]:
        return [i for i, w in enumerate(self.workloads) if (w.module_equality, w.shash) == (module_equality, shash)]

    def add_workload(self, module_equality: str, shash: str, workload_json: Any) -> int:
        self.workloads.append(_Workload(module_equality, shash, workload_json))
        return len(self.workloads) - 1

    def workload_json(self, workload_id: int) -> Any:
        return self.workloads[workload_id].json

    def add_record(self, workload_id: int, target: str, record_json: Any, valid: bool,
                   mean_run_secs: float | None) -> None:
        self.rows.append(_Record(workload_id, target, record_json, valid, mean_run_secs))

    def top_records(self, module_equality: str, shash: str, target: str | None, limit: int) -> list[tuple[int, Any]]:
        return self.top_records_of(self.workload_ids(module_equality, shash), target, limit)

    def top_records_of(self, workload_ids: Sequence[int], target: str | None, limit: int) -> list[tuple[int, Any]]:
        ids = set(workload_ids)
        usable = [r for r in self.rows if r.valid and r.workload_id in ids and target in (None, r.target)]
        usable.sort(key=lambda r: (r.mean_run_secs is None, r.mean_run_secs or 0.0))  # stable
        return [(r.workload_id, r.json) for r in usable[:limit]]

    def records(self, module_equality: str, target: str | None) -> list[tuple[int, Any]]:
        return [(r.workload_id, r.json) for r in self._scoped(module_equality, target)]

    def count(self, module_equality: str, target: str | None) -> int:
        return len(self._scoped(module_equality, target))

    def _scoped(self, module_equality: str, target: str | None) -> list[_Record]:
        return [r for r in self.rows
                if self.workloads[r.workload_id].module_equality == module_equality and target in (None, r.target)]
