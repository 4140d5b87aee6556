"""`swtune compile --server` against a real server (a uvicorn process on the tuning log, auth on): the
schedules come over HTTP, a layer the log holds compiles tuned, the lookups are cached, and a wrong
token is refused with a message rather than compiling an untuned model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from live import live_service

pytest.importorskip("tvm")
pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from cli.app import build_app  # noqa: E402
from db import records  # noqa: E402
from tuner.measure.simulator import simulate  # noqa: E402
from tuner.space.space import ScheduleSpace  # noqa: E402
from tuner.workloads import Dense  # noqa: E402

MODEL = ["resnet18", "--width", "0.0625", "--image", "32"]
DENSE = Dense(1, 1000, 32)  # the classifier of that model


@pytest.mark.slow
def test_compile_looks_schedules_up_on_a_live_server(backend_url: str, tmp_path: Path) -> None:
    space = ScheduleSpace(DENSE, "sw26010")
    rows = space.sample(32, rng=3)  # the fastest: a compile keeps a record only when it beats the baseline
    config = space.decode(rows[int(np.argmin(simulate(space, rows)))])
    with live_service(backend_url, workers=0) as live:
        with live.db.session() as s:
            records.import_lines(s, [json.dumps({"workload": DENSE.to_json(), "target": "sw26010", "config": config,
                                                 "status": "ok", "times": [1e-3], "source": "simulator"})])
        app, out, cache = build_app(), tmp_path / "out", tmp_path / "cache.json"
        wrong = CliRunner().invoke(app, ["compile", *MODEL, "--server", live.base, "--token", "swt_wrong",
                                         "-o", str(tmp_path / "refused"), "--cache", str(cache)], terminal_width=200)
        assert wrong.exit_code != 0 and "401" in wrong.output, wrong.output
        res = CliRunner().invoke(app, ["compile", *MODEL, "--server", live.base, "--token", live.submit_token,
                                       "-o", str(out), "--cache", str(cache)], terminal_width=200)
    assert res.exit_code == 0, res.output
    kernels = {k["workload_key"]: k for k in json.loads((out / "manifest.json").read_text())["kernels"]}
    assert kernels[DENSE.key]["status"] == "tuned" and kernels[DENSE.key]["config"] == config
    assert all(k["status"].startswith("fallback") for key, k in kernels.items() if key != DENSE.key)
    assert DENSE.key in cache.read_text()  # the lookup was kept for the next compile
