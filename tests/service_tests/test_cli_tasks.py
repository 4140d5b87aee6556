"""`swtune tasks list|show|cancel`, `swtune best`, `swtune submit` against a live server (the embedded
service: uvicorn on a loopback port, auth on, no driver: the test plays the worker), on every
storage backend."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from backends import fresh_url
from storage_helpers import TARGET, WORKLOAD, configs
from typer.testing import CliRunner

from cli.app import build_app
from db import tokens as tokens_db
from service.embedded import EmbeddedService, embedded_service

app = build_app()

DENSE = '{"op": "dense", "m": 16, "n": 64, "k": 128}'
CONV = '{"op": "conv2d", "n": 1, "c": 16, "h": 14, "w": 14, "k": 32, "r": 3, "s": 3, "padding": 1}'


@dataclass
class Live:
    service: EmbeddedService
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return self.service.url


@contextlib.contextmanager
def live_service(url: str) -> Iterator[Live]:
    """The embedded service with auth on and no driver, and one token per role."""
    with embedded_service(url, migrate=False, auth_enabled=True, driver_enabled=False) as service:
        with service.database.session() as s:
            tokens = {role: tokens_db.create_token(s, role, f"cli-{role}")[1]
                      for role in ("read", "submit", "worker")}
        yield Live(service, tokens)


@pytest.fixture
def live(backend_url: str) -> Iterator[Live]:
    with live_service(backend_url) as live:
        yield live


def run(url: str, token: str | None, *args: str) -> Any:
    env = {"SWTUNE_TOKEN": token or "", "COLUMNS": "250"}  # wide enough for workload keys on one line
    return CliRunner().invoke(app, [*args, "--server", url], env=env)


def measure(live: Live, task_id: int, times: list[float]) -> None:
    """Queue one config per time for the task and post them over HTTP as a worker would."""
    from db import jobs as jobs_db
    from db import tasks as tasks_db

    with live.service.database.session() as s:
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == task_id)
        jobs_db.enqueue(s, task_id, spec.workload_id, spec.target_id, configs(len(times), workload=spec.workload), 3)
    with live.service.client(live.tokens["worker"]) as worker:
        got = worker.lease("cli-w", TARGET, max_jobs=len(times))
        results = [{"job_id": j["id"], "status": "ok", "times": [t], "source": "simulator"}
                   for j, t in zip(got["jobs"], times)]
        outcomes = worker.post_results(got["lease_token"], "cli-w", results)
    assert [o["outcome"] for o in outcomes] == ["stored"] * len(times), outcomes


def test_submit_list_show_best_cancel(live: Live, tmp_path: Path) -> None:
    url = live.url
    submit_token, read_token = live.tokens["submit"], live.tokens["read"]
    done = run(url, submit_token, "submit", "--target", TARGET, "--trials", "20", "--strategy", "random",
               "-w", DENSE, "-w", CONV, "--label", "fc", "--label", "conv", "--json")
    assert done.exit_code == 0, done.output
    created = json.loads(done.stdout)
    assert len(created["task_ids"]) == 2 and created["workload_keys"][0] == WORKLOAD.key
    dense_id, conv_id = created["task_ids"]

    listed = run(url, read_token, "tasks", "list", "--submission", created["batch"], "--json")
    assert listed.exit_code == 0, listed.output
    tasks = json.loads(listed.stdout)
    listed_tasks = [(t["id"], t["label"], t["state"]) for t in tasks]
    assert listed_tasks == [(dense_id, "fc", "active"), (conv_id, "conv", "active")]
    table = run(url, read_token, "tasks", "list")
    assert table.exit_code == 0 and "fc" in table.stdout and WORKLOAD.key[:20] in table.stdout

    measure(live, dense_id, [3e-5, 2e-5])
    shown = run(url, read_token, "tasks", "show", str(dense_id), "--json")
    assert shown.exit_code == 0, shown.output
    task = json.loads(shown.stdout)
    assert task["trials_done"] == 2 and task["best_time"] == 2e-5
    assert [w["worker"] for w in task["workers"]] == ["cli-w"] and task["workers"][0]["ok"] == 2
    text = run(url, read_token, "tasks", "show", str(dense_id))
    assert text.exit_code == 0 and "cli-w" in text.stdout and "best config" in text.stdout

    for spec in (DENSE, WORKLOAD.key):  # by JSON spec or by key
        found = run(url, read_token, "best", spec, "--target", TARGET, "--json")
        assert found.exit_code == 0, found.output
        assert json.loads(found.stdout)["mean_time"] == 2e-5
    pretty = run(url, read_token, "best", DENSE, "--target", TARGET)
    assert pretty.exit_code == 0 and "0.0200 ms" in pretty.stdout

    cancelled = run(url, submit_token, "tasks", "cancel", str(conv_id), "--json")
    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.stdout)["state"] == "cancelled"

    # from a file, with labels
    spec_file = tmp_path / "w.json"
    spec_file.write_text(json.dumps({"workloads": [json.loads(DENSE)], "labels": ["again"]}))
    again = run(url, submit_token, "submit", "--target", TARGET, "--trials", "5", "--file", str(spec_file))
    assert again.exit_code == 0, again.output
    assert "again" in again.stdout and "/ui/#/submission/" in again.stdout


@pytest.mark.slow
def test_submit_a_model_through_the_extraction(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="model extraction needs swtune[models]")
    from tuner.bridge.extract import extract_model, trial_budget

    with fresh_url("sqlite", tmp_path) as url, live_service(url) as live:
        layers = extract_model("alexnet").layers
        # --trials is per task, as in tune-model and for workloads: the model's budget counts it per task
        per_task = run(live.url, live.tokens["submit"], "submit", "--model", "alexnet", "--target", TARGET,
                       "--trials", "6", "--json")
        assert per_task.exit_code == 0, per_task.output
        assert json.loads(per_task.stdout)["trial_budget"] == trial_budget(layers, 6) == 6 * len(layers)
        assert "warning" not in per_task.stderr
        # --budget is the whole model's; one too small for a baseline and a few trials per task is warned about
        done = run(live.url, live.tokens["submit"], "submit", "--model", "alexnet", "--target", TARGET,
                   "--budget", "4", "--json")
        assert done.exit_code == 0, done.output
        assert done.stderr.splitlines() == [f"warning: a budget of 4 trials cannot give each of the {len(layers)} "
                                            f"tasks its baseline plus 3 trials (that needs {4 * len(layers)}): some "
                                            "tasks may end untuned"]
        created = json.loads(done.stdout)
        assert created["warnings"] == [done.stderr.splitlines()[0].removeprefix("warning: ")]
        both = run(live.url, live.tokens["submit"], "submit", "--model", "alexnet", "--target", TARGET,
                   "--budget", "4", "--trials", "4")
        assert both.exit_code == 2 and "not both" in both.stderr
        # one submission, one budget of 4 trials for the whole model, each distinct workload once with its call count
        assert (created["model"], created["trial_budget"], created["state"]) == ("alexnet", 4, "active")
        assert [(t["workload_key"], t["call_count"]) for t in created["tasks"]] == [
            (layer.workload.key, layer.weight) for layer in layers]
        with live.service.client(live.tokens["read"]) as api:
            tasks = api.tasks(batch=created["id"])
            report = api.submission(created["id"])
        assert [(t["label"], t["model"]) for t in tasks] == [(layer.name, "alexnet") for layer in layers]
        assert [layer["call_count"] for layer in report["layers"]] == [layer.weight for layer in layers]


def _one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow
def test_errors_are_one_line_with_exit_code_2(live: Live) -> None:
    url, tokens = live.url, live.tokens
    read_token = tokens["read"]
    _one_line_error(run(url, None, "tasks", "list"), "401", "SWTUNE_TOKEN")
    _one_line_error(run(url, "not-a-token", "tasks", "list"), "401")
    _one_line_error(run(url, read_token, "tasks", "show", "424242"), "404", "424242")
    _one_line_error(run(url, read_token, "tasks", "cancel", "1"), "403")  # a read token may not cancel
    _one_line_error(run(url, read_token, "best", DENSE, "--target", TARGET), "404", "never been tuned")
    _one_line_error(run(url, read_token, "best", DENSE, "--target", "x86"), "422")
    _one_line_error(run(url, read_token, "best", '{"op": "dense", "m": 1}', "--target", TARGET), "missing fields")
    _one_line_error(run(url, tokens["submit"], "submit", "--target", TARGET, "-w", DENSE, "--label", "a",
                        "--label", "b"), "2 --label for 1 workloads")
    _one_line_error(run(url, tokens["submit"], "submit", "--target", TARGET), "exactly one of")
    _one_line_error(run("http://127.0.0.1:9", read_token, "tasks", "list"), "cannot reach")
