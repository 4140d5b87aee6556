"""``swtune tune --op``: a user's operator file tuned end to end on the simulator."""

import json

import pytest

pytest.importorskip("tvm")
from typer.testing import CliRunner  # noqa: E402

from service.cli import app  # noqa: E402


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
