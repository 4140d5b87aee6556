"""End to end over real HTTP: AlexNet's conv and dense layers submitted to a uvicorn server on a
free loopback port, 4 simulator worker processes, one of them killed with SIGKILL mid-run.

Checks: every task finishes within its budget, no job is lost (the killed worker's leases expire
and are measured by the others), no measurement is duplicated, and the compile-time lookup returns
for each workload exactly the best config of the measurements table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import stop
from sqlalchemy import func, select

from db import tokens as tokens_db
from db.engine import Database
from db.orm import JobRow, MeasurementRow, WorkloadRow
from service.client import ServiceClient
from service.embedded import spawn_server
from tuner.models.zoo import model_layers

REPO = Path(__file__).resolve().parents[2]
TRIALS = 12
LEASE_SECONDS = 2.0


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true", "SWTUNE_LEASE_SECONDS": str(LEASE_SECONDS),
            "SWTUNE_QUEUE_DEPTH": "8", "SWTUNE_DRIVER_INTERVAL_SECONDS": "0.1"}


def _start_server(url: str) -> tuple[subprocess.Popen[bytes], str]:
    return spawn_server(_env(url), REPO)


def _start_worker(base: str, url: str, token: str, name: str, latency: float) -> subprocess.Popen[bytes]:
    # --latency: extra seconds per config, as a slow kernel would take; the token travels in the
    # environment, never in argv (where `ps` shows it)
    return subprocess.Popen([sys.executable, "-m", "cli", "worker", "--server", base, "--target", "sw26010",
                             "--backend", "simulator", "--jobs-per-lease", "4", "--wait", "2",
                             "--name", name, "--latency", str(latency), "--log-level", "WARNING"],
                            cwd=REPO, env={**_env(url), "SWTUNE_TOKEN": token})


@pytest.mark.slow
def test_alexnet_over_http_with_a_worker_killed(backend_url: str) -> None:
    db = Database(backend_url)
    with db.session() as s:
        submit_token = tokens_db.create_token(s, "submit", "e2e")[1]
        worker_token = tokens_db.create_token(s, "worker", "e2e-workers")[1]
    server, base = _start_server(backend_url)
    workers: dict[str, subprocess.Popen[bytes]] = {}
    try:
        # the victim measures slowly (1 s a config), so whenever it is killed it is holding leases
        for i in range(4):
            workers[f"e2e-w{i}"] = _start_worker(base, backend_url, worker_token, f"e2e-w{i}",
                                                 latency=1.0 if i == 0 else 0.02)
        layers = model_layers("alexnet")
        client = ServiceClient(base, submit_token)
        submitted = client.submit([l.workload.to_json() for l in layers], "sw26010", TRIALS,
                                  labels=[l.name for l in layers])
        ids = submitted["task_ids"]
        assert len(ids) == 8

        # kill -9 a worker while it holds leased jobs, about a quarter of the way in
        victim = "e2e-w0"

        def held_by_victim() -> set[int]:
            with db.session() as s:
                return set(s.scalars(select(JobRow.id).where(JobRow.worker == victim,
                                                             JobRow.state == "leased")).all())

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            tasks = client.tasks(batch=submitted["batch"])
            if sum(t["trials_done"] for t in tasks) >= TRIALS * 8 // 4 and held_by_victim():
                break
            time.sleep(0.02)
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait(10)
        victim_jobs = held_by_victim()  # after its death: exactly the leases it took down with it
        assert victim_jobs, "the victim held no lease when killed: the kill proved nothing"

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            tasks = client.tasks(batch=submitted["batch"])
            if all(t["state"] == "done" for t in tasks):
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"tasks not done: {[(t['label'], t['state'], t['trials_done']) for t in tasks]}")

        for t in tasks:
            assert t["trials_done"] == TRIALS and t["failed"] == 0 and t["pending"] == t["leased"] == 0, t
        with db.session() as s:
            n_jobs = s.scalar(select(func.count()).select_from(JobRow))
            n_done = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.state == "done"))
            n_meas = s.scalar(select(func.count()).select_from(MeasurementRow))
            distinct = s.scalar(select(func.count()).select_from(
                select(MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash)
                .distinct().subquery()))
            retried = s.execute(select(JobRow.state, JobRow.attempts).where(JobRow.id.in_(victim_jobs))).all()
            best_in_table = {}
            for key in {l.workload.key for l in layers}:
                row = s.execute(select(MeasurementRow.mean_time, MeasurementRow.config_hash)
                                .join(WorkloadRow, WorkloadRow.id == MeasurementRow.workload_id)
                                .where(WorkloadRow.key == key, MeasurementRow.status == "ok")
                                .order_by(MeasurementRow.mean_time, MeasurementRow.id).limit(1)).first()
                best_in_table[key] = row
        assert n_jobs == n_done == n_meas == distinct == 8 * TRIALS  # nothing lost, nothing twice
        assert all(state == "done" and attempts >= 2 for state, attempts in retried)  # re-leased after the kill

        reader = ServiceClient(base, submit_token)
        for layer in layers:
            found = reader.best(layer.workload.key, "sw26010")
            assert found is not None
            assert (found["mean_time"], found["config_hash"]) == tuple(best_in_table[layer.workload.key])
        batch = reader.best_batch([l.workload.key for l in layers], "sw26010")
        assert not batch["missing"]

        for proc in workers.values():  # SIGTERM: the survivors stop cleanly
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in workers.items():
            if name != victim:
                assert proc.wait(20) == 0
        with db.session() as s:
            assert s.scalar(select(func.count()).select_from(JobRow).where(JobRow.state == "leased")) == 0
    finally:
        for proc in workers.values():
            if proc.poll() is None:
                proc.kill()
        stop(server)
        db.dispose()
