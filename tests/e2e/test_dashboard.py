"""The dashboard in a real browser (Playwright driving Debian's chromium, headless) on a live server
(uvicorn process, auth on) while simulator worker processes tune two AlexNet layers.

Checks: the page asks for a token and works with a read token; the tasks table's rows match the API;
the tuning curve gains points while the task runs, ends with one point per trial and marks the failed
trial; the submission and workers pages show the API's rows. Takes a screenshot of the task's page;
with SWTUNE_SAVE_SCREENSHOT=1 it is saved as the README's benchmarks/out/dashboard.png (a plain run leaves
the checkout clean).
Skipped, saying why, only when chromium (or the playwright package) is missing.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cpe_samples import POOL_SCRIPT  # noqa: E402
from processes import stop
from tools import chromium

from db import tokens as tokens_db
from db.engine import Database
from service.client import ServiceClient
from service.embedded import spawn_server, start_workers, stop_workers
from tuner.models.zoo import model_layers

REPO = Path(__file__).resolve().parents[2]
README_SCREENSHOT = REPO / "benchmarks" / "out" / "dashboard.png"
TRIALS = 48
TARGET = "sw26010"


CHROMIUM = chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs("chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing: "
                                                             "pip install -e '.[dev]'")


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true", "SWTUNE_LEASE_SECONDS": "10",
            "SWTUNE_QUEUE_DEPTH": "8", "SWTUNE_DRIVER_INTERVAL_SECONDS": "0.1", "SWTUNE_LOOKUP_CACHE_SECONDS": "0"}


def _wait(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out waiting for {what}")


def _ms(seconds: float | None) -> str:
    """The dashboard's millisecond format (fmt.ms in app.js)."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.1f}" if ms >= 100 else f"{ms:.3f}"


@contextmanager
def _page() -> Iterator[Any]:
    """A page of a headless Chromium (1280 x 1000); the test fails if the page raised an error by the end."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        assert not errors, errors
        browser.close()


def _enter_token(page: Any, token: str) -> None:
    """Answer the page's token dialog (auth is on) with ``token``."""
    page.wait_for_selector("#token-dialog[open]")
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")


def _cells(page: Any, table: str, key: str) -> dict[str, dict[str, str]]:
    """{row key: {column: text}} of a dashboard table (rows carry data-*, cells data-col)."""
    return page.evaluate(
        """([table, key]) => Object.fromEntries([...document.querySelectorAll(`#${table} tbody tr[data-${key}]`)]
             .map((tr) => [tr.getAttribute(`data-${key}`),
                           Object.fromEntries([...tr.cells].map((td) => [td.dataset.col, td.innerText.trim()]))]))""",
        [table, key])


