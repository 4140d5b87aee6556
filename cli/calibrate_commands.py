"""``swtune calibrate``: fit a target's simulator profile to measured times and keep it in the tuning log.

Three sources of measurements, one per call:

- ``--published``: swDNN's 172-shape sweep replayed with swDNN's own schedule (tuner/calibrate/swdnn.py);
  the DMA tables are already the DMA model's fit (tuner/dma_model.py) and are not refitted here. The sweep
  sets the chip's costs (FMA issue rate, per-wait latency, spawn/join); swDNN's own register-tile start-up
  and DMA overlap are fitted beside them as costs of swDNN's code, printed apart and not applied;
- ``--csv FILE``: a user's own hardware runs, one row per measured config: ``workload`` (the workload JSON
  the REST API takes), ``config`` (JSON), ``seconds`` (one launch). Every row passes the tuning log's one
  measurement check (db/validation.py); the first bad row is named and nothing is fitted or stored;
- ``--from-log``: the tuning log's own results that Sunway workers posted with source ``hardware``.

The fitted profile is printed (each parameter with its interval and source) with the cross-validated error,
written to ``--out`` if given, and stored in the tuning log as the target's next profile version unless
``--no-store``. It becomes the active profile (simulator workers measure with it) only if it keeps the FACTS
figures (tuner/calibrate/pins.py: the best DGEMM at 0.80-0.95 of a core group's peak); a profile that breaks
one is stored inactive, saying which, unless ``--activate-anyway``. ``--pin-facts`` holds those figures
during the fit instead (the records then fit as well as the pinned figures allow).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.output import console, warn
from cli.tuning_log import DB_HELP, database_url

CSV_COLUMNS = ("workload", "config", "seconds")


def calibrate(
    published: Annotated[bool, typer.Option("--published", help="fit swDNN's published sweep (SW26010)")] = False,
    csv_file: Annotated[Path | None, typer.Option("--csv", help="a CSV of workload,config,seconds rows")] = None,
    from_log: Annotated[bool, typer.Option("--from-log", help="fit the tuning log's hardware results")] = False,
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    db: Annotated[str | None, typer.Option("--db", "--database-url", envvar="SWTUNE_DATABASE_URL",
                                           help=DB_HELP)] = None,
    bootstrap: Annotated[int, typer.Option(min=0, max=2000, help="bootstrap refits for the intervals")] = 200,
    folds: Annotated[int, typer.Option(min=2, max=20, help="cross-validation folds")] = 5,
    seed: Annotated[int, typer.Option()] = 0,
    store: Annotated[bool, typer.Option(help="store the profile in the tuning log as the active one")] = True,
    pin_facts: Annotated[bool, typer.Option(help="hold the FACTS figures (DGEMM 0.80-0.95) in the fit")] = False,
    activate_anyway: Annotated[bool, typer.Option(help="activate it even if it breaks a FACTS figure")] = False,
    out: Annotated[Path | None, typer.Option(help="also write the profile document (JSON) here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the profile document as JSON")] = False,
) -> None:
    """Fit the simulator's uncertain costs (the profile) to measured times, with intervals and a
    cross-validated error, and make it the target's active profile."""
    from tuner.calibrate.fit import calibrate as fit_profile
    from tuner.calibrate.pins import DgemmPin, broken, check
    from tuner.profile import default_profile
    from tuner.targets import get_target

    if sum((published, csv_file is not None, from_log)) != 1:
        raise CommandError("give exactly one source of measurements: --published, --csv FILE or --from-log")
    tgt = get_target(target)
    url = database_url(db)  # a bad --db is refused before any work
    base = default_profile(tgt)
    model: Any
    if published:
        from tuner.calibrate.swdnn import SwdnnReplay

        if tgt.name != "sw26010":
            raise CommandError(f"swDNN's sweep ran on SW26010, not {tgt.name}: use --csv or --from-log")
        model = SwdnnReplay(tgt)
    else:
        from tuner.calibrate.records import SimulatedRecords

        if csv_file is not None:
            model = SimulatedRecords(base, read_csv(csv_file, tgt.name), f"CSV {csv_file.name}")
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
    document = profile.to_json()
    if out is not None:
        out.write_text(json.dumps(document, indent=1))
    if json_out:
        print(json.dumps(document))
        return
    _print(profile, cal.summary(), cal.code_terms, stored=store, active=activate, url=url, breaks=breaks)


def _print(profile: Any, summary: dict[str, Any], code_terms: Mapping[str, Mapping[str, Any]], *, stored: bool,
           active: bool, url: str, breaks: list[str]) -> None:
    table = Table(title=f"{profile.target} profile" + (f" version {profile.version}" if stored else ""))
    table.add_column("parameter", no_wrap=True)
    for col in ("value", "interval (95% jointly)", "unit", "source"):
        table.add_column(col, overflow="fold")
    for p in profile.parameters:
        shown = f"{p.interval[0]:.4g} - {p.interval[1]:.4g}" if p.interval else "not fitted (kept)"
        table.add_row(p.name, f"{p.value:.4g}", shown, p.spec.unit, p.spec.source)
    console.print(table)
    if code_terms:  # costs of the measured code (tuner/calibrate/model.py CodeTerm)
        code = Table(title="costs of the measured code itself (fitted with the profile, not applied to the simulator)")
        code.add_column("term", no_wrap=True)
        for col in ("value", "interval (95% jointly)", "unit", "source"):
            code.add_column(col, overflow="fold")
        for name, t in code_terms.items():
            iv = t["interval"]
            code.add_row(name, f"{t['value']:.4g}", f"{iv[0]:.4g} - {iv[1]:.4g}" if iv else "not fitted", t["unit"],
                         t["source"])
        console.print(code)
    console.print(f"{summary['records']} records ({profile.fit.get('source')}): in-sample rms log error "
                  f"{summary['rms_log_err']}; {summary['cv_folds']}-fold cross-validated median |log error| "
                  f"{summary['cv_median_abs_log_err']}, max {summary['cv_max_abs_log_err']}")
    for line in breaks:
        warn([f"this profile breaks a FACTS figure: {line}"])
    if stored and active:
        console.print(f"stored as the active profile of {profile.target} in {url}: simulator workers measure "
                      "with it from now on")
    elif stored:
        console.print(f"stored as version {profile.version} of {profile.target} in {url}, not activated (it "
                      "breaks a FACTS figure; --activate-anyway to use it, --pin-facts to fit within them)")


def read_csv(path: Path, target: str) -> list[Any]:
    """The records of a calibration CSV; every row passes the tuning log's measurement check."""
    from db.errors import InvalidInputError
    from db.refs import parse_workload
    from db.validation import check_measurement
    from tuner.calibrate.records import Record

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(CSV_COLUMNS) <= set(reader.fieldnames):
        raise CommandError(f"{path}: the header must name the columns {', '.join(CSV_COLUMNS)}")
    records = []
    for line, row in enumerate(reader, start=2):
        try:
            workload = parse_workload(_json(row["workload"], "workload"))
            seconds = _number(row["seconds"])
            checked = check_measurement(workload, target, config=_json(row["config"], "config"), status="ok",
                                        times=[seconds], source="hardware")
        except InvalidInputError as exc:
            raise CommandError(f"{path} line {line}: {exc}; nothing was fitted or stored") from None
        records.append(Record(workload, checked.config, checked.times[0]))
    if not records:
        raise CommandError(f"{path} holds no measurements")
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
    import statistics

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
        raise CommandError(f"the tuning log {url} holds no hardware results for {target}")
    return records
