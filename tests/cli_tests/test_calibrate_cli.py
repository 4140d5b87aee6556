"""``swtune calibrate``: published data, a user's CSV, the tuning log's hardware results; a bad input
changes nothing. Storage on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import build_app
from db.engine import Database
from db.profiles import active_profile, list_profiles, store_profile
from tuner.calibrate.recovery import synthetic_records
from tuner.profile import default_profile
from tuner.targets import get_target
from tuner.workloads import Dense

app = build_app()
# float64 runs pin the FMA issue rate (float32 ones leave it to trade with the spawn cost)
WORKLOADS = (Dense(256, 256, 256, "float64"),)
# a core group a little slower than the built-in profile, within the FACTS DGEMM figure (0.83 of peak)
HIDDEN = {"block_overhead_cycles": 12.0, "dma_wait_cycles": 150.0, "tile_overhead_cycles": 400.0}


def _write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["workload", "config", "seconds"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _hardware_rows(n: int = 10, hidden_values: dict[str, float] = HIDDEN) -> list[dict[str, str]]:
    hidden = default_profile("sw26010").with_values(hidden_values)
    records = synthetic_records(hidden, WORKLOADS, n, noise=0.01, repeats=3, seed=3)
    return [{"workload": json.dumps(r.workload.to_json()), "config": json.dumps(r.config), "seconds": repr(r.seconds)}
            for r in records]


def _profiles(url: str) -> list[int]:
    db = Database(url)
    try:
        with db.session() as s:
            return [p.version for p in list_profiles(s, "sw26010")]
    finally:
        db.dispose()


def test_published_fit_prints_every_parameter_and_the_cross_validated_error(tmp_path: Path):
    out = tmp_path / "profile.json"
    result = CliRunner().invoke(app, ["calibrate", "--published", "--no-store", "--bootstrap", "4",
                                      "--out", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    for name in ("p0_cycles_per_fma", "block_overhead_cycles", "dma_overlap", "dma_wait_cycles", "spawn_join_s",
                 "tile_overhead_cycles"):
        assert name in result.output
    assert "not fitted" in result.output  # tile_overhead_cycles: swDNN's loop has no such cost
    # swDNN's own register-tile start-up and DMA overlap: fitted, shown, and not put into the profile
    for name in ("swdnn_tile_overhead_cycles", "swdnn_dma_overlap"):
        assert name in result.output
    assert "not applied to the simulator" in " ".join(result.output.split())
    assert "cross-validated median" in " ".join(result.output.split())
    doc = json.loads(out.read_text())
    assert doc["fit"]["records"] == 172 and doc["fit"]["cv_median_abs_log_err"] <= 0.06
    assert doc["fit"]["pins"]["dgemm_peak_fraction"]["holds"] and "breaks a FACTS figure" not in result.output
    assert set(doc["parameters"]) == {"p0_cycles_per_fma", "block_overhead_cycles", "dma_overlap",
                                      "dma_wait_cycles", "spawn_join_s", "tile_overhead_cycles",
                                      "cross_bw_fraction", "cross_request_cycles", "cg_launch_s", "cg_sync_s"}
    # one-CG records say nothing of what crossing core groups costs: the preset's assumptions stay
    for name in ("cross_bw_fraction", "cross_request_cycles", "cg_launch_s", "cg_sync_s"):
        assert doc["parameters"][name] == {"value": getattr(get_target("sw26010"), name), "interval": None}
    assert not (tmp_path / "swtune.db").exists()


@pytest.mark.slow
def test_csv_fit_is_stored_as_the_next_active_version(backend_url: str, tmp_path: Path):
    path = _write_csv(tmp_path / "runs.csv", _hardware_rows())
    args = ["calibrate", "--csv", str(path), "--db", backend_url, "--bootstrap", "2", "--folds", "2"]
    db = Database(backend_url)
    try:
        with db.session() as s:  # an earlier calibration: this one becomes version 2 and the active one
            store_profile(s, default_profile("sw26010").with_values({"dma_wait_cycles": 50.0}))
    finally:
        db.dispose()
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "version 2" in result.output and "stored as the active profile" in " ".join(result.output.split())
    assert _profiles(backend_url) == [1, 2]
    db = Database(backend_url)
    try:
        with db.session() as s:
            active = active_profile(s, "sw26010")
    finally:
        db.dispose()
    assert active.version == 2 and active.fit["pins"]["dgemm_peak_fraction"]["holds"]
    assert active.value("block_overhead_cycles") == pytest.approx(HIDDEN["block_overhead_cycles"], abs=4)


def test_a_bad_csv_row_is_named_and_nothing_is_stored(backend_url: str, tmp_path: Path):
    good = _hardware_rows(6)
    bad_rows = {
        "seconds is not a number": {**good[3], "seconds": "nan-ish"},
        "times must be finite": {**good[3], "seconds": "nan"},
        "above the ceiling": {**good[3], "seconds": "1e9"},
        "invalid workload": {**good[3], "workload": json.dumps({"op": "dense", "m": -4, "n": 8, "k": 8})},
        "not one of the knob's choices": {**good[3], "config": json.dumps({**json.loads(good[3]["config"]),
                                                                             "tile_m": 7777})},
    }
    for message, row in bad_rows.items():
        path = _write_csv(tmp_path / "bad.csv", [*good[:3], row, *good[4:]])
        result = CliRunner().invoke(app, ["calibrate", "--csv", str(path), "--db", backend_url, "--bootstrap", "2"],
                                    terminal_width=200)  # refused while reading: no fit runs
        assert result.exit_code == 2, (message, result.output)
        assert "line 5" in result.output and message in result.output, result.output
        assert "nothing was fitted or stored" in result.output
    assert _profiles(backend_url) == []


@pytest.mark.slow
def test_a_profile_that_breaks_a_facts_figure_is_stored_but_not_activated(backend_url: str, tmp_path: Path):
    # runs of a core group whose kernels pay swDNN's costs (a long register-block start-up, DMA added to
    # compute): the simulator's best DGEMM then falls far below FACTS' 0.80-0.95 of peak
    rows = _hardware_rows(12, {"block_overhead_cycles": 200.0, "dma_overlap": 0.1})
    path = _write_csv(tmp_path / "slow.csv", rows)
    result = CliRunner().invoke(app, ["calibrate", "--csv", str(path), "--db", backend_url, "--bootstrap", "2",
                                      "--folds", "2"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "breaks a FACTS figure: dgemm_peak_fraction" in result.output
    assert "not activated" in result.output
    assert _profiles(backend_url) == [1]
    db = Database(backend_url)
    try:
        with db.session() as s:
            assert active_profile(s, "sw26010").version == 0
    finally:
        db.dispose()


def test_one_source_at_a_time_and_published_data_only_for_its_target(tmp_path: Path):
    both = CliRunner().invoke(app, ["calibrate", "--published", "--from-log", "--no-store"], terminal_width=200)
    assert both.exit_code == 2 and "exactly one source" in both.output
    pro = CliRunner().invoke(app, ["calibrate", "--published", "--target", "sw26010-pro", "--no-store"],
                             terminal_width=200)
    assert pro.exit_code == 2 and "ran on SW26010" in pro.output


def test_from_log_needs_hardware_results(backend_url: str):
    result = CliRunner().invoke(app, ["calibrate", "--from-log", "--db", backend_url], terminal_width=200)
    assert result.exit_code == 2 and "no hardware results" in result.output
    assert _profiles(backend_url) == []
