"""Targets and workloads: get-or-create by name/key, safe under concurrent writers."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from db.errors import InvalidInputError, NotFoundError
from db.orm import TargetRow, WorkloadRow
from tuner.errors import InvalidWorkloadError, UnknownTargetError
from tuner.targets import get_target
from tuner.workloads import Workload, workload_from_json


def insert_ignore(session: Session, table: Any) -> Insert:
    """INSERT ... ON CONFLICT DO NOTHING for the session's dialect (both backends support it)."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def parse_workload(spec: Workload | dict[str, Any] | str) -> Workload:
    if isinstance(spec, Workload):
        return spec
    try:
        return workload_from_json(spec)
    except InvalidWorkloadError as exc:
        raise InvalidInputError(f"invalid workload: {exc}") from None


def target_name(name: str) -> str:
    """The canonical preset name, or InvalidInputError naming the known targets."""
    try:
        return get_target(name).name
    except UnknownTargetError as exc:
        raise InvalidInputError(str(exc)) from None


def preset_name(name: str) -> str:
    """The preset a target is a core-group count of (``sw26010-4cg``: ``sw26010``); the unit profiles belong to."""
    return get_target(target_name(name)).base_name


def target_id(session: Session, name: str, *, create: bool = True) -> int:
    name = target_name(name)
    found = session.scalar(select(TargetRow.id).where(TargetRow.name == name))
    if found is not None:
        return found
    if not create:
        raise NotFoundError(f"target {name!r} has no records yet")
    session.execute(insert_ignore(session, TargetRow).values(name=name, description=get_target(name).description))
    return session.scalar(select(TargetRow.id).where(TargetRow.name == name))  # type: ignore[return-value]


def workload_id(session: Session, workload: Workload, *, create: bool = True) -> int:
    found = session.scalar(select(WorkloadRow.id).where(WorkloadRow.key == workload.key))
    if found is not None:
        return found
    if not create:
        raise NotFoundError(f"workload {workload.key!r} is unknown")
    session.execute(insert_ignore(session, WorkloadRow).values(
        key=workload.key, op=workload.op, canonical_json=workload.canonical_json(), flops=int(workload.flops)))
    return session.scalar(select(WorkloadRow.id).where(WorkloadRow.key == workload.key))  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def _workload_from_canonical(canonical_json: str) -> Workload:
    return workload_from_json(canonical_json)


def workload_of(row: WorkloadRow | str) -> Workload:
    """Rebuild the domain workload from a row (or its canonical JSON); cached, workloads are frozen."""
    return _workload_from_canonical(row if isinstance(row, str) else row.canonical_json)
