"""Workload identity of expression operators: structural key, TVMScript round trip, refusals."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("tvm")

from tuner.errors import InvalidWorkloadError
from tuner.expr.workload import ExprWorkload, workload_from_op


@pytest.mark.slow
def test_key_is_stable_in_a_fresh_process_and_follows_shapes(examples):
    wl = workload_from_op(f"{examples}/linalg.py:gemv", {"m": 64, "k": 32})
    code = ("import json, sys; from tuner.expr.workload import workload_from_op; "
            f"print(workload_from_op({str(examples / 'linalg.py:gemv')!r}, {{'m': 64, 'k': 32}}).key)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1]
    assert other == wl.key and wl.key.startswith("expr-gemv-")
    assert workload_from_op(f"{examples}/linalg.py:gemv", {"m": 64, "k": 33}).key != wl.key
    assert wl.flops == 2 * 64 * 32


def test_json_round_trip_rebuilds_the_same_operator(examples):
    wl = workload_from_op(f"{examples}/conv.py:depthwise_separable", {"c": 8, "h": 10, "w": 10, "k": 16})
    spec = json.loads(json.dumps(wl.to_json()))
    assert set(spec) == {"op", "name", "script", "dtype"} and spec["op"] == "expr"
    back = ExprWorkload.from_json(spec)
    assert back == wl and back.key == wl.key and back.expr == wl.expr
    assert back.canonical_json() == wl.canonical_json()


def test_bad_specs_are_refused(examples):
    wl = workload_from_op(f"{examples}/linalg.py:gemv", {"m": 8, "k": 8})
    with pytest.raises(InvalidWorkloadError, match="does not parse"):
        ExprWorkload.from_json({"op": "expr", "script": "def main(: pass"})
    with pytest.raises(InvalidWorkloadError, match="unknown fields"):
        ExprWorkload.from_json({**wl.to_json(), "extra": 1})
    with pytest.raises(InvalidWorkloadError, match="does not match"):
        ExprWorkload.from_json({**wl.to_json(), "dtype": "float64"})
    with pytest.raises(InvalidWorkloadError, match="FILE.py:FUNCTION"):
        workload_from_op("no_colon_here")
