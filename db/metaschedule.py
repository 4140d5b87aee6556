"""The SQL store behind the MetaSchedule database adapter (tuner.bridge.ms_database).

Workloads and records live in the tuning log's database (ms_workloads, ms_records), so MetaSchedule
runs on any TVM target share the log, its backups and its PostgreSQL with swtune's own tuning.
Implements tuner.bridge.ms_store.MetaScheduleStore: the adapter computes every key (a workload's mode
and hash, a record's target, validity and mean run time), the store filters and orders by them, so a
top-k query reads k records, not all of a workload's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, select

from db.engine import Database
from db.orm import MSRecordRow, MSWorkloadRow


def _of_mode(query: Select[Any]) -> Select[Any]:
    return query.join(MSWorkloadRow, MSWorkloadRow.id == MSRecordRow.workload_id).where(
        MSWorkloadRow.module_equality == bindparam("module_equality"))


def _targeted(query: Select[Any]) -> tuple[Select[Any], Select[Any]]:
    """The query for every target, and for the one bound as ``target``."""
    return query, query.where(MSRecordRow.target == bindparam("target"))


# built once: compiling a statement costs as much as running it on SQLite, and a compiler queries
# the database once per kernel it compiles
_WORKLOAD_IDS = (select(MSWorkloadRow.id)
                 .where(MSWorkloadRow.module_equality == bindparam("module_equality"),
                        MSWorkloadRow.shash == bindparam("shash"))
                 .order_by(MSWorkloadRow.id))
_BEST = (select(MSRecordRow.workload_id, MSRecordRow.record_json).where(MSRecordRow.valid)
         # NULLs (NaN means) last on both backends; the id keeps ties in commit order (a stable sort)
         .order_by(MSRecordRow.mean_run_secs.asc().nulls_last(), MSRecordRow.id)
         .limit(bindparam("limit")))
_BEST_BY_HASH = _targeted(_of_mode(_BEST).where(MSWorkloadRow.shash == bindparam("shash")))
_BEST_OF = _targeted(_BEST.where(MSRecordRow.workload_id.in_(bindparam("workload_ids", expanding=True))))
_RECORDS = _targeted(_of_mode(select(MSRecordRow.workload_id, MSRecordRow.record_json).order_by(MSRecordRow.id)))
_COUNT = _targeted(_of_mode(select(func.count()).select_from(MSRecordRow)))


class SqlMetaScheduleStore:
    """Implements tuner.bridge.ms_store.MetaScheduleStore over SQLAlchemy."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def workload_ids(self, module_equality: str, shash: str) -> list[int]:
        with self.db.session() as s:
            return list(s.scalars(_WORKLOAD_IDS, {"module_equality": module_equality, "shash": shash}).all())

    def add_workload(self, module_equality: str, shash: str, workload_json: Any) -> int:
        with self.db.session() as s:
            row = MSWorkloadRow(module_equality=module_equality, shash=shash, workload_json=workload_json)
            s.add(row)
            s.flush()
            return row.id

    def workload_json(self, workload_id: int) -> Any:
        with self.db.session() as s:
            return s.scalar(select(MSWorkloadRow.workload_json).where(MSWorkloadRow.id == workload_id))

    def add_record(self, workload_id: int, target: str, record_json: Any, valid: bool,
                   mean_run_secs: float | None) -> None:
        with self.db.session() as s:
            s.add(MSRecordRow(workload_id=workload_id, target=target, record_json=record_json, valid=valid,
                              mean_run_secs=mean_run_secs))

    def top_records(self, module_equality: str, shash: str, target: str | None, limit: int) -> list[tuple[int, Any]]:
        return self._rows(_BEST_BY_HASH, target, module_equality=module_equality, shash=shash, limit=limit)

    def top_records_of(self, workload_ids: Sequence[int], target: str | None, limit: int) -> list[tuple[int, Any]]:
        return self._rows(_BEST_OF, target, workload_ids=list(workload_ids), limit=limit)

    def records(self, module_equality: str, target: str | None) -> list[tuple[int, Any]]:
        return self._rows(_RECORDS, target, module_equality=module_equality)

    def count(self, module_equality: str, target: str | None) -> int:
        query, params = _pick(_COUNT, target, module_equality=module_equality)
        with self.db.session() as s:
            return int(s.scalar(query, params) or 0)

    def _rows(self, queries: tuple[Select[Any], Select[Any]], target: str | None,
              **params: Any) -> list[tuple[int, Any]]:
        query, bound = _pick(queries, target, **params)
        with self.db.session() as s:
            return [(r.workload_id, r.record_json) for r in s.execute(query, bound).all()]


def _pick(queries: tuple[Select[Any], Select[Any]], target: str | None,
          **params: Any) -> tuple[Select[Any], dict[str, Any]]:
    every, one = queries
    return (every, params) if target is None else (one, {**params, "target": target})
