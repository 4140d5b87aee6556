"""Export and import of the tuning log as JSON lines, so results move between sites.

One measurement per line, self-contained (the workload's canonical JSON and the target name, not
site-local ids). Import streams: lines are parsed and checked one at a time as they arrive (the
raw input is never held whole), every line passes the one measurement validation
(db.validation) before anything is written, and records already present (same workload, target
and config) are skipped, so importing the same file twice changes nothing.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from db.domain import ImportStats, Measurement
from db.errors import InvalidInputError
from db.measurements import iter_measurements
from db.orm import MeasurementRow
from db.refs import insert_ignore, target_id, target_name, workload_id, workload_of
from db.validation import check_measurement
from tuner.errors import InvalidWorkloadError
from tuner.workloads import Workload, workload_from_json

FORMAT_VERSION = 1
MAX_LINE_BYTES = 1 << 20  # one record; a longer line is junk, refused before it is parsed
MAX_IMPORT_LINES = 2_000_000


def to_record(m: Measurement) -> dict[str, Any]:
    mean_time = m.mean_time if m.mean_time is not None and math.isfinite(m.mean_time) else None
    return {
        "version": FORMAT_VERSION,
        "workload": m.workload.to_json(),
        "workload_key": m.workload.key,
        "target": m.target,
        "config": m.config,
        "config_hash": m.config_hash,
        "status": m.status,
        "times": list(m.times),
        "mean_time": mean_time,
        "error": m.error,
        "worker": m.worker,
        "source": m.source,
        "details": m.details,
        "created_at": m.created_at.isoformat() if m.created_at else None,
    }


def export_lines(session: Session, *, workload_key: str | None = None, target: str | None = None) -> Iterator[str]:
    """JSON lines (each ending in a newline) of every matching measurement, oldest first.

    The arguments are checked by the caller before the first line (``check_export_args``)."""
    for m in iter_measurements(session, workload_key=workload_key, target=target):
        yield json.dumps(to_record(m), sort_keys=True, separators=(",", ":")) + "\n"


def check_export_args(*, target: str | None, workload_key: str | None) -> str | None:
    """The canonical target name (or None); InvalidInputError before any byte is streamed."""
    if workload_key is not None and not 1 <= len(workload_key) <= 255:
        raise InvalidInputError("workload_key must have 1 to 255 characters")
    if workload_key is not None and "\x00" in workload_key:  # no stored key has one; PostgreSQL text cannot
        raise InvalidInputError("workload_key must not contain a NUL character")
    return target_name(target) if target is not None else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid number here")


def _parse(line_no: int, line: str) -> tuple[Workload, str, dict[str, Any]]:
    def bad(msg: str) -> InvalidInputError:
        return InvalidInputError(f"line {line_no}: {msg}")

    try:
        rec = json.loads(line, parse_constant=_reject_constant)
    except RecursionError:
        raise bad("JSON nested too deeply") from None
    except ValueError as exc:
        raise bad(f"not valid JSON ({exc})") from None
    if not isinstance(rec, dict):
        raise bad("a record must be a JSON object")
    version = rec.get("version", FORMAT_VERSION)
    if type(version) is not int or version != FORMAT_VERSION:
        raise bad(f"unsupported record version {version!r}")
    try:
        workload = workload_from_json(rec.get("workload"))  # type: ignore[arg-type]
    except InvalidWorkloadError as exc:
        raise bad(f"invalid workload: {exc}") from None
    if rec.get("workload_key") not in (None, workload.key):
        raise bad(f"workload_key {rec['workload_key']!r} does not match the workload ({workload.key!r})")
    target = rec.get("target")
    if not isinstance(target, str):
        raise bad(f"target must be a string, got {target!r}")
    try:
        tname = target_name(target)
        m = check_measurement(workload, tname, config=rec.get("config"), status=rec.get("status"),
                              times=rec.get("times", []), error=rec.get("error") or "", source=rec.get("source"),
                              details=rec.get("details", {}), worker=rec.get("worker") or "")
    except InvalidInputError as exc:
        raise bad(str(exc)) from None
    if rec.get("config_hash") not in (None, m.config_hash):
        raise bad(f"config_hash {rec['config_hash']!r} does not match the config ({m.config_hash!r})")
    created: datetime | None = None
    if rec.get("created_at") is not None:
        if not isinstance(rec["created_at"], str):
            raise bad("created_at must be an ISO timestamp string")
        try:
            created = datetime.fromisoformat(rec["created_at"])
        except ValueError:
            raise bad(f"created_at {rec['created_at'][:64]!r} is not an ISO timestamp") from None
    row: dict[str, Any] = dict(config_hash=m.config_hash, config=m.config, times=list(m.times),
                               mean_time=m.mean_time, status=m.status, error=m.error, worker=m.worker,
                               source=m.source, details=m.details, profile_version=m.profile_version,
                               task_id=None, job_id=None)
    if created is not None:
        row["created_at"] = created
    return workload, tname, row


class Importer:
    """Parses JSON lines as they arrive (whole lines, or raw byte chunks cut anywhere); each checked
    record goes, normalised, to a spool file (in memory up to ``SPOOL_BYTES``, then on disk), so
    memory stays bounded whatever the size of the import. ``write`` then stores the spooled records
    in chunks, in the caller's one transaction: nothing is written unless every line was valid."""

    SPOOL_BYTES = 4 << 20

    def __init__(self) -> None:
        self.line_no = 0
        self.count = 0
        self._carry = bytearray()
        self._spool = tempfile.SpooledTemporaryFile(max_size=self.SPOOL_BYTES, mode="w+b")

    def line(self, raw: str | bytes) -> None:
        self.line_no += 1
        if len(raw) > MAX_LINE_BYTES:
            raise InvalidInputError(f"line {self.line_no}: longer than {MAX_LINE_BYTES} bytes")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode()
            except UnicodeDecodeError:
                raise InvalidInputError(f"line {self.line_no}: not UTF-8") from None
        if not raw.strip():
            return
        if self.count >= MAX_IMPORT_LINES:
            raise InvalidInputError(f"at most {MAX_IMPORT_LINES} records per import")
        workload, tname, row = _parse(self.line_no, raw)
        if "created_at" in row:
            row = {**row, "created_at": row["created_at"].isoformat()}
        self._spool.write(json.dumps([workload.canonical_json(), tname, row], separators=(",", ":")).encode())
        self._spool.write(b"\n")
        self.count += 1

    def feed(self, chunk: bytes) -> None:
        """A piece of the byte stream; complete lines are parsed at once, the rest is carried."""
        self._carry.extend(chunk)
        start = 0
        while (end := self._carry.find(b"\n", start)) >= 0:
            self.line(bytes(self._carry[start:end]))
            start = end + 1
        del self._carry[:start]
        if len(self._carry) > MAX_LINE_BYTES:
            raise InvalidInputError(f"line {self.line_no + 1}: longer than {MAX_LINE_BYTES} bytes")

    def finish(self) -> None:
        if self._carry:
            self.line(bytes(self._carry))
            self._carry.clear()

    def records(self) -> Iterator[tuple[Workload, str, dict[str, Any]]]:
        """The checked records, in input order, read back from the spool."""
        self._spool.seek(0)
        for raw in self._spool:
            canonical, tname, row = json.loads(raw)
            if "created_at" in row:
                row["created_at"] = datetime.fromisoformat(row["created_at"])
            yield workload_of(canonical), tname, row

    def close(self) -> None:
        self._spool.close()

    def write(self, session: Session, *, chunk: int = 500) -> ImportStats:
        wids: dict[str, int] = {}
        tids: dict[str, int] = {}
        imported = total = 0
        part: list[dict[str, Any]] = []

        def flush() -> int:
            # rows without created_at get the server default; SQLAlchemy needs uniform keys per statement
            stored = 0
            for group in ([r for r in part if "created_at" in r], [r for r in part if "created_at" not in r]):
                if group:
                    result = session.execute(insert_ignore(session, MeasurementRow).values(group)
                                             .returning(MeasurementRow.id))
                    stored += len(result.all())
            part.clear()
            return stored

        try:
            for workload, tname, row in self.records():
                if workload.key not in wids:
                    wids[workload.key] = workload_id(session, workload)
                if tname not in tids:
                    tids[tname] = target_id(session, tname)
                part.append({**row, "workload_id": wids[workload.key], "target_id": tids[tname]})
                total += 1
                if len(part) >= chunk:
                    imported += flush()
            imported += flush()
        finally:
            self.close()
        return ImportStats(imported=imported, skipped=total - imported)


def import_lines(session: Session, lines: Iterable[str | bytes], *, chunk: int = 500) -> ImportStats:
    """Import JSON lines (e.g. an open file, read line by line); all are checked before anything is written."""
    importer = Importer()
    try:
        for raw in lines:
            importer.line(raw)
    except BaseException:
        importer.close()
        raise
    return importer.write(session, chunk=chunk)
