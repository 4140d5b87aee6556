"""Export and import of the tuning log as JSON lines, so results move between sites.

One measurement per line, self-contained (the workload's canonical JSON and the target name, not
site-local ids). Import validates every line before writing anything and skips records already
present (same workload, target and config), so importing the same file twice changes nothing.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Iterable, Iterator

from sqlalchemy.orm import Session

from db.domain import ImportStats, Measurement
from db.errors import InvalidInputError
from db.measurements import iter_measurements
from db.orm import MeasurementRow
from db.refs import insert_ignore, target_id, target_name, workload_id
from tuner.errors import InvalidWorkloadError
from tuner.measure.base import MeasureResult
from tuner.space.space import config_hash
from tuner.workloads import Workload, workload_from_json

FORMAT_VERSION = 1


def to_record(m: Measurement) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "workload": m.workload.to_json(),
        "workload_key": m.workload.key,
        "target": m.target,
        "config": m.config,
        "config_hash": m.config_hash,
        "status": m.status,
        "times": list(m.times),
        "mean_time": m.mean_time,
        "error": m.error,
        "worker": m.worker,
        "source": m.source,
        "details": m.details,
        "created_at": m.created_at.isoformat() if m.created_at else None,
    }


def export_lines(session: Session, *, workload_key: str | None = None, target: str | None = None) -> Iterator[str]:
    """JSON lines (each ending in a newline) of every matching measurement, oldest first."""
    for m in iter_measurements(session, workload_key=workload_key, target=target):
        yield json.dumps(to_record(m), sort_keys=True, separators=(",", ":")) + "\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid number here")


def _parse(line_no: int, line: str) -> tuple[Workload, str, dict[str, Any]]:
    def bad(msg: str) -> InvalidInputError:
        return InvalidInputError(f"line {line_no}: {msg}")

    try:
        rec = json.loads(line, parse_constant=_reject_constant)
    except ValueError as exc:
        raise bad(f"not valid JSON ({exc})") from None
    if not isinstance(rec, dict):
        raise bad("a record must be a JSON object")
    if rec.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise bad(f"unsupported record version {rec.get('version')!r}")
    try:
        workload = workload_from_json(rec.get("workload"))  # type: ignore[arg-type]
    except InvalidWorkloadError as exc:
        raise bad(f"invalid workload: {exc}") from None
    if rec.get("workload_key") not in (None, workload.key):
        raise bad(f"workload_key {rec['workload_key']!r} does not match the workload ({workload.key!r})")
    try:
        tname = target_name(str(rec.get("target")))
    except InvalidInputError as exc:
        raise bad(str(exc)) from None
    config = rec.get("config")
    if not isinstance(config, dict) or not config:
        raise bad("config must be a non-empty JSON object")
    chash = config_hash(config)
    if rec.get("config_hash") not in (None, chash):
        raise bad(f"config_hash {rec['config_hash']!r} does not match the config ({chash!r})")
    times = rec.get("times") or []
    if not isinstance(times, list) or any(isinstance(t, bool) or not isinstance(t, (int, float)) for t in times):
        raise bad("times must be a list of numbers")
    try:
        m = MeasureResult(config=config, status=str(rec.get("status")), times=tuple(float(t) for t in times),
                          error=str(rec.get("error") or ""), source=str(rec.get("source") or ""),
                          details=rec.get("details") or {})
    except ValueError as exc:
        raise bad(str(exc)) from None
    if any(not math.isfinite(t) or t <= 0 for t in m.times):
        raise bad("times must be finite and positive")
    created: datetime | None = None
    if rec.get("created_at"):
        try:
            created = datetime.fromisoformat(str(rec["created_at"]))
        except ValueError:
            raise bad(f"created_at {rec['created_at']!r} is not an ISO timestamp") from None
    row = dict(config_hash=chash, config=config, times=list(m.times), mean_time=m.mean_time if m.ok else None,
               status=m.status, error=m.error, worker=str(rec.get("worker") or ""), source=m.source,
               details=dict(m.details), task_id=None, job_id=None)
    if created is not None:
        row["created_at"] = created
    return workload, tname, row


def import_lines(session: Session, lines: Iterable[str | bytes], *, chunk: int = 500) -> ImportStats:
    """Import JSON lines; all lines are checked before anything is written."""
    parsed = []
    for i, raw in enumerate(lines, start=1):
        line = raw.decode() if isinstance(raw, bytes) else raw
        if line.strip():
            parsed.append(_parse(i, line))
    wids: dict[str, int] = {}
    tids: dict[str, int] = {}
    rows = []
    for workload, tname, row in parsed:
        if workload.key not in wids:
            wids[workload.key] = workload_id(session, workload)
        if tname not in tids:
            tids[tname] = target_id(session, tname)
        rows.append({**row, "workload_id": wids[workload.key], "target_id": tids[tname]})
    imported = 0
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        # rows without created_at get the server default; SQLAlchemy needs uniform keys per statement
        with_ts = [r for r in part if "created_at" in r]
        without_ts = [r for r in part if "created_at" not in r]
        for group in (with_ts, without_ts):
            if group:
                result = session.execute(insert_ignore(session, MeasurementRow).values(group)
                                         .returning(MeasurementRow.id))
                imported += len(result.all())
    return ImportStats(imported=imported, skipped=len(rows) - imported)
