"""Schedule spaces: each knob's effect on the analysis, the LDM rule at its boundary, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.errors import InvalidConfigError
from tuner.space import REASONS, ScheduleSpace
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense

GEMM = Dense(512, 512, 512, "float64")
BASE = dict(tile_m=32, tile_n=32, tile_k=16, grid="8x8", share="none", dma="strided", put_lines=0, db_a=0,
            db_b=0, tile_order="row", inner="n", simd=4, unroll=8)


def analyse(space, **changes):
    return space.analyze(space.encode({**BASE, **changes})[None, :]).row(0)


@pytest.fixture(scope="module")
def gemm_space():
    return ScheduleSpace(GEMM, "sw26010")


def test_tile_sizes_set_ldm_per_buffer(gemm_space):
    r = analyse(gemm_space)
    assert r["ldm_a"] == 32 * 16 * 8 and r["ldm_b"] == 32 * 16 * 8 and r["ldm_c"] == 32 * 32 * 8
    bigger = analyse(gemm_space, tile_k=32)
    assert bigger["ldm_a"] == 2 * r["ldm_a"] and bigger["ldm_c"] == r["ldm_c"]


def test_double_buffering_doubles_only_its_buffer(gemm_space):
    r, db = analyse(gemm_space), analyse(gemm_space, db_a=1)
    assert db["ldm_a"] == 2 * r["ldm_a"] and db["ldm_b"] == r["ldm_b"]


def test_dma_mode_trades_requests_for_blocks(gemm_space):
    strided, rows = analyse(gemm_space, dma="strided"), analyse(gemm_space, dma="rows")
    assert strided["a_requests"] * 32 == rows["a_requests"]  # 32 rows of the a tile
    assert strided["a_blocks_per_request"] == 32 and rows["a_blocks_per_request"] == 1
    assert strided["a_bytes"] == rows["a_bytes"]


def test_full_rows_merge_into_one_contiguous_block(gemm_space):
    r = analyse(gemm_space, tile_k=512, tile_m=4, tile_n=4)
    assert r["a_block_bytes"] == 4 * 512 * 8 and r["a_blocks_per_request"] == 1


def test_grid_spreads_tiles_and_small_grids_leave_cpes_idle(gemm_space):
    full, row = analyse(gemm_space), analyse(gemm_space, grid="1x8")
    assert full["active_cpes"] == 64 and row["active_cpes"] == 8
    assert row["tiles_per_cpe"] == 8 * full["tiles_per_cpe"]


def test_ragged_tiles_make_imbalance(gemm_space):
    even = analyse(gemm_space)  # 16x16 tiles over 8x8 CPEs
    ragged = analyse(gemm_space, tile_m=64, tile_n=64)  # 8x8 tiles: one each
    assert even["imbalance"] == 1.0 and ragged["imbalance"] == 1.0
    lopsided = analyse(gemm_space, tile_m=128, tile_n=16)  # 4 row tiles over 8 rows of CPEs
    assert lopsided["active_cpes"] == 32


def test_sharing_cuts_main_memory_traffic(gemm_space):
    none, bcast, mesh = (analyse(gemm_space, share=s) for s in ("none", "bcast", "mesh"))
    assert bcast["a_bytes"] == pytest.approx(none["a_bytes"] / 8)
    assert bcast["ldm_a"] == none["ldm_a"]
    assert mesh["a_total_bytes"] == pytest.approx(none["a_total_bytes"] / 8)
    assert mesh["share_cycles_per_step"] > 0 and none["share_cycles_per_step"] == 0


def test_sharing_rules(gemm_space):
    for changes, reason in [(dict(share="mesh", grid="4x8"), "rlc_needs_square_grid"),
                            (dict(share="bcast", grid="64x1"), "sharing_needs_mesh_grid"),
                            (dict(share="bcast", grid="1x1"), "sharing_needs_mesh_grid")]:
        assert REASONS[int(analyse(gemm_space, **changes)["reason"])] == reason


def test_grouped_conv_cannot_share_data_along_rows():
    space = ScheduleSpace(Conv2d(1, 32, 14, 14, 32, 3, 3, pad_h=1, pad_w=1, groups=32), "sw26010")
    cfg = {k.name: k.choices[0] for k in space.knobs} | dict(grid="8x8", share="mesh")
    assert REASONS[int(space.analyze(space.encode(cfg)[None]).reason[0])] == "operand_not_shareable"


def test_simd_and_unroll_raise_kernel_efficiency(gemm_space):
    scalar, vec = analyse(gemm_space, simd=1, unroll=1), analyse(gemm_space, simd=4, unroll=16, acc="reg")
    assert vec["simd_fraction"] == 1.0 and scalar["simd_fraction"] == 0.0
    assert vec["kernel_efficiency"] > 0.6 > 0.2 > scalar["kernel_efficiency"]
    assert vec["compute_cycles_per_step"] * 8 < scalar["compute_cycles_per_step"]


def test_simd_remainder_runs_scalar(gemm_space):
    r = analyse(gemm_space, tile_n=2, inner="n")
    assert r["simd_fraction"] == 0.0


def test_inner_axis_decides_packing(gemm_space):
    assert analyse(gemm_space, inner="n")["ldm_pack"] == 32 * 16 * 8  # b[n,k] is strided along n
    assert analyse(gemm_space, inner="k")["ldm_pack"] == 0


def test_loop_order_reuses_the_stationary_operand(gemm_space):
    row = analyse(gemm_space, tile_k=512, tile_m=8, tile_n=8, grid="2x2", tile_order="row")
    col = analyse(gemm_space, tile_k=512, tile_m=8, tile_n=8, grid="2x2", tile_order="col")
    assert row["a_loads"] < col["a_loads"] and row["b_loads"] > col["b_loads"]


def test_put_lines_pads_rows_to_whole_lines():
    space = ScheduleSpace(Dense(64, 100, 64, "float32"), "sw26010")
    cfg = {**BASE, "tile_m": 2, "tile_n": 100, "tile_k": 8, "simd": 4}
    plain = space.analyze(space.encode(cfg)[None]).row(0)
    lines = space.analyze(space.encode({**cfg, "put_lines": 1})[None]).row(0)
    assert plain["c_block_bytes"] == 2 * 400 and not plain["c_aligned"]  # 2 full rows of 400 B merge
    assert lines["c_aligned"] and lines["c_block_bytes"] == 2 * 512 and lines["ldm_c"] == 2 * 512
    assert lines["c_bytes"] == plain["c_bytes"] * 512 / 400
    assert REASONS[int(space.analyze(space.encode({**cfg, "tile_n": 50, "put_lines": 1})[None]).reason[0])] == \
        "put_lines_unaligned"
    assert space.analyze(space.encode({**cfg, "tile_n": 32, "put_lines": 1})[None]).valid[0]  # 128 B rows


def test_ldm_rule_at_its_boundary():
    target = get_target("sw26010")
    space = ScheduleSpace(Dense(4096, 4096, 4096, "float64"), target)
    # c = tm*tn*8, a = tm*tk*8, b = tn*tk*8 (no packing with inner k): pick sizes straddling the budget
    budget = target.ldm_budget_bytes
    fits = {**BASE, "tile_m": 64, "tile_n": 32, "tile_k": 32, "inner": "k", "grid": "8x8", "db_a": 1}
    r = space.analyze(space.encode(fits)[None]).row(0)
    assert r["ldm_total"] == 64 * 32 * 8 + 2 * 64 * 32 * 8 + 32 * 32 * 8 == budget  # exactly full
    assert r["valid"] == 1.0
    over = space.analyze(space.encode({**fits, "db_b": 1})[None]).row(0)
    assert over["ldm_total"] == budget + 32 * 32 * 8 and REASONS[int(over["reason"])] == "ldm_overflow"
    with pytest.raises(InvalidConfigError, match="ldm_overflow"):
        space.check({**fits, "db_b": 1})
    space.check(fits)


def test_bigger_ldm_on_pro_accepts_what_sw26010_rejects():
    cfg = {**BASE, "tile_m": 128, "tile_n": 128, "tile_k": 32, "inner": "k", "grid": "4x4"}
    small = ScheduleSpace(GEMM, "sw26010")
    pro = ScheduleSpace(GEMM, "sw26010-pro")
    assert not small.analyze(small.encode(cfg)[None]).valid[0]
    assert pro.analyze(pro.encode(cfg)[None]).valid[0]


def test_encode_rejects_configs_outside_the_space(gemm_space):
    with pytest.raises(InvalidConfigError, match="not a choice"):
        gemm_space.encode({**BASE, "tile_m": 33})
    with pytest.raises(InvalidConfigError, match="missing knobs"):
        gemm_space.encode({"tile_m": 32})
    with pytest.raises(InvalidConfigError, match="outside the space"):
        gemm_space.decode(np.full(len(gemm_space.knobs), 99))


def test_decode_inverts_encode(small_workload):
    space = ScheduleSpace(small_workload, "sw26010")
    for row in space.sample(50, 0):
        assert (space.encode(space.decode(row)) == row).all()


def test_sampling_returns_only_valid_distinct_knob_vectors(small_workload):
    space = ScheduleSpace(small_workload, "sw26010")
    sample = space.sample(300, 1)
    assert len(sample) == 300 and space.is_valid(sample).all()
    assert len(np.unique(sample, axis=0)) > 250


def test_sampling_does_not_stall_on_tight_spaces():
    # A VGG-like layer: 512 channels of float64 leave few tile combinations inside 56 KB.
    space = ScheduleSpace(Conv2d(64, 512, 28, 28, 512, 3, 3, pad_h=1, pad_w=1, dtype="float64"), "sw26010")
    raw = np.random.default_rng(0).integers(0, space.sizes, size=(5000, len(space.sizes)))
    assert space.is_valid(raw).mean() < 0.1  # the space really is tight
    sample = space.sample(2000, 0)
    assert len(sample) == 2000 and space.is_valid(sample).all()


def test_neighbours_stay_valid_and_close(small_workload):
    space = ScheduleSpace(small_workload, "sw26010")
    start = space.sample(200, 2)
    moved = space.neighbours(start, np.random.default_rng(3))
    assert space.is_valid(moved).all()
    changed = (moved != start).sum(axis=1)
    assert changed.max() <= 1 and changed.mean() > 0.3


@pytest.mark.slow
def test_enumeration_of_a_small_space_is_complete_and_valid():
    space = ScheduleSpace(Dense(4, 4, 4, "float32"), "sw26010", restrict={"unroll": [1, 4], "dma": ["rows"],
                                                                          "db_c": [0]})
    every = space.enumerate()
    assert every is not None and space.is_valid(every).all()
    raw = np.stack(np.unravel_index(np.arange(space.size), tuple(space.sizes)), axis=1)
    assert len(every) == space.is_valid(raw).sum()
    assert ScheduleSpace(GEMM, "sw26010").enumerate(limit=1000) is None


def test_analysis_totals_are_exact_for_ragged_tiles():
    # 100 = 32+32+32+4 along m and n: 16 tiles, ragged ones smaller; totals must still be exact.
    space = ScheduleSpace(Dense(100, 100, 64, "float32"), "sw26010")
    r = space.analyze(space.encode({**BASE, "tile_m": 32, "tile_n": 32, "tile_k": 16, "simd": 4})[None]).row(0)
    assert r["c_total_bytes"] == pytest.approx(100 * 100 * 4)
    assert r["a_total_bytes"] == pytest.approx(100 * 64 * 4 * 4)  # a read once per n tile
    assert r["b_total_bytes"] == pytest.approx(100 * 64 * 4 * 4)
    assert r["imbalance"] == 1.0 and r["active_cpes"] == 16


def test_conv_halo_bytes_are_exact():
    from tuner.workloads import Conv2d
    w = Conv2d(1, 4, 9, 9, 8, 3, 3, pad_h=1, pad_w=1)  # padded 11x11, output 9x9
    space = ScheduleSpace(w, "sw26010")
    cfg = {k.name: k.choices[0] for k in space.knobs}
    cfg.update(tile_n=1, tile_oh=4, tile_ow=9, tile_k=8, tile_c=4, grid="1x1", simd=1)
    r = space.analyze(space.encode(cfg)[None]).row(0)
    # oh tiles 4,4,1 -> input rows 6,6,3 of width 11, 4 channels
    assert r["a_total_bytes"] == pytest.approx((6 + 6 + 3) * 11 * 4 * 4)
    assert r["b_total_bytes"] == pytest.approx(3 * 8 * 4 * 9 * 4)  # weights once per output tile


def test_restricted_space_keeps_the_meaning_of_each_choice():
    full = ScheduleSpace(GEMM, "sw26010")
    cut = ScheduleSpace(GEMM, "sw26010", restrict={"grid": ["4x4", "64x1"], "share": ["mesh", "none"]})
    cfg = {**BASE, "grid": "4x4", "share": "mesh"}
    assert cut.analyze(cut.encode(cfg)[None]).row(0) == full.analyze(full.encode(cfg)[None]).row(0)
    assert cut.size * 15 == full.size  # grid 20 -> 2 choices, share 3 -> 2
    with pytest.raises(InvalidConfigError):
        ScheduleSpace(GEMM, "sw26010", restrict={"grid": ["9x9"]})
    with pytest.raises(InvalidConfigError):
        ScheduleSpace(GEMM, "sw26010", restrict={"warp": [1]})


def test_built_in_ops_are_expressions_with_their_knobs_kept():
    """Every built-in op's geometry is its expression's (tuner/space/gemm.py, conv2d.py); the specs keep
    the knobs stored configs encode: the axes' order, the inner choices, conv's channels as the tiled
    reduction even when a 7x7 kernel is longer than 3 input channels."""
    from tuner.workloads import BatchMatmul

    cases = [(Dense(8, 16, 32), ["tile_m", "tile_n", "tile_k"], ("n", "k", "m"), "k"),
             (BatchMatmul(2, 8, 16, 32), ["tile_b", "tile_m", "tile_n", "tile_k"], ("n", "k", "m"), "k"),
             (Conv2d(1, 3, 32, 32, 16, 7, 7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
              ["tile_n", "tile_oh", "tile_ow", "tile_k", "tile_c"], ("ow", "k", "c"), "c")]
    for workload, tiles, inner, red in cases:
        space = ScheduleSpace(workload, "sw26010")
        geo = space.geometry
        assert geo.expr.reduce  # an expression, reduction axes and all
        assert list(space.names[:len(tiles)]) == tiles and geo.inner_axes == inner
        assert geo.red_axis.name == red and [op.group for op in geo.operands] == ["a", "b"]
    conv = ScheduleSpace(cases[2][0], "sw26010").geometry
    assert (conv.red_fixed, conv.red_innermost) == (49, 7) and conv.prepass_bytes > 0


def test_grouped_conv_data_box_holds_the_k_tiles_groups():
    """The group index k // (K/G) is not affine: the spec gives the data box the k tile's groups."""
    w = Conv2d(1, 16, 8, 8, 32, 3, 3, pad_h=1, pad_w=1, groups=4)  # 8 output, 4 input channels per group
    space = ScheduleSpace(w, "sw26010")
    cfg = dict(tile_n=1, tile_oh=8, tile_ow=8, tile_c=4, grid="1x1", share="none", dma="strided", put_lines=0,
               db_a=0, db_b=0, tile_order="row", inner="ow", simd=1, unroll=1)
    for tile_k, groups in ((4, 1), (8, 1), (16, 2), (32, 4)):
        row = space.analyze(space.encode({**cfg, "tile_k": tile_k})[None, :]).row(0)
        assert row["a_ldm_bytes"] == 4 * groups * 4 * 10 * 10  # groups x C/G x padded 10x10, float32
