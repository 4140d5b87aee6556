"""Calibrating a target's simulator profile to measured times (``calibrate``) and keeping it in the
tuning log.

Three sources of measurements, one per call: swDNN's published 172-shape sweep (SW26010 only;
tuner/calibrate/swdnn.py), a CSV of a user's own hardware runs (``workload,config,seconds``, every row
passing the tuning log's measurement check, db/validation.py), or the tuning log's own results that
Sunway workers posted with source ``hardware``. The fitted profile becomes the target's active profile
only if it keeps the FACTS figures (tuner/calibrate/pins.py).
"""

from __future__ import annotations

import csv
import enum
import json
import statistics
from pathlib import Path
from typing import Any

from swtune.errors import ArgumentError
from swtune.results import Calibration
from swtune.tuning_log import database_url

CSV_COLUMNS = ("workload", "config", "seconds")


class Source(str, enum.Enum):
    """Where the measurements of a calibration come from."""

    PUBLISHED = "published"  # swDNN's published sweep (SW26010)
    CSV = "csv"  # a CSV file of hardware runs
    LOG = "log"  # the tuning log's hardware results


def calibrate(source: Source | str, *, csv_file: str | Path | None = None, target: str = "sw26010",
              db: str | None = None, bootstrap: int = 200, folds: int = 5, seed: int = 0, store: bool = True,
              pin_facts: bool = False, activate_anyway: bool = False, out: str | Path | None = None) -> Calibration:
    """Fit the simulator's uncertain costs (the profile of ``target``) to measured times from ``source``
    (``Source``: published, csv with ``csv_file``, or log), with ``bootstrap`` refits for the intervals and
    a ``folds``-fold cross-validated error.

    ``store``: keep the profile in the tuning log ``db`` (a path or a URL; None: ``./swtune.db``) as the
    target's next version, active unless it breaks a FACTS figure (then inactive, unless
    ``activate_anyway``); ``pin_facts`` holds those figures during the fit instead. ``out``: also write the
    profile document (JSON) there. Returns a ``Calibration``. Raises ``ArgumentError`` for a source that
    cannot be used (a CSV without ``csv_file``, a bad CSV row, the published sweep for another target, a
    log without hardware results), ``ValueError`` for a bad ``db``."""
    from tuner.calibrate.fit import calibrate as fit_profile
    from tuner.calibrate.pins import DgemmPin, broken, check
    from tuner.profile import default_profile
    from tuner.targets import get_target

    source = Source(source)
    if (source == Source.CSV) != (csv_file is not None):
        raise ArgumentError("a csv_file goes with the csv source, and the csv source needs one")
    tgt = get_target(target)
    url = database_url(db)  # a bad db is refused before any work
    base = default_profile(tgt)
    model: Any
    if source == Source.PUBLISHED:
        from tuner.calibrate.swdnn import SwdnnReplay

        if tgt.name != "sw26010":
            raise ArgumentError(f"swDNN's sweep ran on SW26010, not {tgt.name}: calibrate from a CSV of your runs "
                                "or from the log's hardware results")
        model = SwdnnReplay(tgt)
    else:
        from tuner.calibrate.records import SimulatedRecords

        if csv_file is not None:
            model = SimulatedRecords(base, read_csv(Path(csv_file), tgt.name), f"CSV {Path(csv_file).name}")
        else:
            model = SimulatedRecords(base, log_records(url, tgt.name), "tuning log hardware results")
    constraints = [DgemmPin(base, weight=1000.0)] if pin_facts and check(base) else []
    cal = fit_profile(model, base, bootstrap=bootstrap, folds=folds, seed=seed, constraints=constraints)
    profile = cal.profile
    breaks = broken(profile)
    activate = not breaks or activate_anyway
    if store:
        from db import migrate
        from db.engine import Database
        from db.profiles import store_profile

        migrate.upgrade(url)
        database = Database(url)
        try:
            with database.session() as session:
                profile = store_profile(session, profile, activate=activate)
        finally:
            database.dispose()
    result = Calibration(profile, cal.summary(), cal.code_terms, store, activate, url, breaks)
    if out is not None:
        Path(out).write_text(json.dumps(result.document, indent=1))
    return result


def read_csv(path: Path, target: str) -> list[Any]:
    """The records of a calibration CSV; every row passes the tuning log's measurement check (the first
    bad row raises ``ArgumentError`` naming its line)."""
    from db.errors import InvalidInputError
    from db.refs import parse_workload
    from db.validation import check_measurement
    from tuner.calibrate.records import Record

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArgumentError(f"cannot read {path}: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(CSV_COLUMNS) <= set(reader.fieldnames):
        raise ArgumentError(f"{path}: the header must name the columns {', '.join(CSV_COLUMNS)}")
    records = []
    for line, row in enumerate(reader, start=2):
        try:
            workload = parse_workload(_json(row["workload"], "workload"))
            seconds = _number(row["seconds"])
            checked = check_measurement(workload, target, config=_json(row["config"], "config"), status="ok",
                                        times=[seconds], source="hardware")
        except InvalidInputError as exc:
            raise ArgumentError(f"{path} line {line}: {exc}; nothing was fitted or stored") from None
        records.append(Record(workload, checked.config, checked.times[0]))
    if not records:
        raise ArgumentError(f"{path} holds no measurements")
    return records


def _json(text: str | None, what: str) -> Any:
    from db.errors import InvalidInputError

    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        raise InvalidInputError(f"{what} is not JSON: {text!r}") from None


def _number(text: str | None) -> Any:
    from db.errors import InvalidInputError

    try:
        return float(text or "")
    except ValueError:
        raise InvalidInputError(f"seconds is not a number: {text!r}") from None


def log_records(url: str, target: str) -> list[Any]:
    """The tuning log's successful hardware measurements of ``target`` (the median of each one's times)."""
    from db.engine import Database
    from db.measurements import iter_measurements
    from tuner.calibrate.records import Record

    database = Database(url)
    try:
        with database.session() as session:
            records = [Record(m.workload, m.config, statistics.median(m.times))
                       for m in iter_measurements(session, target=target)
                       if m.source == "hardware" and m.status == "ok" and m.times]
    finally:
        database.dispose()
    if not records:
        raise ArgumentError(f"the tuning log {url} holds no hardware results for {target}")
    return records
