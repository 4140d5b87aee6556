"""The lowered-TIR cross-check counts copies over whole loops at once (numpy): its expression evaluator
gives every point its value, and its figures agree with the analysis on configs whose
loops run long (the slow case of the former per-iteration walk)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import tirx as tir  # noqa: E402  (0.27: tvm.tir is tvm.tirx)

from tuner.codegen.schedule import build_schedule  # noqa: E402
from tuner.codegen.tir_check import compare_with_analysis, tir_figures  # noqa: E402
from tuner.expr.workload import workload_from_op  # noqa: E402
from tuner.ir.tir import evaluate, evaluate_array  # noqa: E402
from tuner.space import space_for  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"


def test_the_array_evaluator_gives_every_point_its_value() -> None:
    i, j, k = (tir.Var(n, "int32") for n in "ijk")
    cases = [  # (TIR expression, the same in Python)
        (tir.floordiv(i * 7 + j, 3) - tir.floormod(k + 2, 5), lambda a, b, c: (a * 7 + b) // 3 - (c + 2) % 5),
        (tir.Min(i * 4 + 3, 10) + tir.Max(j - k, 0), lambda a, b, c: min(a * 4 + 3, 10) + max(b - c, 0)),
        (tir.Select(tir.And(i < 3, j >= 2), i * j, k + 1), lambda a, b, c: a * b if a < 3 and b >= 2 else c + 1),
        (tir.Select(tir.Or(tir.Not(i == j), k > 4), tir.floordiv(j * 16, 5), 7),
         lambda a, b, c: (b * 16) // 5 if a != b or c > 4 else 7),
    ]
    grid = {"i": np.arange(6).reshape(6, 1, 1), "j": np.arange(5).reshape(1, 5, 1), "k": np.arange(7).reshape(1, 1, 7)}
    for e, python in cases:
        values = np.broadcast_to(evaluate_array(e, grid), (6, 5, 7))
        for a, b, c in itertools.product(range(6), range(5), range(7)):
            assert values[a, b, c] == python(a, b, c) == evaluate(e, {"i": a, "j": b, "k": c}), (e, a, b, c)


def test_long_loops_are_counted_as_the_analysis_counts_them() -> None:
    wl = workload_from_op(f"{EXAMPLES}/linalg.py:row_scaled_gemm", {"m": 256, "n": 192, "k": 320})
    space = space_for(wl, "sw26010")
    # thin tiles: thousands of (tile, chunk) steps per CPE, each with its copies
    restrict = {"tile_j": [2, 3], "tile_rk": [1, 2]}
    rows = space.sample(200, np.random.default_rng(0))
    configs = [c for c in (space.decode(r) for r in rows) if c["tile_j"] in restrict["tile_j"]
               and c["tile_rk"] in restrict["tile_rk"]][:3]
    assert configs, "no thin-tile config sampled"
    for config in configs:
        s = build_schedule(wl, space.target, config)
        figures = tir_figures(s)
        assert sum(figures.requests.values()) > 10_000  # the long case
        assert compare_with_analysis(s, figures) == {}
