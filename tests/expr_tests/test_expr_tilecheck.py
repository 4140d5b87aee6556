"""The tile-level check: right results and matching DMA counts for valid geometry, failures for broken geometry."""

import dataclasses

import pytest

pytest.importorskip("tvm")

from tuner.codegen.tilecheck import TileChecker, check_space
from tuner.expr.workload import ExprWorkload, workload_from_op
from tuner.space.expr_space import ExprSpace


@pytest.mark.parametrize("ref,args", [
    ("conv.py:conv1d", {"n": 1, "c": 4, "w": 15, "k": 6, "s": 3, "stride": 2}),
    ("linalg.py:batch_matmul_at", {"b": 3, "m": 10, "n": 12, "k": 14}),
    ("stencil.py:stencil5", {"h": 10, "w": 13}),
    ("stencil.py:max_plus", {"m": 9, "n": 12, "k": 10}),
    ("mathfn.py:exp_gemm", {"m": 9, "n": 12, "k": 10}),  # a math call in the body, evaluated in numpy
])
def test_example_ops_pass(examples, ref, args):
    space = ExprSpace(workload_from_op(f"{examples}/{ref}", args), "sw26010")
    summary = check_space(space, 8, seed=3)
    assert summary.configs_checked == 8
    assert (summary.wrong_results, summary.dma_count_mismatches) == (0, 0), summary.problems


def test_a_halo_missing_from_the_geometry_is_a_wrong_result(examples):
    wl = workload_from_op(f"{examples}/stencil.py:stencil5", {"h": 6, "w": 7})
    acc = wl.expr.inputs[0]
    no_halo = dataclasses.replace(acc, dims=tuple(dataclasses.replace(d, span=1) for d in acc.dims))
    broken = ExprWorkload(name=wl.name, script=wl.script, dtype=wl.dtype,
                          expr=dataclasses.replace(wl.expr, inputs=(no_halo,)))
    space = ExprSpace(broken, "sw26010")
    checker = TileChecker(space)
    config = space.decode(space.sample(1, 0)[0])
    right, _, detail = checker.check(config)
    assert not right and "outside the tile's box" in detail


def test_a_wrong_request_count_in_the_analysis_is_a_mismatch(examples, monkeypatch):
    space = ExprSpace(workload_from_op(f"{examples}/linalg.py:weighted_gemm", {"m": 12, "n": 8, "k": 16}), "sw26010")
    checker = TileChecker(space)
    config = space.decode(space.sample(1, 1)[0])
    assert checker.check(config)[:2] == (True, True)
    real = space.analyze

    def off_by_one(index):
        a = real(index)
        a.b.total_requests = a.b.total_requests + 1
        return a

    monkeypatch.setattr(space, "analyze", off_by_one)
    right, dma_ok, detail = checker.check(config)
    assert right and not dma_ok and "analysis" in detail


def test_sharing_follows_the_schedule_rule_when_a_column_holds_fewer_row_tiles_than_cpes(examples):
    # 3 row tiles on an 8-row mesh, all of batch 0: the rule (i tiles % pr) does not share B, so
    # every CPE fetches it; the count must follow that decision, not a sharing the schedule never does
    space = ExprSpace(workload_from_op(f"{examples}/linalg.py:batch_matmul_at", {"b": 3, "m": 10, "n": 12, "k": 14}),
                      "sw26010")
    config = {"tile_z": 3, "tile_i": 4, "tile_j": 12, "tile_rk": 7, "grid": "8x2", "share": "bcast", "dma": "rows",
              "put_lines": 0, "db_a": 1, "db_b": 1, "tile_order": "col", "inner": "j", "simd": 4, "unroll": 8,
              "acc": "ldm"}
    assert space.analyze(space.encode(config)[None, :]).valid[0]
    assert TileChecker(space).check(config) == (True, True, "")
