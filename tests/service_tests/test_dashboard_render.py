"""The dashboard's pages as they render (service/ui/app.js run in node over a minimal DOM, fed the
API's real answers, on every storage backend): a CPE kernel task's workload shows as its short name
(operator, shapes, dtype) in the tasks and submission tables, its TVMScript one click away on its
page; a task that ended without a measurement carries an "untuned" badge with the reason. The
browser test (tests/e2e/test_dashboard.py) checks the same pages in chromium when it is installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Api, lease
from cpe_samples import POOL_SCRIPT  # noqa: E402

from service.driver import TuningDriver
from service.routes.dashboard import UI_DIR

pytestmark = pytest.mark.needs("node")
pytest.importorskip("tvm")  # a CPE kernel workload is checked by rebuilding it

HARNESS = Path(__file__).with_name("dashboard_harness.js")
TARGET = "sw26010"
FC1 = {"op": "dense", "m": 16, "n": 64, "k": 128}
POOL_LABEL = "nn.max_pool2d 1x8x16x16 -> 1x8x8x8 float32"


def render(api: Api, hash_: str, paths: list[str], tmp_path: Path) -> dict[str, Any]:
    """Page ``hash_`` rendered from the API's answers at ``paths``."""
    responses = {}
    for p in paths:
        r = api.client.get(p, headers=api.headers("read"), params={"limit": 1000} if p == "/api/v1/tasks" else None)
        assert r.status_code == 200, r.text
        responses[p] = r.json()
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"hash": hash_, "responses": responses}))
    done = subprocess.run(["node", str(HARNESS), str(UI_DIR), str(fixture)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert not page["status"].startswith("error"), page["status"]
    return page


@pytest.fixture
def ended(api: Api) -> dict[str, Any]:
    """A model of a dense layer and a max pool with a budget of 1: the dense gets its trial (ok), the
    pool none, and both end."""
    sub = api.client.post("/api/v1/submissions", headers=api.headers("submit"), json={
        "model": "net", "target": TARGET, "budget": 1, "per_round": 1, "strategy": "random",
        "layers": [{"name": "fc", "workload": FC1, "calls": 8},
                   {"name": "pool", "workload": {"op": "cpe_kernel", "name": "nn_max_pool2d", "script": POOL_SCRIPT}}]})
    assert sub.status_code == 201, sub.text
    driver = TuningDriver(api.db, api.app.state.settings)
    driver.run_once()
    got = lease(api, worker="w1", max_jobs=4)
    r = api.client.post("/api/v1/jobs/results", headers=api.headers("worker"), json={
        "lease_token": got["lease_token"], "worker": "w1",
        "results": [{"job_id": j["id"], "status": "ok", "times": [1e-5], "source": "simulator"} for j in got["jobs"]]})
    assert r.status_code == 200, r.text
    for _ in range(3):
        driver.run_once()
    return sub.json()


def _state(page: dict[str, Any], table: str) -> dict[str, tuple[str, str]]:
    return {row["cells"]["label"]: (row["cells"]["workload"], row["cells"]["state"])
            for row in page["rows"] if row["table"] == table}


def test_tasks_and_submission_tables_show_short_names_and_untuned(api: Api, ended: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    tasks = render(api, "#/", ["/api/v1/tasks"], tmp_path)
    assert _state(tasks, "tasks-table") == {"fc": ("dense m16 n64 k128 float32", "done"),
                                            "pool": (POOL_LABEL, "done untuned")}
    assert "@I.ir_module" not in tasks["text"] and "R.nn.max_pool2d" not in tasks["text"]
    assert {"text": "untuned", "title": "untuned: no trial was run (the budget gave it none)"} in tasks["badges"]
    batch = ended["id"]
    sub = render(api, f"#/submission/{batch}", [f"/api/v1/submissions/{batch}"], tmp_path)
    assert _state(sub, "layers-table") == {"fc": ("dense m16 n64 k128 float32", "done"),
                                           "pool": (POOL_LABEL, "done untuned")}
    assert "@I.ir_module" not in sub["text"]
    assert "budget (whole model)1 / 1" in sub["text"]  # the card names the model's one budget as `budget`


def test_a_cpe_kernel_task_page_keeps_its_script_one_click_away(api: Api, ended: dict[str, Any],
                                                                tmp_path: Path) -> None:
    pool = next(t["task_id"] for t in ended["tasks"] if t["layer_names"] == ["pool"])
    page = render(api, f"#/task/{pool}", [f"/api/v1/tasks/{pool}", f"/api/v1/tasks/{pool}/trials"], tmp_path)
    assert page["ids"]["task-workload"] == POOL_LABEL
    assert page["ids"]["untuned-reason"] == "untuned: no trial was run (the budget gave it none): its workload " \
                                            "runs untuned"
    [details] = [d for d in page["details"] if d["id"] == "workload-spec"]
    assert details["summary"] == "script (TVMScript)"
    assert details["body"].strip() == POOL_SCRIPT.strip()
