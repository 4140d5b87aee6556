"""Model functions for workers: an upsert on every lease/heartbeat (last seen in database time)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.domain import WorkerInfo
from db.orm import WorkerRow
from db.refs import insert_ignore
from db.timeutil import as_utc, utcnow


def touch_worker(session: Session, name: str, *, target: str = "", backend: str = "",
                 token_id: int | None = None, leased: int = 0) -> None:
    session.execute(insert_ignore(session, WorkerRow).values(name=name, target=target, backend=backend,
                                                             token_id=token_id, jobs_leased=0))
    values: dict[str, object] = {"last_seen_at": utcnow()}
    if target:
        values["target"] = target
    if backend:
        values["backend"] = backend
    if token_id is not None:
        values["token_id"] = token_id
    if leased:
        values["jobs_leased"] = WorkerRow.jobs_leased + leased
    session.execute(update(WorkerRow).where(WorkerRow.name == name).values(**values))


def list_workers(session: Session) -> list[WorkerInfo]:
    rows = session.scalars(select(WorkerRow).order_by(WorkerRow.name)).all()
    return [WorkerInfo(name=r.name, target=r.target, backend=r.backend, jobs_leased=r.jobs_leased,
                       created_at=as_utc(r.created_at), last_seen_at=as_utc(r.last_seen_at)) for r in rows]
