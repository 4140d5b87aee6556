"""`swtune tune-model` with a whole-model `--budget` too small for its tasks: the warning, the untuned
tasks reported as such, the log kept at a relative path, and `swtune compile` reading that log by
absolute path and by URL alike, counting the same layers untuned."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.app import build_app
from cli.task_table import TOP

app = build_app()
MODEL = ["resnet18", "--width", "0.125", "--image", "32"]


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"SWTUNE_DATABASE_URL": None}, terminal_width=200)  # type: ignore[dict-item]


def test_trials_and_budget_are_one_or_the_other(tmp_path: Path, monkeypatch) -> None:
    import tuner.bridge.extract

    monkeypatch.setattr(tuner.bridge.extract, "load_relax", lambda *a, **k: pytest.fail("work started"))
    result = run("tune-model", *MODEL, "--trials", "4", "--budget", "8", "--db", str(tmp_path / "x.db"))
    assert result.exit_code == 2 and "give --trials (per task) or --budget (the whole model's), not both" in \
        result.stderr, result.output
    help_text = " ".join(run("tune-model", "--help").stdout.split())
    assert "--trials" in help_text and "trials per task" in help_text and "the trial budget of the whole model" in \
        help_text


@pytest.mark.slow
def test_a_thin_budget_warns_and_its_untuned_tasks_are_counted_by_compile(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")
    monkeypatch.chdir(tmp_path)
    tuned = run("tune-model", *MODEL, "--budget", "8", "--workers", "1", "--timeout", "240", "--db", "logs/rn.db")
    assert tuned.exit_code == 0, tuned.output
    # (the rest of stderr: the lowering's log of untuned workloads falling back to default schedules)
    assert tuned.stderr.splitlines()[0] == ("warning: a budget of 8 trials cannot give each of the 18 tasks its "
                                            "baseline plus 3 trials (that needs 72): some tasks may end untuned")
    out = tuned.stdout
    assert "one budget of 8 trials" in out
    # its closing hint is a compile command that reads this log, with the same model options
    assert "(`swtune compile resnet18 --width 0.125 --image 32 -o DIR --db logs/rn.db` reads it)" in " ".join(
        out.split())
    log = tmp_path / "logs" / "rn.db"
    assert log.exists()

    from db import tasks as tasks_db
    from db.engine import Database

    database = Database(str(log))  # a path: the same log
    try:
        with database.session() as s:
            tasks = tasks_db.list_tasks(s)
    finally:
        database.dispose()
    untuned = {t.workload_key for t in tasks if t.untuned_reason}
    assert len(tasks) == 18 and 10 <= len(untuned) < 18  # 8 trials cannot reach more than 8 tasks
    assert all(t.state == "done" for t in tasks)
    reported = re.search(r"(\d+) of 18 tasks untuned", out)
    assert reported and int(reported.group(1)) == len(untuned), out
    # the live table's last frame marks each one: the tasks that take most of the model are rows of their own,
    # and (#46) one line counts the rest by state
    assert len(re.findall(r"^│ [^│]+│ done(?:, untuned)? +│", out, flags=re.M)) == TOP
    rest = re.search(r"^│ (\d+) more tasks \(--verbose lists them\) +│ ([^│]+?) +│", out, flags=re.M)
    assert rest and int(rest.group(1)) == 18 - TOP, out
    in_rest = re.search(r"done, untuned (\d+)", rest.group(2))
    assert len(re.findall(r"│ done, untuned +│", out)) + (int(in_rest.group(1)) if in_rest else 0) == len(untuned), out

    manifests = []
    for i, db in enumerate([str(log), f"sqlite:///{log}"]):  # absolute path, URL
        res = run("compile", *MODEL, "--db", db, "-o", str(tmp_path / f"out{i}"))
        assert res.exit_code == 0, res.output
        manifest = json.loads((tmp_path / f"out{i}" / "manifest.json").read_text())
        kernels = {k["workload_key"]: k["status"] for k in manifest["kernels"]}
        cpe = {k["workload_key"]: k["status"] for k in manifest["cpe_kernels"]}
        assert {key for key, status in kernels.items() if status != "tuned"} == untuned & set(kernels)
        assert {key for key, status in cpe.items() if status != "tuned"} == untuned & set(cpe)
        summary = " ".join(res.stdout.split())
        # a workload fused with different epilogues is several kernels: the summary counts kernels
        n_untuned = sum(1 for k in manifest["kernels"] if k["status"] != "tuned")
        n_cpe = sum(1 for k in manifest["cpe_kernels"] if k["status"] != "tuned")
        assert n_untuned >= len(untuned & set(kernels)) > 0
        assert f"({n_untuned} of {len(manifest['kernels'])} distinct kernels untuned; {n_cpe} of " \
               f"{len(manifest['cpe_kernels'])} CPE kernel tasks untuned)" in summary, summary
        manifests.append((kernels, cpe))
    assert manifests[0] == manifests[1]


@pytest.mark.slow
def test_tune_model_reports_the_active_profile_and_its_intervals(tmp_path: Path) -> None:
    """With a calibrated profile active in the log, workers measure with it and the report gives each tuned
    layer and the whole model the interval of the profile's parameter uncertainty."""
    pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")
    import numpy as np

    from db import migrate
    from db.engine import Database
    from db.profiles import store_profile
    from tuner.profile import default_profile

    log = tmp_path / "cal.db"
    migrate.upgrade(f"sqlite:///{log}")
    base = default_profile("sw26010").with_values({"dma_wait_cycles": 1500.0})
    draws = [{**base.values, "dma_wait_cycles": w} for w in np.linspace(500.0, 2500.0, 17)]
    database = Database(str(log))
    with database.session() as s:
        store_profile(s, base.with_values({}, fit={"draws": draws}))
    database.dispose()
    tuned = run("tune-model", *MODEL, "--budget", "24", "--workers", "1", "--timeout", "240", "--db", str(log))
    assert tuned.exit_code == 0, tuned.output
    out = " ".join(tuned.stdout.split())
    # (the per-layer table's cells wrap at the test console's width: "0.048 -" over "0.051")
    assert "per-layer result on sw26010 (simulator profile version 1)" in out and "95%" in out
    assert len(re.findall(r"│ +\d+\.\d+ - │", tuned.stdout)) == 18, tuned.stdout  # every layer has an interval
    assert re.search(r"whole model \(simulated\): tuned [\d.]+ ms \(simulator profile version 1; 95% interval "
                     r"[\d.]+ - [\d.]+ ms", out), out
