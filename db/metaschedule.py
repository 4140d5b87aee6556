"""The SQL store behind the MetaSchedule database adapter (tuner.bridge.ms_database).

Workloads and records live in the tuning log's database (ms_workloads, ms_records), so MetaSchedule
runs on any TVM target share the log, its backups and its PostgreSQL with swtune's own tuning.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from db.engine import Database
from db.orm import MSRecordRow, MSWorkloadRow


class SqlMetaScheduleStore:
    """Implements tuner.bridge.ms_database.MetaScheduleStore over SQLAlchemy."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def find_workloads(self, shash: str) -> list[tuple[int, Any]]:
        with self.db.session() as s:
            rows = s.execute(select(MSWorkloadRow.id, MSWorkloadRow.workload_json)
                             .where(MSWorkloadRow.shash == shash).order_by(MSWorkloadRow.id)).all()
        return [(r.id, r.workload_json) for r in rows]

    def add_workload(self, shash: str, workload_json: Any) -> int:
        with self.db.session() as s:
            row = MSWorkloadRow(shash=shash, workload_json=workload_json)
            s.add(row)
            s.flush()
            return row.id

    def workload_json(self, workload_id: int) -> Any:
        with self.db.session() as s:
            return s.scalar(select(MSWorkloadRow.workload_json).where(MSWorkloadRow.id == workload_id))

    def add_record(self, workload_id: int, target: str, record_json: Any, mean_run_secs: float | None) -> None:
        with self.db.session() as s:
            s.add(MSRecordRow(workload_id=workload_id, target=target, record_json=record_json,
                              mean_run_secs=mean_run_secs))

    def records(self, workload_id: int | None = None, target: str | None = None) -> list[tuple[int, Any]]:
        query = select(MSRecordRow.workload_id, MSRecordRow.record_json).order_by(MSRecordRow.id)
        if workload_id is not None:
            query = query.where(MSRecordRow.workload_id == workload_id)
        if target is not None:
            query = query.where(MSRecordRow.target == target)
        with self.db.session() as s:
            return [(r.workload_id, r.record_json) for r in s.execute(query).all()]

    def count(self) -> int:
        with self.db.session() as s:
            return int(s.scalar(select(func.count()).select_from(MSRecordRow)) or 0)
