"""`swtune tasks list|show|cancel`, `swtune best`, `swtune submit` against a live server (uvicorn on a
loopback port, auth on, no driver: the test plays the worker), on every storage backend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Api, lease, make_api
from backends import fresh_url
from storage_helpers import TARGET, WORKLOAD, configs
from typer.testing import CliRunner

from service.cli import app
from service.embedded import EmbeddedServer

DENSE = '{"op": "dense", "m": 16, "n": 64, "k": 128}'
CONV = '{"op": "conv2d", "n": 1, "c": 16, "h": 14, "w": 14, "k": 32, "r": 3, "s": 3, "padding": 1}'


@pytest.fixture
def live(backend_url: str) -> Iterator[tuple[Api, str]]:
    with make_api(backend_url) as api, EmbeddedServer(api.app) as server:
        yield api, server.url


def run(url: str, token: str | None, *args: str) -> Any:
    env = {"SWTUNE_TOKEN": token or "", "COLUMNS": "250"}  # wide enough for workload keys on one line
    return CliRunner().invoke(app, [*args, "--server", url], env=env)


def measure(api: Api, task_id: int, times: list[float]) -> None:
    """Queue one config per time for the task and post them as a worker would."""
    from db import jobs as jobs_db
    from db import tasks as tasks_db

    with api.db.session() as s:
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == task_id)
        jobs_db.enqueue(s, task_id, spec.workload_id, spec.target_id, configs(len(times), workload=spec.workload), 3)
    got = lease(api, worker="cli-w", max_jobs=len(times))
    results = [{"job_id": j["id"], "status": "ok", "times": [t], "source": "simulator"}
               for j, t in zip(got["jobs"], times)]
    r = api.client.post("/api/v1/jobs/results", json={"lease_token": got["lease_token"], "worker": "cli-w",
                                                      "results": results}, headers=api.headers("worker"))
    assert r.status_code == 200, r.text


def test_submit_list_show_best_cancel(live: tuple[Api, str], tmp_path: Path) -> None:
    api, url = live
    submit_token, read_token = api.tokens["submit"], api.tokens["read"]
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

    measure(api, dense_id, [3e-5, 2e-5])
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
    from tuner.bridge.extract import extract_model

    with fresh_url("sqlite", tmp_path) as url, make_api(url) as api, EmbeddedServer(api.app) as server:
        done = run(server.url, api.tokens["submit"], "submit", "--model", "alexnet", "--target", TARGET,
                   "--trials", "4", "--json")
        assert done.exit_code == 0, done.output
        created = json.loads(done.stdout)
        layers = extract_model("alexnet").layers
        assert created["workload_keys"] == [layer.workload.key for layer in layers]
        tasks = api.client.get("/api/v1/tasks", params={"batch": created["batch"]}, headers=api.headers("read")).json()
        assert [t["label"] for t in tasks] == [layer.name for layer in layers]


def _one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_errors_are_one_line_with_exit_code_2(live: tuple[Api, str]) -> None:
    api, url = live
    read_token = api.tokens["read"]
    _one_line_error(run(url, None, "tasks", "list"), "401", "SWTUNE_TOKEN")
    _one_line_error(run(url, "not-a-token", "tasks", "list"), "401")
    _one_line_error(run(url, read_token, "tasks", "show", "424242"), "404", "424242")
    _one_line_error(run(url, read_token, "tasks", "cancel", "1"), "403")  # a read token may not cancel
    _one_line_error(run(url, read_token, "best", DENSE, "--target", TARGET), "404", "never been tuned")
    _one_line_error(run(url, read_token, "best", DENSE, "--target", "x86"), "422")
    _one_line_error(run(url, read_token, "best", '{"op": "dense", "m": 1}', "--target", TARGET), "missing fields")
    _one_line_error(run(url, api.tokens["submit"], "submit", "--target", TARGET, "-w", DENSE, "--label", "a",
                        "--label", "b"), "2 --label for 1 workloads")
    _one_line_error(run(url, api.tokens["submit"], "submit", "--target", TARGET), "exactly one of")
    _one_line_error(run("http://127.0.0.1:9", read_token, "tasks", "list"), "cannot reach")