def test_dashboard_follows_a_tuning_run(backend_url: str, backend_kind: str, tmp_path: Path) -> None:
    db = Database(backend_url)
    with db.session() as s:
        tokens = {role: tokens_db.create_token(s, role, f"ui-{role}")[1] for role in ("read", "submit", "worker")}
    db.dispose()
    server, base = spawn_server(_env(backend_url), REPO)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        # a slow kernel (0.25 s a config) keeps the run going long enough to watch it
        for i in range(2):
            workers += start_workers(base, 1, TARGET, batch=4, token=tokens["worker"],
                                     extra=["--name", f"ui-w{i}", "--latency", "0.25"])
        layers = [l for l in model_layers("alexnet") if l.name in ("conv2", "fc6")]
        submitter = ServiceClient(base, tokens["submit"])
        submitted = submitter.submit([l.workload.to_json() for l in layers], TARGET, TRIALS,
                                     labels=[l.name for l in layers])
        reader = ServiceClient(base, tokens["read"])

        # play a third worker that reports one failed measurement, so the curve has a failure to mark
        prober = ServiceClient(base, tokens["worker"])
        lease = _wait("a job to lease", lambda: (lambda g: g if g["jobs"] else None)(
            prober.lease("ui-prober", TARGET, max_jobs=1, wait_seconds=5)), timeout=30)
        job = lease["jobs"][0]
        prober.post_result(job["id"], lease["lease_token"], "ui-prober",
                           {"status": "ldm_overflow", "error": "injected by the browser test: LDM budget exceeded",
                            "source": "simulator"})
        watched = job["task_id"]

        with _page() as page:

            # auth is on: the page asks for a token, keeps it for the session, and a read token is enough
            page.goto(base + "/")
            assert page.url.startswith(base + "/ui/")
            _enter_token(page, "swt_not-a-token")
            page.wait_for_function("document.querySelector('#token-error').innerText.includes('refused')")
            _enter_token(page, tokens["read"])
            page.wait_for_selector("#tasks-table tbody tr[data-task-id]")
            assert page.evaluate("sessionStorage.getItem('swtune.token')") == tokens["read"]

            # the tuning curve gains points while the task runs
            page.goto(f"{base}/ui/#/task/{watched}")
            page.wait_for_selector("#curve svg.curve")
            seen = []
            while True:
                seen.append(int(page.get_attribute("#curve svg.curve", "data-points") or 0))
                if reader.task(watched)["state"] != "active":
                    break
                assert len(seen) < 400, f"task {watched} still active after {len(seen)} samples: {seen[-5:]}"
                time.sleep(0.25)
            rises = sum(1 for a, b in zip(seen, seen[1:]) if b > a)
            assert rises >= 2, f"the curve did not grow while the task ran: {seen}"
            assert seen == sorted(seen), f"the curve lost points: {seen}"
            api_trials = reader.request("GET", f"/api/v1/tasks/{watched}/trials").json()["trials"]
            _wait("the curve's last poll", lambda: int(page.get_attribute("#curve svg.curve", "data-points"))
                  == len(api_trials) == TRIALS, timeout=10)
            assert int(page.get_attribute("#curve svg.curve", "data-failures")) >= 1  # the reported failure
            assert page.locator("#curve svg.curve .failures g.fail").count() >= 1
            assert page.locator("#curve svg.curve .dots circle").count() == sum(t["status"] == "ok" for t in api_trials)
            best = reader.task(watched)
            page.wait_for_function("(ms) => document.querySelector('#view').innerText.includes(ms)",
                                   arg=_ms(best["best_time"]) + " ms")
            per_worker = _cells(page, "worker-table", "worker")
            assert "ui-prober" in per_worker and per_worker["ui-prober"]["failed"] == "1"
            assert sum(int(w["trials"]) for w in per_worker.values()) == TRIALS
            saving = backend_kind == "sqlite" and os.environ.get("SWTUNE_SAVE_SCREENSHOT") == "1"
            shot = README_SCREENSHOT if saving else tmp_path / "dashboard.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000  # a rendered page, not an empty canvas

            # every task finished: the tasks table's rows are the API's
            _wait("every task done", lambda: all(t["state"] == "done" for t in reader.tasks(batch=submitted["batch"])))
            page.goto(f"{base}/ui/#/")
            api_tasks = {str(t["id"]): t for t in reader.tasks()}

            def rows_match() -> bool:
                rows = _cells(page, "tasks-table", "task-id")
                return set(rows) == set(api_tasks) and all(
                    (r["label"], r["target"], r["state"], r["trials"], r["best_ms"], r["gflops"], r["failed"])
                    == (t["label"], t["target"], t["state"], f"{t['trials_done']} / {t['trial_budget']}",
                        _ms(t["best_time"]), f"{t['best_gflops']:.1f}", str(t["failed"]))
                    for r, t in ((rows[k], api_tasks[k]) for k in rows))

            _wait("the tasks table to match the API", rows_match, timeout=10)

            # the submission's per-layer table, and the workers with their heartbeats
            page.goto(f"{base}/ui/#/submission/{submitted['batch']}")
            page.wait_for_selector("#layers-table tbody tr[data-task-id]")
            report = reader.request("GET", f"/api/v1/submissions/{submitted['batch']}").json()
            layers_shown = _cells(page, "layers-table", "task-id")
            assert {k: (v["label"], v["tuned_ms"]) for k, v in layers_shown.items()} == {
                str(l["task_id"]): (l["label"], _ms(l["tuned_time"])) for l in report["layers"]}
            assert f"{report['speedup']:.2f}x" in page.inner_text("#view")
            page.goto(f"{base}/ui/#/workers")
            page.wait_for_selector("#workers-table tbody tr[data-worker]")
            assert set(_cells(page, "workers-table", "worker")) == {w["name"] for w in reader.request(
                "GET", "/api/v1/workers").json()} >= {"ui-w0", "ui-w1", "ui-prober"}
    finally:
        stop_workers(workers)
        stop(server)




