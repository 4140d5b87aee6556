"""`swtune tasks list|show` against a live server, on every storage backend: a task that ended without
any successful measurement reads `done, untuned` (with its reason in `show`), a tuned one `done`; a
CPE kernel task's workload is its short name, and its script is only under `--json`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from cpe_samples import POOL_SCRIPT  # noqa: E402
from typer.testing import CliRunner

from cli.app import build_app
from service.driver import TuningDriver
from service.embedded import EmbeddedService, embedded_service
from service.settings import Settings

pytest.importorskip("tvm")  # a CPE kernel workload is checked by rebuilding it

TARGET = "sw26010"
FC1 = {"op": "dense", "m": 16, "n": 64, "k": 128}
FC2 = {"op": "dense", "m": 32, "n": 64, "k": 64}
POOL = {"op": "cpe_kernel", "name": "nn_max_pool2d", "script": POOL_SCRIPT}
POOL_LABEL = "nn.max_pool2d 1x8x16x16 -> 1x8x8x8 float32"


@pytest.fixture
def live(backend_url: str) -> Iterator[EmbeddedService]:
    with embedded_service(backend_url, migrate=False, driver_enabled=False) as service:
        yield service


def run(service: EmbeddedService, *args: str) -> Any:
    result = CliRunner().invoke(build_app(), [*args, "--server", service.url], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result


def _ended_submission(service: EmbeddedService) -> dict[int, str]:
    """A budget of 1 for three tasks: the heaviest gets its one trial (measured ok), the others none.
    Returns {task id: layer name}."""
    with service.client() as client:
        sub = client.submit_model("net", [{"name": "fc1", "workload": FC1, "calls": 8},
                                          {"name": "fc2", "workload": FC2, "calls": 1},
                                          {"name": "pool", "workload": POOL, "calls": 1}], TARGET, 1, per_round=1,
                                  strategy="random")
        driver = TuningDriver(service.database, Settings(database_url=service.database.url, driver_enabled=False))
        driver.run_once()
        got = client.lease("w1", TARGET, max_jobs=4)
        assert len(got["jobs"]) == 1
        client.post_results(got["lease_token"], "w1", [{"job_id": got["jobs"][0]["id"], "status": "ok",
                                                        "times": [1e-5], "source": "simulator"}])
        for _ in range(3):
            driver.run_once()
    return {t["task_id"]: t["layer_names"][0] for t in sub["tasks"]}


def _rows(output: str) -> dict[str, list[str]]:
    """{layer label: cells} of the `tasks list` table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 9 and cells[0].isdigit():
            rows[cells[1]] = cells
    return rows


@pytest.mark.slow
def test_tasks_list_and_show_say_untuned_and_name_workloads_shortly(live: EmbeddedService) -> None:
    names = _ended_submission(live)
    rows = _rows(run(live, "tasks", "list").stdout)
    # columns: id, label, workload, target, state, trials, failed, best ms, GFLOPS | GB/s
    assert {name: (r[2], r[4], r[5]) for name, r in rows.items()} == {
        "fc1": ("dense-m16-n64-k128-float32", "done", "1/1"),
        "fc2": ("dense-m32-n64-k64-float32", "done, untuned", "0/0"),
        "pool": (POOL_LABEL, "done, untuned", "0/0")}
    by_name = {name: task_id for task_id, name in names.items()}
    shown = run(live, "tasks", "show", str(by_name["pool"])).stdout
    assert f"[done, untuned]  {POOL_LABEL}" in shown
    assert "untuned: no trial was run (the budget gave it none): its workload runs untuned" in shown
    assert "R.nn.max_pool2d" not in shown  # the script is not printed ...
    as_json = json.loads(run(live, "tasks", "show", str(by_name["pool"]), "--json").stdout)
    assert as_json["workload"]["script"] == POOL["script"]  # ... but it is under --json
    assert as_json["workload_label"] == POOL_LABEL and as_json["untuned_reason"].startswith("untuned: no trial")
    tuned = run(live, "tasks", "show", str(by_name["fc1"])).stdout
    assert "[done]" in tuned and "untuned" not in tuned
