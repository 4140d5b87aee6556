"""Model functions reading measurements: the compile-time best-config lookup and listings."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import func, or_, select, true
from sqlalchemy.orm import Session

from db.domain import BestConfig, Measurement
from db.errors import NotFoundError
from db.orm import MeasurementRow, TargetRow, WorkloadRow
from db.profiles import active_version
from db.refs import target_name, workload_of
from db.timeutil import as_utc
from tuner.measure.base import Source


def _best_stmt(workload_id: Any, target_id: Any, source: str | None = None) -> Any:
    # One index probe either way: ix_measurements_best (workload_id, target_id, status, mean_time) for the
    # fastest of all, ix_measurements_best_source (workload_id, target_id, source, status, mean_time) for the
    # fastest of one source.
    stmt = (select(MeasurementRow)
            .where(MeasurementRow.workload_id == workload_id, MeasurementRow.target_id == target_id,
                   MeasurementRow.status == "ok", MeasurementRow.mean_time.is_not(None))
            .order_by(MeasurementRow.mean_time, MeasurementRow.id).limit(1))
    return stmt if source is None else stmt.where(MeasurementRow.source == source)


def profile_filter(profile_version: int | None) -> Any:
    """A WHERE clause keeping the measurements one cost model may learn from together: simulated times of
    ``profile_version`` only (different profiles time one config differently), and every time no profile
    produced (hardware, ...). ``None`` keeps everything."""
    if profile_version is None:
        return true()
    return or_(MeasurementRow.source != Source.SIMULATOR.value, MeasurementRow.profile_version == profile_version)


def best_config(session: Session, workload_key: str, target: str, *, count: bool = False,
                active: int | None = None) -> BestConfig:
    """The fastest successful config of a (workload key, target); NotFoundError says why there is none.

    A time measured on the hardware wins over any simulated one: the fastest hardware result is served when
    there is one; else the fastest simulated with the target's active profile (the model every simulator
    worker measures with now, so a time from a profile since replaced never beats it); else the fastest of
    all. ``BestConfig.source`` and ``profile_version`` say which was served. ``active``: the target's active
    profile version when the caller has read it already (a batch)."""
    tname = target_name(target)
    ids = session.execute(select(WorkloadRow.id, WorkloadRow.canonical_json, TargetRow.id)
                          .select_from(WorkloadRow).join(TargetRow, TargetRow.name == tname)
                          .where(WorkloadRow.key == workload_key)).first()
    if ids is None:
        raise NotFoundError(f"no tuned schedule for workload {workload_key!r} on {tname}: "
                            "the workload has never been tuned there (submit a tuning task first)")
    wid, canonical, tid = ids
    version = active_version(session, tname) if active is None else active
    simulated = _best_stmt(wid, tid, Source.SIMULATOR.value).where(MeasurementRow.profile_version == version)
    row = (session.scalars(_best_stmt(wid, tid, Source.HARDWARE.value)).first()
           or session.scalars(simulated).first() or session.scalars(_best_stmt(wid, tid)).first())
    if row is None:
        raise NotFoundError(f"no tuned schedule for workload {workload_key!r} on {tname}: "
                            "no successful measurement yet")
    n = 0
    if count:
        n = session.scalar(select(func.count()).select_from(MeasurementRow).where(
            MeasurementRow.workload_id == wid, MeasurementRow.target_id == tid)) or 0
    return BestConfig(workload=workload_of(canonical), target=tname, config=row.config, config_hash=row.config_hash,
                      mean_time=float(row.mean_time or 0.0), times=tuple(row.times), source=row.source,
                      worker=row.worker, measured_at=as_utc(row.created_at), n_measured=n,
                      profile_version=row.profile_version)


def best_configs(session: Session, workload_keys: Sequence[str], target: str) -> dict[str, BestConfig]:
    """Batch form for a whole model: keys with no tuned schedule are simply absent."""
    found: dict[str, BestConfig] = {}
    active = active_version(session, target_name(target))
    for key in dict.fromkeys(workload_keys):
        try:
            found[key] = best_config(session, key, target, active=active)
        except NotFoundError:
            continue
    return found


def _measurement(row: MeasurementRow, canonical: str, target: str) -> Measurement:
    return Measurement(id=row.id, workload=workload_of(canonical), target=target, config=row.config,
                       config_hash=row.config_hash, times=tuple(row.times), mean_time=row.mean_time,
                       status=row.status, error=row.error, worker=row.worker, source=row.source,
                       details=row.details or {}, task_id=row.task_id, job_id=row.job_id,
                       created_at=as_utc(row.created_at), profile_version=row.profile_version)


def iter_measurements(session: Session, *, workload_key: str | None = None, target: str | None = None,
                      after_id: int = 0, chunk: int = 1000) -> Iterator[Measurement]:
    """Every measurement (optionally of one workload / target) in id order, read in chunks."""
    last = after_id
    while True:
        stmt = (select(MeasurementRow, WorkloadRow.canonical_json, TargetRow.name)
                .join(WorkloadRow, WorkloadRow.id == MeasurementRow.workload_id)
                .join(TargetRow, TargetRow.id == MeasurementRow.target_id)
                .where(MeasurementRow.id > last).order_by(MeasurementRow.id).limit(chunk))
        if workload_key:
            stmt = stmt.where(WorkloadRow.key == workload_key)
        if target:
            stmt = stmt.where(TargetRow.name == target_name(target))
        rows = session.execute(stmt).all()
        for row, canonical, tname in rows:
            yield _measurement(row, canonical, tname)
        if len(rows) < chunk:
            return
        last = rows[-1][0].id


def measurements_of(session: Session, workload_id: int, target_id: int, exclude_ids: set[int] | None = None,
                    *, profile_version: int | None = None) -> list[tuple[int, dict[str, Any], str, list[float]]]:
    """(id, config, status, times) of a (workload, target)'s measurements not in ``exclude_ids``; with
    ``profile_version``, of its simulated ones only those of that simulator profile (``profile_filter``).

    The driver keeps the ids it has told its strategy; asking by id set rather than "id > last"
    cannot miss a row committed late with a smaller id by another transaction."""
    ids = session.scalars(select(MeasurementRow.id).where(MeasurementRow.workload_id == workload_id,
                                                          MeasurementRow.target_id == target_id,
                                                          profile_filter(profile_version))).all()
    new = [i for i in ids if not exclude_ids or i not in exclude_ids]
    if not new:
        return []
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(new), 1000):
        stmt = (select(MeasurementRow.id, MeasurementRow.config, MeasurementRow.status, MeasurementRow.times)
                .where(MeasurementRow.id.in_(new[start:start + 1000])).order_by(MeasurementRow.id))
        out.extend(tuple(r) for r in session.execute(stmt).all())
    return out


def measured_elsewhere(session: Session, target_id: int, workload_id: int, limit: int, *,
                       profile_version: int | None = None) -> list[tuple[str, dict[str, Any], float]]:
    """(workload canonical JSON, config, mean seconds) of the ``limit`` newest successful measurements
    of the target's other workloads: what a new task's cost model transfers from. With
    ``profile_version``, simulated ones only of that simulator profile (``profile_filter``)."""
    stmt = (select(WorkloadRow.canonical_json, MeasurementRow.config, MeasurementRow.mean_time)
            .join(WorkloadRow, WorkloadRow.id == MeasurementRow.workload_id)
            .where(MeasurementRow.target_id == target_id, MeasurementRow.workload_id != workload_id,
                   MeasurementRow.status == "ok", MeasurementRow.mean_time.is_not(None),
                   profile_filter(profile_version))
            .order_by(MeasurementRow.id.desc()).limit(limit))
    return [(canonical, config, float(seconds)) for canonical, config, seconds in session.execute(stmt).all()]


def count_measurements(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(MeasurementRow)) or 0
