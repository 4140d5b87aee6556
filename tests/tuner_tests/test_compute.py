"""The CPE inner-loop model: two pipes, the register block, where accumulators live, misaligned loads."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.measure.simulator import breakdown, simulate
from tuner.space import REASONS, ScheduleSpace
from tuner.space.compute import PipeBound
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense

GEMM = Dense(512, 512, 512, "float64")
BASE = dict(tile_m=32, tile_n=32, tile_k=16, grid="8x8", share="bcast", dma="strided", put_lines=1, db_a=1,
            db_b=1, tile_order="row", inner="n", simd=4, unroll=16, acc="reg")


@pytest.fixture(scope="module")
def space():
    return ScheduleSpace(GEMM, "sw26010")


def row(space, **changes):
    return space.analyze(space.encode({**BASE, **changes})[None, :]).row(0)


def test_a_4x4_block_in_registers_is_bound_by_the_fp_pipe(space):
    r = row(space)
    assert r["compute_register_block"] == 16 and r["compute_registers"] == 16 + 4 + 4
    assert r["compute_spilled"] == 0 and r["compute_acc_in_registers"] == 1
    assert r["compute_bound"] == PipeBound.P0
    assert r["compute_p1_per_iter"] < r["compute_p0_per_iter"] == 16  # 8 operand loads + loop overhead


def test_a_register_block_beyond_32_vector_registers_spills_and_is_charged(space):
    fits, spills = row(space, unroll=16), row(space, unroll=32)
    assert get_target("sw26010").vector_registers == 32
    assert spills["compute_registers"] == 32 + 4 + 8 and spills["compute_spilled"] == 12
    assert spills["compute_p1_per_iter"] > 2 * 12 + 4 + 8
    # twice the FMAs per iteration, but the spill traffic makes each FMA cost more, not less
    assert spills["compute_cycles_per_iter"] / 32 > fits["compute_cycles_per_iter"] / 16
    assert spills["compute_cycles_per_step"] > fits["compute_cycles_per_step"]


def test_accumulators_through_ldm_make_the_loop_p1_bound(space):
    ldm = row(space, acc="ldm")
    assert ldm["compute_acc_in_registers"] == 0
    assert ldm["compute_bound"] == PipeBound.P1
    # every FMA vector loads and stores its accumulator: 2u + operand loads + overhead on P1
    assert ldm["compute_p1_per_iter"] == 2 * 16 + 8 + get_target("sw26010").loop_overhead_ops
    assert ldm["kernel_efficiency"] < 0.45 < row(space)["kernel_efficiency"]
    assert breakdown(space, {**BASE, "acc": "ldm"})["pipe_bound"] == "P1"
    assert breakdown(space, BASE)["pipe_bound"] == "P0"


def test_a_short_accumulator_chain_is_latency_bound(space):
    r = row(space, unroll=2)
    assert r["compute_bound"] == PipeBound.LATENCY
    assert r["compute_cycles_per_iter"] == get_target("sw26010").fp_latency_cycles


def test_lanes_along_the_reduction_already_hold_accumulators(space):
    r = row(space, inner="k", acc="ldm")
    assert r["compute_acc_in_registers"] == 1
    bad = space.analyze(space.encode({**BASE, "inner": "k", "acc": "reg"})[None, :])
    assert REASONS[int(bad.reason[0])] == "acc_reg_needs_output_inner"


def test_unaligned_conv_taps_cost_extra_loads():
    wl3 = Conv2d(1, 16, 18, 18, 16, 3, 3, dtype="float64")
    wl1 = Conv2d(1, 16, 16, 16, 16, 1, 1, dtype="float64")
    cfg = dict(tile_n=1, tile_oh=4, tile_ow=16, tile_k=4, tile_c=4, grid="4x4", share="none", dma="rows",
               put_lines=0, db_a=0, db_b=0, tile_order="row", inner="ow", simd=4, unroll=16, acc="reg")
    r3 = ScheduleSpace(wl3, "sw26010").analyze(ScheduleSpace(wl3, "sw26010").encode(cfg)[None]).row(0)
    r1 = ScheduleSpace(wl1, "sw26010").analyze(ScheduleSpace(wl1, "sw26010").encode(cfg)[None]).row(0)
    assert r1["compute_p1_per_iter"] == 4 + 4 + 3
    assert r3["compute_p1_per_iter"] == pytest.approx(r1["compute_p1_per_iter"] + 4 * 2 / 3)


def test_old_configs_without_the_acc_knob_mean_accumulators_in_ldm(space):
    old = {k: v for k, v in BASE.items() if k != "acc"}
    assert (space.encode(old) == space.encode({**BASE, "acc": "ldm"})).all()


def test_the_best_dgemm_keeps_its_accumulators_in_registers():
    gemm = Dense(2048, 2048, 2048, "float64")
    space = ScheduleSpace(gemm, "sw26010")
    pool = space.sample(30_000, np.random.default_rng(0))
    times = simulate(space, pool)
    best = pool[int(np.argmin(times))]
    a = space.analyze(best[None, :])
    assert bool(a.compute.acc_in_registers[0])
    assert a.compute.register_block[0] >= 8  # register blocking, not one accumulator chain
    # the same config with its accumulators through LDM is far slower
    ldm = space.encode({**space.decode(best), "inner": "n", "acc": "ldm"})
    assert simulate(space, ldm[None, :])[0] > 1.5 * times.min()


def test_the_pro_has_512_bit_registers_and_8_lane_blocks():
    pro = get_target("sw26010-pro")
    assert pro.vector_bits == 512 and pro.max_simd("float64") == 8
    sp = ScheduleSpace(GEMM, pro)
    r = sp.analyze(sp.encode({**BASE, "simd": 8})[None, :]).row(0)
    assert r["compute_bound"] == PipeBound.P0 and r["compute_cycles_per_iter"] == r["compute_p0_per_iter"]
    # b[n,k] is packed for n-vectors: every CPE packs the whole tile it holds (a bcast column splits
    # the requests, not the packing), a cost per tile element that a taller tile amortises
    tall = sp.analyze(sp.encode({**BASE, "simd": 8, "tile_m": 128})[None, :]).row(0)
    assert 0.5 < r["kernel_efficiency"] < tall["kernel_efficiency"] and tall["kernel_efficiency"] > 0.75
