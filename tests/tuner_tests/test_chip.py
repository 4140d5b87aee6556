"""A kernel split over several core groups (issue #43): the target's chip, the split's knobs and
validity, the busiest CG's share, the cross-CG plan and its costs, and what refuses a split kernel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.errors import UnknownTargetError
from tuner.measure.simulator import breakdown, simulate
from tuner.profile import CHIP_PARAMETERS, Profile, default_profile
from tuner.space.choices import Reason
from tuner.space.factory import space_for
from tuner.targets import get_target, with_cgs
from tuner.workloads import BatchMatmul, Conv2d, Dense

BIG = Dense(1024, 1024, 1024)
SPLIT = {"tile_m": 32, "tile_n": 32, "tile_k": 64, "grid": "8x8", "share": "none", "dma": "strided",
         "put_lines": 0, "db_a": 1, "db_b": 1, "db_c": 0, "tile_order": "row", "inner": "n", "simd": 4,
         "unroll": 4, "acc": "reg", "pack": "none"}


def config(**chip: object) -> dict:
    return {**SPLIT, **chip}


@pytest.mark.parametrize(("name", "cgs"), [("sw26010", 1), ("sw26010-4cg", 4), ("sw26010-pro-6cg", 6),
                                           ("SW26010_PRO-3cg", 3)])
def test_a_core_group_count_is_a_target_named_after_its_preset(name: str, cgs: int) -> None:
    t = get_target(name)
    assert t.cgs == cgs and t.base_name in ("sw26010", "sw26010-pro")
    assert get_target(t.name) == t and with_cgs(t.base_name, cgs) == t
    assert t.dma == get_target(t.base_name).dma  # each CG's own memory: one CG's DMA figures


@pytest.mark.parametrize(("name", "chip"), [("sw26010-0cg", 4), ("sw26010-5cg", 4), ("sw26010-pro-7cg", 6)])
def test_more_core_groups_than_the_chip_has_is_a_clear_error(name: str, chip: int) -> None:
    with pytest.raises(UnknownTargetError, match=f"{chip} core groups per chip: --cgs must be 1 to {chip}"):
        get_target(name)


def test_a_profile_applies_to_every_core_group_count_and_old_documents_load() -> None:
    profile = default_profile("sw26010").with_values({"cross_bw_fraction": 0.3, "cg_launch_s": 40e-6})
    chip = profile.apply("sw26010-4cg")
    assert chip.name == "sw26010-4cg" and chip.cgs == 4 and chip.cross_bw_fraction == 0.3
    doc = profile.to_json()
    for name in CHIP_PARAMETERS:  # a profile stored before the chip's parameters existed
        del doc["parameters"][name]
    old = Profile.from_json(doc)
    assert old.value("cross_bw_fraction") == get_target("sw26010").cross_bw_fraction
    assert old.value("p0_cycles_per_fma") == profile.value("p0_cycles_per_fma")


def test_a_one_cg_space_is_unchanged_and_its_configs_seed_the_chip_space() -> None:
    one, chip = space_for(BIG, "sw26010"), space_for(BIG, "sw26010-4cg")
    assert "cgs" not in one.knob_index
    assert chip.names == one.names + ("cgs", "cg_split", "cg_operands")
    # a config stored for one CG means one CG in the chip space, and times the same
    seeded = chip.encode(SPLIT)
    assert chip.decode(seeded)["cgs"] == 1
    assert simulate(chip, seeded[None, :])[0] == pytest.approx(simulate(one, one.encode(SPLIT)[None, :])[0], rel=1e-12)


def test_the_split_knobs_validity() -> None:
    chip = space_for(BIG, "sw26010-4cg")
    reasons = {label: Reason(int(chip.analyze(chip.encode(c)[None, :]).reason[0])) for label, c in {
        "one cg, cols": config(cgs=1, cg_split="cols"),
        "one cg, cross": config(cgs=1, cg_operands="cross"),
        "a split reduction, cross": config(cgs=4, cg_split="reduction", cg_operands="cross"),
        "four cgs, rows": config(cgs=4, cg_split="rows"),
    }.items()}
    same = Reason.CG_KNOB_WITHOUT_EFFECT  # the same kernel as the default's: one config stands for it
    assert reasons == {"one cg, cols": same, "one cg, cross": same, "a split reduction, cross": same,
                       "four cgs, rows": Reason.OK}
    # a GEMV's single row tile cannot feed four CGs; its columns can
    gemv = space_for(Dense(1, 1024, 1024), "sw26010-4cg")
    rows = gemv.analyze(gemv.encode({**SPLIT, "tile_m": 1, "inner": "n", "cgs": 4, "cg_split": "rows"})[None, :])
    cols = gemv.analyze(gemv.encode({**SPLIT, "tile_m": 1, "inner": "n", "cgs": 4, "cg_split": "cols"})[None, :])
    assert Reason(int(rows.reason[0])) is Reason.CG_SPLIT_FEWER_TILES_THAN_CGS and cols.valid[0]
    # the fused residual is added after the partial sums, which a split reduction's kernel does not hold
    res = space_for(Dense(256, 256, 256, epilogue="residual_add"), "sw26010-4cg")
    a = res.analyze(res.encode(config(cgs=2, cg_split="reduction"))[None, :])
    assert Reason(int(a.reason[0])) is Reason.CG_REDUCTION_WITH_EPILOGUE
    # k tiles handed round the mesh are not cut into CGs' shares: the space leaves that kernel out
    mesh = space_for(BIG, "sw26010-4cg")
    m = mesh.analyze(mesh.encode(config(cgs=2, cg_split="reduction", share="mesh"))[None, :])
    assert Reason(int(m.reason[0])) is Reason.CG_REDUCTION_WITH_MESH


@pytest.mark.parametrize("split", ["rows", "cols", "reduction"])
def test_each_cg_holds_the_same_tiles_and_gets_its_share_of_them(split: str) -> None:
    chip = space_for(BIG, "sw26010-4cg")
    one = chip.analyze(chip.encode(config(cgs=1))[None, :])
    four = chip.analyze(chip.encode(config(cgs=4, cg_split=split))[None, :])
    assert four.ldm_total[0] == one.ldm_total[0]  # a CPE's LDM holds the same tiles
    assert four.macs_per_cpe[0] == pytest.approx(one.macs_per_cpe[0] / 4)
    assert four.steps_per_cpe[0] == pytest.approx(one.steps_per_cpe[0] / 4)


def test_a_compute_bound_gemm_on_four_cgs_takes_a_quarter_plus_the_launch() -> None:
    chip = space_for(BIG, "sw26010-4cg")
    t = chip.target
    one = simulate(chip, chip.encode(config(cgs=1))[None, :])[0]
    four = simulate(chip, chip.encode(config(cgs=4, cg_split="rows"))[None, :])[0]
    # constant weights are replicated when the model loads: nothing crosses during the call; each CG
    # still waits for its first fetch and its last put, which do not divide (under 2% here)
    quarter = (one - t.spawn_join_s) / 4 + t.spawn_join_s + t.cg_launch_s
    assert quarter < four < 1.02 * quarter
    assert breakdown(chip, config(cgs=4, cg_split="rows"))["seconds"]["cross_cg"] == pytest.approx(t.cg_launch_s)


def test_the_cross_plan_says_which_operand_crosses_and_what_is_copied() -> None:
    chip = space_for(BIG, "sw26010-4cg")
    a_bytes = out_bytes = 1024 * 1024 * 4

    def plan(**knobs: object):
        return chip.analyze(chip.encode(config(**knobs))[None, :]).chip

    cols_copy, cols_cross = plan(cgs=4, cg_split="cols"), plan(cgs=4, cg_split="cols", cg_operands="cross")
    assert cols_copy.replicate_bytes[0] == a_bytes and not cols_copy.cross_a[0]  # data copied into each CG
    assert cols_cross.replicate_bytes[0] == 0 and cols_cross.cross_a[0] and not cols_cross.cross_b[0]
    rows_cross = plan(cgs=4, cg_split="rows", cg_operands="cross")
    assert rows_cross.cross_b[0] and not rows_cross.cross_a[0]
    red = plan(cgs=4, cg_split="reduction")
    assert red.reduce_bytes[0] == out_bytes and red.replicate_bytes[0] == 0
    assert red.cross_bytes[0] == pytest.approx(3 / 4 * out_bytes)
    # B of a batch_matmul is an activation: replicating it is a copy before every call
    bmm = space_for(BatchMatmul(4, 256, 256, 256), "sw26010-4cg")
    rows = bmm.analyze(bmm.encode({**SPLIT, "tile_b": 1, "cgs": 4, "cg_split": "rows"})[None, :]).chip
    assert rows.replicate_bytes[0] == 4 * 256 * 256 * 4 and math.isclose(rows.cross_bytes[0], 3 * 4 * 256 * 256 * 4)


# each chip parameter moved the costly way: every split config slows, every one-CG config keeps its time
MOVES = {"cross_bw_fraction": 0.25, "cross_request_cycles": 2000.0, "cg_launch_s": 100e-6}


@pytest.mark.parametrize("name", sorted(MOVES))
@pytest.mark.parametrize("workload", [BIG, Conv2d(1, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1),
                                      BatchMatmul(4, 128, 128, 128)], ids=lambda w: w.op)
def test_each_cross_cg_cost_moves_the_time_as_its_meaning_says(name: str, workload: object) -> None:
    # cg_sync_s acts between the phases of a shared spawn: tests/tuner_tests/test_chip_program.py
    assert set(MOVES) | {"cg_sync_s"} == set(CHIP_PARAMETERS)
    base = space_for(workload, "sw26010-4cg")
    moved = space_for(workload, default_profile("sw26010").with_values({name: MOVES[name]}).apply("sw26010-4cg"))
    index = base.sample(600, np.random.default_rng(3))
    before, after = simulate(base, index), simulate(moved, index)
    plan = base.analyze(index).chip
    cgs = plan.cgs
    assert (cgs > 1).sum() > 100
    np.testing.assert_array_equal(after[cgs == 1], before[cgs == 1])
    assert np.all(after >= before)
    crosses = plan.cross_a | plan.cross_b
    if name == "cg_launch_s":
        assert np.all(after[cgs > 1] > before[cgs > 1])
        return
    # what crosses the chip: cross reads (which may hide under compute when double-buffered), and for
    # the rate also the replicas copied in and a split reduction's partial sums
    moves = crosses if name == "cross_request_cycles" else crosses | (plan.cross_bytes > 0)
    assert np.any(after[moves] > before[moves] * 1.01)
    np.testing.assert_array_equal(after[~moves], before[~moves])


def test_the_openacc_baseline_splits_its_outer_loop_over_every_cg() -> None:
    chip = space_for(Conv2d(1, 16, 32, 32, 16, 3, 3, pad_h=1, pad_w=1), "sw26010-pro-6cg")
    naive = chip.naive_config()
    assert naive["cgs"] == 6 and naive["cg_split"] == "rows"
    gemv = space_for(Dense(1, 64, 64), "sw26010-4cg")  # one row: the outer loop cannot split
    assert gemv.naive_config().get("cgs", 1) == 1


@pytest.mark.parametrize(("split", "rows", "cols"), [("rows", 8, 32), ("cols", 32, 8)])
def test_a_split_kernels_schedule_gives_each_cg_the_share_the_analysis_charges(split: str, rows: int,
                                                                               cols: int) -> None:
    """Each CG's part of the generated schedule holds ceil(tiles / cgs) tiles of the split axis (32 here,
    over 4 CGs), the busiest CG's share of the analysis; a one-CG config of the chip space is the one-CG
    kernel."""
    pytest.importorskip("tvm")
    from tuner.codegen.schedule import build_schedule

    cfg = config(cgs=4, cg_split=split, cg_operands="replicate")
    s = build_schedule(BIG, "sw26010-4cg", cfg)
    space = space_for(BIG, "sw26010-4cg")
    chip = space.analyze(space.encode(cfg)[None, :]).chip
    assert chip is not None
    assert (s.cgs, s.rows_total, s.cols_total) == (4, rows, cols)
    assert (chip.rows_total[0], chip.cols_total[0]) == (rows, cols)
    one = build_schedule(BIG, "sw26010-4cg", config(cgs=1))
    assert (one.cgs, one.rows_total, one.cols_total) == (1, 32, 32)


def test_a_split_reduction_gives_each_cg_its_share_of_the_k_tiles() -> None:
    pytest.importorskip("tvm")
    from tuner.codegen.schedule import build_schedule

    cfg = config(cgs=4, cg_split="reduction", cg_operands="replicate")
    s = build_schedule(BIG, "sw26010-4cg", cfg)
    space = space_for(BIG, "sw26010-4cg")
    chip = space.analyze(space.encode(cfg)[None, :]).chip
    assert chip is not None and s.chunks == chip.k_tiles[0] == 4  # 16 k tiles over 4 CGs
    with pytest.raises(ValueError, match="cg_reduction_with_mesh"):  # k tiles handed round the mesh
        build_schedule(BIG, "sw26010-4cg", {**cfg, "share": "mesh", "grid": "4x4"})


@pytest.mark.parametrize("workload", [Conv2d(1, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1), Dense(1, 1000, 2048)],
                         ids=lambda w: w.op)
def test_the_openacc_like_baseline_on_the_chip_splits_its_parallel_loop_over_every_cg(workload: object) -> None:
    from tuner.baseline import openacc_baseline

    one, chip = space_for(workload, "sw26010"), space_for(workload, "sw26010-4cg")
    base_one, base_chip = openacc_baseline(one), openacc_baseline(chip)
    assert base_chip["cgs"] == 4 and base_chip["cg_split"] == ("rows" if base_one["grid"] == "64x1" else "cols")
    assert base_chip["grid"] == base_one["grid"] and base_chip["share"] == "none" and base_chip["simd"] == 1
    t_one = simulate(one, one.encode(base_one)[None, :])[0]
    t_chip = simulate(chip, chip.encode(base_chip)[None, :])[0]
    # the same loop over four CGs' CPEs: faster (four memories); a quarter at best, plus the launch --
    # the conv's loop over 64 output channels keeps 16 CPEs of each CG busy, the dense's 1000 all of them
    assert t_one / 4 < t_chip < (t_one / 2 if workload.op == "dense" else 0.9 * t_one)


def test_reports_say_how_a_tuned_config_uses_the_chip() -> None:
    from tuner.space.chip import split_label

    assert split_label(config(cgs=4, cg_split="cols")) == "4 CGs, cols"
    assert split_label(config(cgs=1)) == split_label(SPLIT) == "1 CG"
    # a memory-bound CPE kernel: its blocks over 192 CPEs are three CGs'
    assert split_label({"cut": "axis1", "block": 8, "db": 1, "active": 192, "simd": 4}) == "3 CGs"
    assert split_label({"cut": "axis1", "block": 8, "db": 1, "active": 64, "simd": 4}) == "1 CG"
