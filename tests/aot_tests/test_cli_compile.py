"""`swtune compile`: schedules from the local tuning log or from a server, the report table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from cli.app import build_app  # noqa: E402
from tuner.space.space import ScheduleSpace  # noqa: E402
from tuner.workloads import Dense  # noqa: E402

app = build_app()

MODEL = ["resnet18", "--width", "0.0625", "--image", "32"]
DENSE = Dense(1, 1000, 32)  # the classifier of that model


def _config() -> dict[str, Any]:
    """The fastest of a few sampled configs: a compile of the log keeps a record only when it is not
    slower than the kernel's baseline."""
    from tuner.measure.simulator import simulate

    space = ScheduleSpace(DENSE, "sw26010")
    rows = space.sample(32, rng=3)
    return space.decode(rows[int(np.argmin(simulate(space, rows)))])


def _kernels(out: Path) -> dict[str, str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return {k["workload_key"]: k["status"] for k in manifest["kernels"]}


@pytest.mark.slow
def test_compile_with_the_local_tuning_log(tmp_path: Path) -> None:
    from db import migrate, records
    from db.engine import Database

    url = f"sqlite:///{tmp_path / 'log.db'}"
    migrate.upgrade(url)
    database = Database(url)
    line = json.dumps({"workload": DENSE.to_json(), "target": "sw26010", "config": _config(), "status": "ok",
                       "times": [1e-3], "source": "simulator"})
    with database.session() as s:
        records.import_lines(s, [line])
    database.dispose()
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["compile", *MODEL, "--db", url, "-o", str(out)], terminal_width=200)
    assert res.exit_code == 0, res.output
    status = _kernels(out)
    assert status.pop(DENSE.key) == "tuned"
    assert status and all(s.startswith("fallback") for s in status.values())
    assert "tuned kernel" in res.output and "fallback kernel" in res.output and "MPE" in res.output
    assert "untuned workload conv2d-n1-c3-h32-w32" in res.output  # the warning names the workload
    assert (out / "weights.bin").stat().st_size > 0 and (out / "Makefile").exists()


@pytest.mark.slow
def test_compile_with_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.client import ServiceClient

    asked: list[tuple[str, str]] = []

    def best_batch(self: Any, keys: list[str], target: str) -> dict[str, Any]:
        asked.extend((key, target) for key in keys)
        return {"found": {k: {"config": _config()} for k in keys if k == DENSE.key}}

    monkeypatch.setattr(ServiceClient, "best_batch", best_batch)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["compile", *MODEL, "--server", "http://127.0.0.1:9", "-o", str(out),
                                   "--cache", str(tmp_path / "cache.json")], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert _kernels(out)[DENSE.key] == "tuned"
    assert {t for _, t in asked} == {"sw26010"} and DENSE.key in {k for k, _ in asked}


def test_no_tuning_log_means_untuned(capsys: Any) -> None:
    from cli.progress import ConsoleProgress
    from swtune import db_lookup

    lookup, close = db_lookup("sqlite:////nonexistent-dir/swtune.db", "sw26010", ConsoleProgress())
    assert lookup(DENSE) is None
    close()
    assert "no tuning log" in capsys.readouterr().out


def test_unknown_model_is_an_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["compile", "vgg99", "--db", f"sqlite:///{tmp_path / 'x.db'}", "-o",
                                   str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknown model" in res.output


@pytest.mark.slow
def test_compile_times_the_program_with_the_logs_active_profile_and_its_interval(tmp_path: Path) -> None:
    """A calibrated profile active in the log sets the simulated times; its draws give the whole model an
    interval; the built-in profile gives none and is not named."""
    import re

    from db import migrate
    from db.engine import Database
    from db.profiles import store_profile
    from tuner.profile import default_profile

    url = f"sqlite:///{tmp_path / 'log.db'}"
    migrate.upgrade(url)
    plain = CliRunner().invoke(app, ["compile", *MODEL, "--db", url, "-o", str(tmp_path / "plain")],
                               terminal_width=250)
    assert plain.exit_code == 0, plain.output
    assert "simulator profile" not in plain.output and "interval" not in plain.output
    base = default_profile("sw26010").with_values({"dma_wait_cycles": 1500.0, "spawn_join_s": 6e-5})
    draws = [{**base.values, "dma_wait_cycles": w} for w in np.linspace(500.0, 2500.0, 17)]
    database = Database(url)
    with database.session() as s:
        store_profile(s, base.with_values({}, fit={"draws": draws}))
    database.dispose()
    out = tmp_path / "calibrated"
    res = CliRunner().invoke(app, ["compile", *MODEL, "--db", url, "-o", str(out)], terminal_width=250)
    assert res.exit_code == 0, res.output
    found = re.search(r"simulator profile version 1; 95% interval ([\d.]+) - ([\d.]+) ms", res.output)
    assert found, res.output
    lo, hi = float(found[1]), float(found[2])
    tuned = json.loads((out / "manifest.json").read_text())["simulated_time"]["tuned_ms"]
    before = json.loads((tmp_path / "plain" / "manifest.json").read_text())["simulated_time"]["tuned_ms"]
    assert lo < hi and lo <= tuned <= hi
    assert tuned > before  # slower waits and launches than the built-in profile's


@pytest.mark.slow
def test_compile_with_a_server_uses_its_active_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    from service.client import ServiceClient
    from tuner.profile import default_profile

    base = default_profile("sw26010").with_values({"dma_wait_cycles": 1500.0}, version=4)
    fitted = base.with_values({}, fit={"draws": [{**base.values, "dma_wait_cycles": w}
                                                 for w in np.linspace(500.0, 2500.0, 9)]})
    monkeypatch.setattr(ServiceClient, "best_batch", lambda self, keys, target: {"found": {}})
    monkeypatch.setattr(ServiceClient, "get_profile", lambda self, target: {"active": fitted.to_json(),
                                                                            "active_version": 4})
    res = CliRunner().invoke(app, ["compile", *MODEL, "--server", "http://127.0.0.1:9", "-o", str(tmp_path / "o"),
                                   "--cache", str(tmp_path / "cache.json")], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "simulator profile version 4; 95% interval" in " ".join(res.output.split())
    # a service that cannot say (down, or an old one without the route): the built-in profile, with a warning
    monkeypatch.setattr(ServiceClient, "get_profile", lambda self, target: (_ for _ in ()).throw(
        httpx.ConnectError("refused")))
    res = CliRunner().invoke(app, ["compile", *MODEL, "--server", "http://127.0.0.1:9", "-o", str(tmp_path / "p"),
                                   "--cache", str(tmp_path / "cache.json")], terminal_width=250)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "cannot read the active simulator profile" in out and "simulator profile version" not in out
