"""A custom operator through the service, end to end over real HTTP: its TVMScript submitted over REST,
two simulator worker processes rebuild and measure it, the lookup returns its best config (the best
of the measurements table), and that config compiles into a kernel that runs right on the emulator.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

pytest.importorskip("tvm")

from live import REPO, live_service

from db.orm import MeasurementRow, WorkloadRow
from service.client import ServiceClient
from tuner.backends.emulator_backend import EmulatorBackend
from tuner.expr.workload import ExprWorkload, workload_from_op
from tuner.space import space_for
from tuner.space.space import config_hash
from tuner.workloads import workload_from_json

TRIALS = 16


@pytest.mark.slow
@pytest.mark.needs("gcc", "objcopy", "nm")
def test_custom_operator_submitted_tuned_looked_up_and_compiled(backend_url: str, tmp_path: Path) -> None:
    wl = workload_from_op(f"{REPO}/examples/ops/linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36})
    with live_service(backend_url) as live:
        db, base, submit_token = live.db, live.base, live.submit_token
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
