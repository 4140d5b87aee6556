"""``swtune calibrate``: fit a target's simulator profile to measured times and keep it in the tuning log.

The command picks the source from its options and prints; the fit is ``swtune.calibrate``'s. Three
sources of measurements, one per call:

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

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.output import console, warn
from cli.tuning_log import DB_HELP


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
    import swtune
    from swtune.calibration import Source

    if sum((published, csv_file is not None, from_log)) != 1:
        raise CommandError("give exactly one source of measurements: --published, --csv FILE or --from-log")
    source = Source.PUBLISHED if published else Source.CSV if csv_file is not None else Source.LOG
    cal = swtune.calibrate(source, csv_file=csv_file, target=target, db=db, bootstrap=bootstrap, folds=folds,
                           seed=seed, store=store, pin_facts=pin_facts, activate_anyway=activate_anyway, out=out)
    if json_out:
        print(json.dumps(cal.document))
        return
    _print(cal.profile, cal.summary, cal.code_terms, stored=cal.stored, active=cal.active, url=cal.url,
           breaks=cal.breaks)


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
