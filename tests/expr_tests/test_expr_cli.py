"""``swtune tune --op``: a user's operator file tuned end to end on the simulator."""

import json

import pytest

pytest.importorskip("tvm")
from typer.testing import CliRunner

from cli.app import build_app

app = build_app()


def test_tune_op_prints_a_json_line_faster_than_the_baselines(examples):
    res = CliRunner().invoke(app, ["tune", "--op", f"{examples}/linalg.py:weighted_gemm", "--args",
                                   '{"m": 128, "n": 96, "k": 64}', "--trials", "40", "--json"])
    assert res.exit_code == 0, res.output
    line = json.loads(res.stdout.strip().splitlines()[-1])
    assert line["workload"].startswith("expr-weighted_gemm-") and line["trials"] == 40
    assert line["best_time_s"] <= line["openacc_time_s"] < line["naive_time_s"]
    assert set(line["best_config"]) >= {"tile_i", "tile_j", "tile_rk", "grid", "share"}


def test_tune_op_errors_are_one_line(examples, tmp_path):
    bad = tmp_path / "ops.py"
    bad.write_text("from tvm import te\n\ndef f(n=4):\n    a = te.placeholder((n,), name='A')\n"
                   "    return [a, te.compute((n,), lambda i: a[i * i], name='sq')]\n")
    res = CliRunner().invoke(app, ["tune", "--op", f"{bad}:f", "--trials", "5"])
    assert res.exit_code == 2 and "not affine" in res.output
    res = CliRunner().invoke(app, ["tune", "--op", f"{examples}/linalg.py:gemv", "--args", '{"q": 1}'])
    assert res.exit_code == 2 and "unexpected keyword" in res.output


@pytest.mark.slow
def test_check_op_last_line_is_the_summary(examples):
    res = CliRunner().invoke(app, ["check-op", f"{examples}/conv.py:conv2d_transpose", "--args",
                                   '{"n": 1, "c": 3, "h": 4, "w": 5, "k": 4, "r": 3}', "--configs", "6"])
    assert res.exit_code == 0, res.output
    line = json.loads(res.stdout.strip().splitlines()[-1])
    # the generated kernels were built and run on the emulator: compile failures are counted, not null
    assert line["check"] == "emulator"
    assert {k: line[k] for k in ("configs_checked", "wrong_results", "dma_count_mismatches", "tir_mismatches",
                                 "compile_failures", "runtime_errors")} == {
        "configs_checked": 6, "wrong_results": 0, "dma_count_mismatches": 0, "tir_mismatches": 0,
        "compile_failures": 0, "runtime_errors": 0}
    tiles = line["tile_check"]
    assert (tiles["configs_checked"], tiles["wrong_results"], tiles["dma_count_mismatches"]) == (6, 0, 0)