def test_dashboard_names_cpe_kernel_tasks_shortly_and_marks_untuned_ones(backend_url: str) -> None:
    """A model of a dense layer and a max pool (a CPE kernel task) with a budget of 1: the dense gets
    its one trial (this test plays the worker), the pool none. The tables name the pool by operator,
    shapes and dtype, never by its script; its page keeps the script one click away; it ends untuned."""
    db = Database(backend_url)
    with db.session() as s:
        tokens = {role: tokens_db.create_token(s, role, f"ui-{role}")[1] for role in ("read", "submit", "worker")}
    db.dispose()
    server, base = spawn_server(_env(backend_url), REPO)
    label = "nn.max_pool2d 1x8x16x16 -> 1x8x8x8 float32"
    try:
        sub = ServiceClient(base, tokens["submit"]).submit_model(
            "net", [{"name": "fc", "workload": {"op": "dense", "m": 16, "n": 64, "k": 128}, "calls": 8},
                    {"name": "pool", "workload": {"op": "cpe_kernel", "name": "nn_max_pool2d", "script": POOL_SCRIPT}}],
            TARGET, 1, per_round=1, strategy="random")
        pool = next(t["task_id"] for t in sub["tasks"] if t["layer_names"] == ["pool"])
        worker = ServiceClient(base, tokens["worker"])
        lease = _wait("a job to lease", lambda: (lambda g: g if g["jobs"] else None)(
            worker.lease("ui-w", TARGET, max_jobs=4, wait_seconds=5)), timeout=30)
        worker.post_results(lease["lease_token"], "ui-w", [{"job_id": j["id"], "status": "ok", "times": [1e-5],
                                                           "source": "simulator"} for j in lease["jobs"]])
        reader = ServiceClient(base, tokens["read"])
        _wait("both tasks done", lambda: all(t["state"] == "done" for t in reader.tasks(batch=sub["id"])))
        with _page() as page:
            page.goto(base + "/ui/")
            _enter_token(page, tokens["read"])
            page.wait_for_selector(f"#tasks-table tbody tr[data-task-id='{pool}']")
            row = _cells(page, "tasks-table", "task-id")[str(pool)]
            assert (row["workload"], row["state"]) == (label, "done untuned")
            assert "ir_module" not in page.inner_text("#view")
            page.goto(f"{base}/ui/#/submission/{sub['id']}")
            page.wait_for_selector(f"#layers-table tbody tr[data-task-id='{pool}']")
            assert _cells(page, "layers-table", "task-id")[str(pool)]["workload"] == label
            page.goto(f"{base}/ui/#/task/{pool}")
            page.wait_for_selector("#workload-spec")
            assert page.inner_text("#task-workload") == label
            assert not page.locator("#workload-spec pre").is_visible()  # closed: one click away
            page.click("#workload-spec summary")
            assert "R.nn.max_pool2d" in page.inner_text("#workload-spec pre")
            assert "untuned" in page.inner_text("#untuned-reason")
    finally:
        stop(server)


def test_the_lookup_page_shows_a_calibrated_times_interval(backend_url: str) -> None:
    """A config timed by the simulator under a fitted profile: the lookup page shows its 95% interval and the
    profile version beside the time, as the API serves them."""
    from db.profiles import store_profile
    from tuner.profile import default_profile

    base_profile = default_profile(TARGET).with_values({"dma_wait_cycles": 1500.0})
    draws = [{**base_profile.values, "dma_wait_cycles": w} for w in (500.0, 1000.0, 1500.0, 2000.0, 2500.0)]
    db = Database(backend_url)
    with db.session() as s:
        tokens = {role: tokens_db.create_token(s, role, f"ui-{role}")[1] for role in ("read", "submit", "worker")}
        version = store_profile(s, base_profile.with_values({}, fit={"draws": draws})).version
    db.dispose()
    server, base = spawn_server(_env(backend_url), REPO)
    workload = {"op": "dense", "m": 16, "n": 64, "k": 128}
    try:
        ServiceClient(base, tokens["submit"]).submit([workload], TARGET, 1, strategy="random")
        worker = ServiceClient(base, tokens["worker"])
        lease = _wait("a job to lease", lambda: (lambda g: g if g["jobs"] else None)(
            worker.lease("ui-w", TARGET, max_jobs=1, wait_seconds=5)), timeout=30)
        job = lease["jobs"][0]
        worker.post_results(lease["lease_token"], "ui-w", [{"job_id": job["id"], "status": "ok", "times": [2e-5],
                                                           "source": "simulator",
                                                           "details": {"profile_version": version}}])
        best = ServiceClient(base, tokens["read"]).best(job["workload_key"], TARGET)
        assert best is not None and best["profile_version"] == version
        lo, hi = best["interval_s"]
        with _page() as page:
            page.goto(f"{base}/ui/#/lookup?w={job['workload_key']}&target={TARGET}")
            _enter_token(page, tokens["read"])
            page.wait_for_selector("#lookup-result .cards")
            shown = " ".join(page.inner_text("#lookup-result .cards").split()).lower()  # card titles are upper case
            assert f"95% interval {_ms(lo)} - {_ms(hi)} ms simulator profile version {version}" in shown, shown
    finally:
        stop(server)
