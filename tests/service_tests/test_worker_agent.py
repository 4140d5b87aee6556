"""The worker agent: its imports, a full tuning loop in-process, and the sunway backend's honesty."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from api_helpers import make_api
from sqlalchemy import func, select
from storage_helpers import task_with_jobs

from db.orm import JobRow, MeasurementRow
from service.client import ServiceClient
from service.sunway_backend import BackendUnavailable, SunwayBackend
from service.worker import Worker, make_backend
from tuner.space import ScheduleSpace
from tuner.workloads import Dense

REPO = Path(__file__).resolve().parents[2]
# ServiceClient passes per-request timeouts, which starlette's TestClient ignores (and warns about).
pytestmark = pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")


def test_the_worker_imports_no_server_side_stack() -> None:
    code = ("import sys, service.worker, service.client, service.sunway_backend, tuner.measure.simulator;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('db', 'fastapi', 'sqlalchemy', 'xgboost', 'starlette', 'uvicorn'));"
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_workers_tune_a_task_to_its_budget(backend_url) -> None:
    with make_api(backend_url, driver_enabled=True, queue_depth=6, driver_interval_seconds=0.05) as api:
        body = {"workloads": [{"op": "dense", "m": 1, "n": 256, "k": 512}], "target": "sw26010", "trials": 15,
                "strategy": "random"}
        tid = api.client.post("/api/v1/tasks", json=body, headers=api.headers("submit")).json()["task_ids"][0]
        client = ServiceClient("http://testserver", api.tokens["worker"], http=api.client)
        worker = Worker(client, "sw26010", make_backend("simulator", "sw26010"), name="w-test", batch=4,
                        wait_seconds=0.5, max_jobs=15)
        runner = threading.Thread(target=worker.run)
        runner.start()
        runner.join(60)
        assert not runner.is_alive()
        task = api.client.get(f"/api/v1/tasks/{tid}", headers=api.headers("read")).json()
        assert task["trials_done"] == 15 and task["best_time"] > 0
        assert len(task["curve"]) == 15 and all(a[1] >= b[1] for a, b in zip(task["curve"], task["curve"][1:]))
        with api.db.session() as s:
            assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 15
        assert worker.counts["posted"] == 15


def test_the_sunway_backend_never_pretends() -> None:
    backend = SunwayBackend(target="sw26010")
    space = ScheduleSpace(Dense(1, 64, 64), "sw26010")
    (r,) = backend.measure(space.workload, "sw26010", [space.decode(space.sample(1, 0)[0])])
    # no sw5cc on this machine: the generated kernel cannot be built, and the result says so
    assert r.status == "compile_error" and r.source == "hardware"
    assert r.details["stage"] == "compile" and r.details["infrastructure"] is True
    with pytest.raises(BackendUnavailable, match="not found on PATH"):
        backend.preflight()
    (bad,) = backend.measure(space.workload, "sw26010", [{"tile_m": 1}])
    assert bad.status == "compile_error" and "codegen failed" in bad.error


def test_the_sunway_backend_builds_runs_and_parses_with_its_command_templates(tmp_path) -> None:
    # the athread emulator stands in for sw5cc + bsub: same templates, same timing line
    emulator = REPO / "tuner" / "codegen" / "emulator"
    backend = SunwayBackend(target="sw26010", compile_cmd=f"make -s -C {{dir}} emu SWEMU={emulator}",
                            run_cmd="{dir}/kernel_emu", source="emulator")
    backend.preflight()
    space = ScheduleSpace(Dense(8, 32, 16), "sw26010")
    configs = [space.decode(row) for row in space.sample(2, 1)]
    results = backend.measure(space.workload, "sw26010", configs)
    assert [r.status for r in results] == ["ok", "ok"], [r.error for r in results]
    assert all(r.source == "emulator" and r.mean_time > 0 for r in results)


def test_the_emulator_backend_is_offered_to_workers() -> None:
    backend = make_backend("emulator", "sw26010")
    assert backend.source == "emulator"
    with pytest.raises(ValueError, match="simulator, emulator or sunway"):
        make_backend("gpu", "sw26010")


def test_a_worker_hands_back_jobs_its_backend_cannot_measure(api) -> None:
    task_with_jobs(api.db, 3)
    client = ServiceClient("http://testserver", api.tokens["worker"], http=api.client)
    worker = Worker(client, "sw26010", SunwayBackend(target="sw26010"), name="w-sunway", backend_name="sunway",
                    batch=3, wait_seconds=0)
    assert worker.run() == 2 and "sw5cc: No such file or directory" in (worker.fatal or "")
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 0
        states = s.execute(select(JobRow.state, JobRow.attempts)).all()
    assert states == [("pending", 0)] * 3  # handed back, the attempt not counted
