"""The worker agent: its imports, a full tuning loop in-process, the sunway backend's honesty, and how
the worker treats the backend protocol (chunk, preflight, a machine that cannot measure)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from api_helpers import make_api
from sqlalchemy import func, select
from storage_helpers import task_with_jobs

from db.orm import JobRow, MeasurementRow
from service.client import ServiceClient
from service.worker import Worker, run_worker
from tuner.backends.registry import backend_for
from tuner.backends.sunway import SunwayBackend
from tuner.measure.base import InfrastructureError, MeasureResult, Source
from tuner.measure.simulator import Simulator
from tuner.space import ScheduleSpace
from tuner.space.space import Config
from tuner.targets import Target
from tuner.workloads import Dense, Workload

REPO = Path(__file__).resolve().parents[2]
# ServiceClient passes per-request timeouts, which starlette's TestClient ignores (and warns about).
pytestmark = pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")


def test_the_worker_imports_no_server_side_stack() -> None:
    code = ("import sys, service.worker, service.client, tuner.backends.sunway, tuner.measure.simulator,"
            " tuner.backends.emulator_backend;"
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
        worker = Worker(client, "sw26010", backend_for("simulator", "sw26010"), name="w-test", batch=4,
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
    # no sw5cc on this machine: the generated kernel cannot be built, and no config is blamed for it
    with pytest.raises(InfrastructureError, match="sw5cc: No such file or directory") as err:
        backend.measure(space.workload, "sw26010", [space.decode(space.sample(1, 0)[0])])
    assert err.value.completed == ()
    with pytest.raises(InfrastructureError, match="not found on PATH"):
        backend.preflight()
    (bad,) = backend.measure(space.workload, "sw26010", [{"tile_m": 1}])
    assert bad.status == "compile_error" and bad.source is Source.HARDWARE and "codegen failed" in bad.error


@pytest.mark.slow
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


class _BreaksAfter:
    """A simulator on a machine that loses its toolchain after ``good`` configs (a test double)."""

    source = Source.SIMULATOR

    def __init__(self, good: int, chunk: int) -> None:
        self.sim, self.good, self.chunk = Simulator(), good, chunk
        self.calls: list[int] = []

    def preflight(self) -> None:
        pass

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        self.calls.append(len(configs))
        done = self.sim.measure(workload, target, configs[:self.good])
        self.good -= len(done)
        if len(done) < len(configs):
            raise InfrastructureError("swgcc: command not found", completed=done)
        return done


@pytest.mark.slow
def test_a_machine_that_cannot_measure_keeps_what_it_measured_and_hands_back_the_rest(api) -> None:
    task_with_jobs(api.db, 4)
    client = ServiceClient("http://testserver", api.tokens["worker"], http=api.client)
    backend = _BreaksAfter(good=1, chunk=4)
    worker = Worker(client, "sw26010", backend, name="w-breaks", wait_seconds=0)
    assert worker.run() == 2 and "cannot measure here: swgcc: command not found" in (worker.fatal or "")
    assert backend.calls == [4] and worker.counts == {"leased": 4, "posted": 1, "released": 3, "refused": 0}
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 1
        states = sorted(s.execute(select(JobRow.state, JobRow.attempts)).all())
    assert states == [("done", 1)] + [("pending", 0)] * 3  # retryable elsewhere, no attempt counted


class _Recorder(ServiceClient):
    """The HTTP client, recording how many jobs each lease asks for."""

    asked: list[int]

    def lease(self, worker: str, target: str, max_jobs: int = 8, wait_seconds: float = 0.0,
              backend: str = "") -> dict[str, Any]:
        self.asked.append(max_jobs)
        return super().lease(worker, target, max_jobs, wait_seconds, backend)


@pytest.mark.parametrize(("jobs_per_lease", "asked", "calls"), [(None, 2, [2, 2, 1]), (5, 5, [2, 2, 1])])
def test_the_worker_leases_one_chunk_by_default_and_measures_a_chunk_per_call(api, jobs_per_lease, asked,
                                                                              calls) -> None:
    task_with_jobs(api.db, 5)
    client = _Recorder("http://testserver", api.tokens["worker"], http=api.client)
    client.asked = []
    backend = _BreaksAfter(good=5, chunk=2)
    worker = Worker(client, "sw26010", backend, name="w-chunk", batch=jobs_per_lease, wait_seconds=0, max_jobs=5)
    assert worker.run() == 0 and worker.counts["posted"] == 5
    assert set(client.asked) == {asked} and backend.calls == calls


def test_a_worker_whose_backend_fails_preflight_says_why_and_leases_nothing(caplog) -> None:
    # no bsub here; the server address is never contacted (nothing listens on port 9)
    with caplog.at_level(logging.ERROR, logger="swtune.worker"):
        assert run_worker("http://127.0.0.1:9", "sw26010", "sunway") == 2
    assert "backend sunway cannot measure on this machine: 'bsub' not found on PATH" in caplog.text
