"""A memory-bound CPE kernel task through the service, on both storage backends: its one-operator
script submitted over REST, the driver proposes configs of its space with its own strategy (the
baseline first), a worker measures them on the simulator from the job's workload JSON alone, and the
lookup returns the best. A script that does not parse, or is not one operator, is 422 and stores nothing."""

from __future__ import annotations

import numpy as np
import pytest
from api_helpers import tune_through_the_driver
from sqlalchemy import func, select
from wire import detail_text

from db.orm import TaskRow, WorkloadRow

pytest.importorskip("tvm")

from tvm import relax  # noqa: E402

from tuner.baseline import baseline_config  # noqa: E402
from tuner.ir.relax_reader import read_relax  # noqa: E402
from tuner.space.cpe.task import kernel_workload  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.workloads import workload_from_json  # noqa: E402

TRIALS = 8


def _softmax() -> dict:
    x = relax.Var("x", relax.TensorType((4, 16, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.softmax(x, axis=-1)))
        bb.emit_func_output(out)
    (node,) = [n for n in read_relax(bb.get(), "sw26010").nodes if n.op == "tir"]
    return kernel_workload(node, "float32").to_json()


def _count(api, table) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(table))


@pytest.mark.slow
def test_cpe_kernel_task_is_tuned_through_the_service(api) -> None:
    spec = _softmax()
    r = api.client.post("/api/v1/tasks", json={"workloads": [spec], "target": "sw26010", "trials": TRIALS},
                        headers=api.headers("submit"))
    assert r.status_code == 201, r.text
    (task_id,), (key,) = r.json()["task_ids"], r.json()["workload_keys"]
    assert key.startswith("cpe-nn_softmax-")
    tune_through_the_driver(api, seed=3, rounds=10)
    task = api.client.get(f"/api/v1/tasks/{task_id}", headers=api.headers("read")).json()
    assert task["trials_done"] == TRIALS and task["failed"] == 0, task
    best = api.client.get("/api/v1/schedules/best", params={"workload_key": key, "target": "sw26010"},
                          headers=api.headers("read"))
    assert best.status_code == 200, best.text
    config = best.json()["config"]
    space = space_for(workload_from_json(spec), "sw26010")
    space.check(config)
    assert space.exact_seconds(config)[0] <= space.exact_seconds(baseline_config(space))[0] * 1.05
    assert np.isfinite(best.json()["mean_time"])


@pytest.mark.parametrize("script, message", [
    ("def main(:", "does not parse"),
    ("@I.ir_module\nclass Module:\n    pass\n", "no main function"),
])
def test_a_bad_cpe_kernel_script_is_422_and_changes_nothing(api, script, message) -> None:
    spec = {"op": "cpe_kernel", "name": "bad", "script": script}
    r = api.client.post("/api/v1/tasks", json={"workloads": [spec], "target": "sw26010", "trials": 4},
                        headers=api.headers("submit"))
    assert r.status_code == 422 and message in detail_text(r), r.text
    assert _count(api, TaskRow) == 0 and _count(api, WorkloadRow) == 0
