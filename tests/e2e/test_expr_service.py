"""A custom operator through the service, end to end over real HTTP: its TVMScript submitted over REST,
two simulator worker processes rebuild and measure it, the lookup returns its best config (the best
of the measurements table), and that config compiles into a kernel that runs right on the emulator.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

pytest.importorskip("tvm")

from db import tokens as tokens_db
from db.engine import Database
from db.orm import MeasurementRow, WorkloadRow
from service.client import ServiceClient
from service.embedded import spawn_server
from tuner.backends.emulator_backend import EmulatorBackend
from tuner.expr.workload import ExprWorkload, workload_from_op
from tuner.space import space_for
from tuner.space.space import config_hash
from tuner.workloads import workload_from_json

REPO = Path(__file__).resolve().parents[2]
TRIALS = 16


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true", "SWTUNE_LEASE_SECONDS": "5",
            "SWTUNE_QUEUE_DEPTH": "8", "SWTUNE_DRIVER_INTERVAL_SECONDS": "0.1"}


def _start_worker(base: str, url: str, token: str, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cli", "worker", "--server", base, "--target", "sw26010",
                             "--backend", "simulator", "--jobs-per-lease", "4", "--wait", "2",
                             "--name", name, "--log-level", "WARNING"],
                            cwd=REPO, env={**_env(url), "SWTUNE_TOKEN": token})


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objcopy") is None,
                    reason="gcc and binutils build the emulated kernel")
def test_custom_operator_submitted_tuned_looked_up_and_compiled(backend_url: str, tmp_path: Path) -> None:
    wl = workload_from_op(f"{REPO}/examples/ops/linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36})
    db = Database(backend_url)
    with db.session() as s:
        submit_token = tokens_db.create_token(s, "submit", "e2e")[1]
        worker_token = tokens_db.create_token(s, "worker", "e2e-workers")[1]
    server, base = spawn_server(_env(backend_url), REPO)
    workers = [_start_worker(base, backend_url, worker_token, f"expr-w{i}") for i in range(2)]
    try:
        client = ServiceClient(base, submit_token)
        submitted = client.submit([wl.to_json()], "sw26010", TRIALS, labels=["weighted_gemm"])
        (task_id,) = submitted["task_ids"]
        assert submitted["workload_keys"] == [wl.key]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            task = client.task(task_id)
            if task["state"] == "done":
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"task not done: {task}")
        assert task["trials_done"] == TRIALS and task["failed"] == 0, task

        with db.session() as s:
            stored = s.scalar(select(WorkloadRow.canonical_json).where(WorkloadRow.key == wl.key))
            best_row = s.execute(select(MeasurementRow.mean_time, MeasurementRow.config_hash)
                                 .join(WorkloadRow, WorkloadRow.id == MeasurementRow.workload_id)
                                 .where(WorkloadRow.key == wl.key, MeasurementRow.status == "ok")
                                 .order_by(MeasurementRow.mean_time, MeasurementRow.id).limit(1)).first()
        assert stored == wl.canonical_json()  # the expression's TVMScript is what the service keeps
        found = ServiceClient(base, submit_token).best(wl.key, "sw26010")
        assert found is not None and (found["mean_time"], found["config_hash"]) == tuple(best_row)
        config = found["config"]
        assert config_hash(config) == found["config_hash"]

        # compile: the looked-up config, for the operator rebuilt from the JSON the service stored
        rebuilt = workload_from_json(stored)
        assert isinstance(rebuilt, ExprWorkload) and rebuilt.key == wl.key
        result = EmulatorBackend(workdir=tmp_path).measure_one(space_for(rebuilt, "sw26010"), config)
        assert result.status == "ok", result.error
        assert result.details["dma_match"], result.details
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        db.dispose()
