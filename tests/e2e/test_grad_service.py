"""A derived gradient through the service, end to end over real HTTP: ``swtune grad --out`` writes
the gradient operators of a strided conv from examples/ops/, they are submitted over REST as any
workload file is, two simulator workers tune them, the lookup returns each one's best config, and
that config compiles into a kernel that runs right on the emulator."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("tvm")

from live import REPO, live_service

from cli.app import build_app
from service.client import ServiceClient
from tuner.backends.emulator_backend import EmulatorBackend
from tuner.expr.workload import ExprWorkload
from tuner.space import space_for
from tuner.workloads import workload_from_json

TRIALS = 8


@pytest.mark.slow
@pytest.mark.needs("gcc", "objcopy", "nm")
def test_gradient_operators_submitted_tuned_looked_up_and_compiled(backend_url: str, tmp_path: Path) -> None:
    grads = tmp_path / "grads.json"
    res = CliRunner().invoke(build_app(), ["grad", f"{REPO}/examples/ops/nn.py:conv2d", "--args",
                                           '{"c": 8, "h": 10, "w": 10, "k": 8, "stride": 2}', "--out", str(grads)])
    assert res.exit_code == 0, res.output
    document = json.loads(grads.read_text())
    assert len(document["workloads"]) == 5  # four residue classes of the data gradient, the weight gradient
    with live_service(backend_url) as live:
        client = ServiceClient(live.base, live.submit_token)
        submitted = client.submit(document["workloads"], "sw26010", TRIALS, labels=document["labels"])
        deadline = time.monotonic() + 240
        pending = set(submitted["task_ids"])
        while pending and time.monotonic() < deadline:
            pending = {t for t in pending if client.task(t)["state"] != "done"}
            time.sleep(0.25)
        assert not pending, [client.task(t) for t in pending]
        for key, spec in zip(submitted["workload_keys"], document["workloads"]):
            found = client.best(key, "sw26010")
            assert found is not None, key
            rebuilt = workload_from_json(spec)
            assert isinstance(rebuilt, ExprWorkload) and rebuilt.key == key
            result = EmulatorBackend(workdir=tmp_path).measure_one(space_for(rebuilt, "sw26010"), found["config"])
            assert result.status == "ok", (key, result.error)
            assert result.details["dma_match"], result.details
