"""The core-group simulator as a measurement backend: determinism, noise, failures, model effects."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.measure.simulator import Simulator, dma_time, kernel_cycles, simulate
from tuner.space import ScheduleSpace
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense

GEMM = Dense(1024, 1024, 1024, "float64")
GOOD = dict(tile_m=32, tile_n=64, tile_k=16, grid="8x8", share="bcast", dma="strided", put_lines=1, db_a=1, db_b=1,
            tile_order="row", inner="n", simd=4, unroll=16)


@pytest.fixture(scope="module")
def space():
    return ScheduleSpace(GEMM, "sw26010")


def seconds(space, **changes):
    return float(simulate(space, space.encode({**GOOD, **changes})[None])[0])


def test_dma_time_is_the_public_request_model():
    one = dma_time("sw26010", "get", 2048)
    assert 1e-7 < one < 1e-4
    assert dma_time("sw26010", "get", 4096) > one
    assert dma_time("sw26010", "get", 2048, active_cpes=1) < one  # bandwidth shared by fewer CPEs
    # FACTS 2.1: one strided descriptor of 128-B blocks beats separate (swCandle: misaligned) 128-B DMAs
    strided = dma_time("sw26010", "get", 128, n_blocks=16, gap_bytes=896) + dma_time(
        "sw26010", "put", 128, n_blocks=16, gap_bytes=896)
    separate = dma_time("sw26010", "get", 128, host_offset=80) + dma_time("sw26010", "put", 128, host_offset=80)
    assert strided < 16 * separate / 1.3
    assert dma_time(get_target("sw26010-pro"), "put", 128) < dma_time("sw26010-pro", "put", 124)


def test_measurements_are_deterministic_for_a_seed_and_noisy_when_asked(space):
    cfgs = [space.decode(r) for r in space.sample(20, 0)]
    a = Simulator(seed=1).measure(GEMM, "sw26010", cfgs)
    b = Simulator(seed=1).measure(GEMM, "sw26010", list(reversed(cfgs)))
    assert [r.times for r in a] == [r.times for r in reversed(b)]
    quiet = Simulator(noise=0.0).measure(GEMM, "sw26010", cfgs[:1])[0]
    assert len(set(quiet.times)) == 1
    noisy = Simulator(noise=0.05, repeats=200, seed=2).measure(GEMM, "sw26010", cfgs[:1])[0]
    rel = np.array(noisy.times) / quiet.times[0]
    # one launch: its factor (5% between launches) shared, each repeat within 2% of it
    assert abs(rel.mean() - 1) < 0.2 and 0.012 < np.std(rel / rel.mean()) < 0.03
    other_seed = Simulator(noise=0.05, repeats=200, seed=3).measure(GEMM, "sw26010", cfgs[:1])[0]
    assert other_seed.times != noisy.times


def test_invalid_configs_come_back_as_failed_results_not_exceptions(space):
    over = {**GOOD, "tile_m": 1024, "tile_n": 1024}
    bad_value = {**GOOD, "tile_m": 33}
    results = Simulator().measure(GEMM, "sw26010", [over, bad_value, GOOD])
    assert [r.status for r in results] == ["ldm_overflow", "invalid_config", "ok"]
    assert "ldm_overflow" in results[0].error and math.isinf(results[0].mean_time)
    assert "not a choice" in results[1].error


def test_double_buffering_hides_dma_behind_compute(space):
    assert seconds(space, db_a=1, db_b=1) < seconds(space, db_a=0, db_b=0)


def test_sharing_lifts_the_dma_bound(space):
    alone = seconds(space, share="none")
    shared = seconds(space, share="bcast")
    assert shared < alone / 2
    peak = get_target("sw26010").peak_flops("float64")
    assert GEMM.flops / alone / peak < 0.35  # "bound by DMA at roughly a fifth of peak"


def test_block_size_matters_small_blocks_are_slow(space):
    assert seconds(space, tile_k=2) > 2 * seconds(space, tile_k=16)


def test_slowest_cpe_sets_the_time(space):
    # 1024 rows = 32 row tiles of 32: 4 per mesh row. 1056 rows = 33 tiles: one mesh row gets 5, so
    # 3% more work costs ~25% more time.
    bigger = ScheduleSpace(Dense(1056, 1024, 1024, "float64"), "sw26010")
    assert bigger.analyze(bigger.encode(GOOD)[None]).imbalance[0] > 1.2
    assert seconds(bigger) > 1.15 * seconds(space)


def test_spawn_overhead_is_the_floor():
    tiny = ScheduleSpace(Dense(1, 1, 1, "float32"), "sw26010")
    t = simulate(tiny, tiny.sample(50, 0))
    assert (t >= get_target("sw26010").spawn_join_s).all()


def test_kernel_cycles_breakdown_adds_up(space):
    idx = space.encode(GOOD)[None]
    parts = kernel_cycles(space.target, space.analyze(idx))
    assert parts["total"][0] >= parts["compute"][0]
    assert parts["get_a"][0] > 0 and parts["put_c"][0] > 0


def test_conv_padding_pre_pass_costs_time():
    plain = Conv2d(1, 16, 32, 32, 16, 3, 3)
    padded = Conv2d(1, 16, 30, 30, 16, 3, 3, pad_h=1, pad_w=1)  # same output, padded on the host
    a, b = ScheduleSpace(plain, "sw26010"), ScheduleSpace(padded, "sw26010")
    row = a.sample(1, 0)
    assert simulate(b, row)[0] > simulate(a, row)[0]


@pytest.mark.slow
def test_default_noise_is_realistic_lognormal_and_repeats_differ(space):
    from tuner.measure.noise import DEFAULT_NOISE, REPEAT_NOISE, noise_factors

    # swDNN's 13 launches of one config at 297-355 GFLOPS: sigma = ln(355/297) / d2(13), d2(13) = 3.336
    assert Simulator().noise == DEFAULT_NOISE == pytest.approx(np.log(355 / 297) / 3.336, abs=5e-4)
    cfg = [space.decode(r) for r in space.sample(1, 3)]
    base = float(simulate(space, space.encode(cfg[0])[None])[0])
    res = Simulator(repeats=400, seed=4).measure(GEMM, "sw26010", cfg)[0]
    rel = np.array(res.times) / base
    assert len(set(res.times)) == len(res.times)  # repeats differ
    assert (rel > 0).all() and res.details["model_seconds"] == base
    # the repeats of one launch share its factor and vary around it by the within-launch spread
    assert np.std(rel / rel.mean()) == pytest.approx(REPEAT_NOISE, rel=0.2)
    # between launches (one measurement per seed) the spread is the launch-to-launch figure
    means = np.array([np.mean(Simulator(repeats=3, seed=k).measure(GEMM, "sw26010", cfg)[0].times) / base
                      for k in range(400)])
    assert abs(means.mean() - 1) < 0.01 and means.std() == pytest.approx(DEFAULT_NOISE, rel=0.2)
    # right-skewed with mean 1: the median sits below the mean (needs a large sample)
    many = np.concatenate([noise_factors(np.random.default_rng(k), DEFAULT_NOISE, 1) for k in range(200_000)])
    assert np.mean(many > 1) < 0.495 and abs(many.mean() - 1) < 1e-3


def test_breakdown_accounts_for_the_whole_time(space):
    from tuner.measure.simulator import breakdown

    parts = breakdown(space, GOOD)
    assert sum(parts["seconds"].values()) == pytest.approx(parts["total_s"], rel=1e-9)
    assert parts["pipe_bound"] in ("P0", "P1", "LATENCY")


def test_a_double_buffered_output_tile_hides_its_put_and_costs_ldm(space):
    # compute-bound: the put rides beside the next tile's steps, only the last tile's is waited on
    conv = ScheduleSpace(Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64"), "sw26010")
    cfg = dict(tile_n=1, tile_oh=8, tile_ow=16, tile_k=16, tile_c=2, grid="8x8", share="mesh", dma="rows",
               put_lines=0, db_a=1, db_b=1, tile_order="row", inner="k", simd=4, unroll=16, acc="reg")
    a = conv.analyze(np.stack([conv.encode({**cfg, "db_c": d}) for d in (0, 1)]))
    assert a.valid.all() and a.ldm_c[1] == 2 * a.ldm_c[0]
    parts = kernel_cycles(conv.target, a)
    put_all = parts["put_c"][0]
    assert parts["put_c"][1] == pytest.approx(put_all / a.tiles_per_cpe[1])
    assert parts["total"][1] == pytest.approx(parts["total"][0] - put_all + parts["put_c"][1], rel=1e-9)
    # DMA-bound: the hidden puts occupy the same DMA lane as the gets, so nothing is gained
    b = space.analyze(np.stack([space.encode({**GOOD, "tile_n": 32, "db_c": d}) for d in (0, 1)]))
    dma = kernel_cycles(space.target, b)
    assert b.valid.all() and dma["dma_hidden_excess"][0] > 0
    assert dma["total"][1] == pytest.approx(dma["total"][0], rel=1e-9)
    # a config stored before the knob existed reads as one output copy
    base = conv.encode({**cfg, "db_c": 0})
    assert (conv.encode(cfg) == base).all()


def test_rlc_over_whole_rows_sends_once_per_vector():
    sp = ScheduleSpace(Dense(2048, 2048, 2048, "float64"), "sw26010")
    cfg = dict(tile_m=32, tile_n=32, tile_k=32, share="mesh", dma="rows", put_lines=1, db_a=1, db_b=1,
               tile_order="col", inner="m", simd=4, unroll=16, acc="reg")
    a = sp.analyze(np.stack([sp.encode({**cfg, "grid": g}) for g in ("8x8", "4x4")]))
    t = sp.target
    vectors = 32 * 32 * 8 / (t.vector_bits / 8)  # one 32x32 float64 piece of a, and of b
    lat = [p * t.share_latency_cycles for p in (8, 4)]
    # 8x8: owner load + one broadcast putr; 7 receivers' getr + store.  4x4: owner load + 3 putr.
    assert a.share_cycles_per_step[0] == pytest.approx(lat[0] + 2 * vectors * (2 + 2 * 7), rel=1e-9)
    assert a.share_cycles_per_step[1] == pytest.approx(lat[1] + 2 * vectors * (4 + 2 * 3), rel=1e-9)


def test_dgemm_needs_register_blocking_and_sharing_for_its_best():
    """The best DGEMM 2048^3 over a sub-space that holds the calibration's best is reached only with
    tiles shared over the mesh and accumulators in registers; without either it stays below 0.80."""
    import itertools

    sp = ScheduleSpace(Dense(2048, 2048, 2048, "float64"), "sw26010")
    tiles = (16, 32, 64, 128)
    rows = [sp.encode(dict(tile_m=m, tile_n=n, tile_k=k, grid="8x8", share=sh, dma="rows", put_lines=1, db_a=1,
                           db_b=1, db_c=dc, tile_order="col", inner=inner, simd=4, unroll=u, acc=acc, pack=pk))
            for m, n, k, sh, dc, inner, u, acc, pk in itertools.product(
                tiles, tiles, tiles, ("none", "bcast", "mesh"), (0, 1), ("m", "n", "k"), (4, 8, 16),
                ("ldm", "reg"), ("none", "b"))]
    index = np.stack(rows)
    a = sp.analyze(index)
    frac = np.where(a.valid, sp.workload.flops / simulate(sp, index, a) / sp.target.peak_flops("float64"), 0.0)
    shared = a.share_mode != 0
    reg = a.compute.acc_in_registers.astype(bool) & (a.compute.register_block >= 8)
    best = frac.max()
    assert frac[shared & reg].max() == best
    assert frac[~shared].max() < min(0.80, 0.95 * best)
    assert frac[~reg].max() < min(0.80, 0.95 * best)


def _dgemm_subspace_fractions() -> float:
    """Best peak fraction of DGEMM 2048^3 over the sub-space that holds the calibration's best config."""
    import itertools

    sp = ScheduleSpace(Dense(2048, 2048, 2048, "float64"), "sw26010")
    tiles = (16, 32, 64, 128)
    index = np.stack([sp.encode(dict(tile_m=m, tile_n=n, tile_k=k, grid="8x8", share=sh, dma="rows", put_lines=1,
                                     db_a=1, db_b=1, db_c=dc, tile_order="col", inner=inner, simd=4, unroll=u,
                                     acc="reg", pack=pk))
                      for m, n, k, sh, dc, inner, u, pk in itertools.product(
                          tiles, tiles, tiles, ("bcast", "mesh"), (0, 1), ("m", "n", "k"), (4, 8, 16),
                          ("none", "b"))])
    a = sp.analyze(index)
    frac = np.where(a.valid, sp.workload.flops / simulate(sp, index, a) / sp.target.peak_flops("float64"), 0.0)
    return float(frac.max())


def test_packed_b_is_one_contiguous_request_per_tile_and_costs_host_time_only_when_not_constant():
    """pack=b: a b tile is one request of the whole box; free for weights, a host pass for batch_matmul's B;
    ragged b tiles cannot pack."""
    from tuner.space.analysis import REASONS
    from tuner.workloads import BatchMatmul

    dense = ScheduleSpace(Dense(256, 256, 256, "float64"), "sw26010")
    cfg = dict(tile_m=32, tile_n=32, tile_k=32, grid="8x8", share="none", dma="rows", put_lines=1, db_a=1,
               db_b=1, db_c=0, tile_order="col", inner="m", simd=4, unroll=16, acc="reg")
    a = dense.analyze(np.stack([dense.encode({**cfg, "pack": p}) for p in ("none", "b")]))
    assert a.b.requests[0] == 32 * a.b.loads[0] and a.b.requests[1] == a.b.loads[1]
    assert a.b.block_bytes[1] == 32 * 32 * 8 and a.b.bytes[1] == a.b.bytes[0]
    assert a.host_pack_bytes is not None and (a.host_pack_bytes == 0).all()
    t = simulate(dense, np.stack([dense.encode({**cfg, "pack": p}) for p in ("none", "b")]))
    assert t[1] < t[0]
    bmm = ScheduleSpace(BatchMatmul(4, 64, 64, 64, "float64"), "sw26010")
    bcfg = {**cfg, "tile_b": 1, "tile_m": 16, "tile_n": 16, "tile_k": 16, "grid": "4x4"}
    b = bmm.analyze(bmm.encode({**bcfg, "pack": "b"})[None])
    assert b.valid[0] and b.host_pack_bytes is not None and b.host_pack_bytes[0] == 2 * 4 * 64 * 64 * 8
    ragged = ScheduleSpace(Dense(100, 100, 100, "float64"), "sw26010")
    r = ragged.analyze(ragged.encode({**cfg, "tile_n": 32, "pack": "b"})[None])
    assert REASONS[int(r.reason[0])] == "pack_needs_whole_tiles"
    # a config stored before the knob existed reads as unpacked
    assert (dense.encode(cfg) == dense.encode({**cfg, "pack": "none"})).all()


def test_facts_dgemm_reaches_0_80_to_0_95_of_a_core_groups_peak():
    assert 0.80 <= _dgemm_subspace_fractions() <= 0.95


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue #11: the model's best 3x3 float64 conv reaches ~0.81 of peak "
                                        "(P0-bound 4x4-class register block, DMA hidden); no FACTS figure caps "
                                        "that inner loop, while hand-written swDNN conv reaches 54%")
def test_facts_conv3x3_float64_stays_near_swdnns_half_of_peak():
    """A short search (random sample, then hill climbing) must not find a conv far above swDNN's 54%."""
    conv = Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64")
    sp = ScheduleSpace(conv, "sw26010")
    rng = np.random.default_rng(2)
    front = sp.sample(20_000, rng)
    front = front[np.argsort(simulate(sp, front))[:128]]
    for _ in range(40):
        pool = np.unique(np.concatenate([front, sp.neighbours(np.repeat(front, 4, axis=0), rng)]), axis=0)
        front = pool[np.argsort(simulate(sp, pool))[:128]]
    best = float(simulate(sp, front[:1])[0])
    assert conv.flops / best / sp.target.peak_flops("float64") <= 0.65


def _benchmark(name: str):
    """benchmarks/<name>.py, imported from the checkout (benchmarks/ is not a package)."""
    import importlib
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module(name)


def _swdnn_population():
    return _benchmark("swdnn_population")


def test_swdnn_population_is_the_sweep_its_log_ran():
    """The reconstruction of swDNN's >100 configurations: the Costride figures its perf.1 log prints, and the
    shapes it ran (Costride > 0) or refused (the assertion), 43 per image size, 172 in all."""
    pop = _swdnn_population()
    # (B, Ni, No) -> "Costride is N" in swCNNv12-4cg-opt-batch-size-aware/log/perf.1
    logged = {(128, 128, 128): 17, (128, 128, 352): 1, (128, 128, 384): 0, (128, 160, 320): 0,
              (128, 224, 128): 11, (128, 384, 128): 1, (256, 128, 128): 6, (256, 128, 256): 0,
              (256, 192, 160): 2, (256, 256, 128): 1, (256, 288, 128): 0, (128, 256, 224): -1}
    assert {key: pop.costride(*key) for key in logged} == logged
    shapes = pop.population()
    assert len(shapes) == 172
    for ro in (16, 24, 32, 40):
        ran = {(b, ni, no) for r, b, ni, no in shapes if r == ro}
        assert ran == set(pop.SWDNN_MEASURED_RO16)  # Costride does not depend on the image size
    # the rows split gives each CG a quarter of the output rows and the same flops share
    conv = pop.per_cg(16, 128, 128, 128, "rows")
    assert (conv.n, conv.h, conv.w) == (128, 6, 18) and 4 * conv.flops == pop.chip_flops(16, 128, 128, 128)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue #11: over swDNN's own configurations the model's best float64 "
                                        "3x3 convs reach ~0.75 of the chip's 3.06 TF (P0-bound, DMA hidden), "
                                        "while swDNN measured 0.24-0.48 on them and headlines 54% as its best")
def test_facts_swdnn_population_stays_near_swdnns_figure():
    """Like with like: FACTS' swDNN figure is a full-chip (4 CG) figure over swDNN's sweep of >100 conv
    configurations, and its 54% is the best of them ("over 1.6 Tflops ... 54% of the theoretical peak");
    swDNN's own log measures 0.24-0.48 of 3.06 TF on the Ro=16 shapes. The single favourable shape the
    strict xfail above pins is one point; this pins the population. On six shapes spread over the sweep
    (both batches, all four image sizes, small and large channel counts), each split by output rows over the
    4 CGs as swDNN did, the aggregate (total flops / total time against 3.06 TF) must not exceed 0.65, the
    tolerance above swDNN's best that a broader schedule space than swDNN's hand-written kernel could earn.
    Fails today: aggregate ~0.75 here and 0.75 over all 172 shapes (benchmarks/swdnn_population.py; mean 0.77
    on the 43 Ro=16 shapes where swDNN measured a mean of 0.39), every best config P0-bound with its DMA
    hidden. This compares our best schedule with swDNN's: swDNN's own schedule through the model is not
    flattered (test_simulator_does_not_flatter_swdnns_own_schedule); what would settle the rest is a hardware
    timing of our kernel and its compute-only twin (docs/simulator_fidelity.md, benchmarks/split_kernel.py)."""
    pop = _swdnn_population()
    figures = pop.run(list(pop.SUBSET), "rows", sample=6000, starts=2, verbose=False)
    assert figures["population_peak_fraction"] <= 0.65


def test_simulator_does_not_flatter_swdnns_own_schedule():
    """Like with like on the schedule (benchmarks/swdnn_schedule.py, docs/simulator_fidelity.md): swDNN v12's
    own loop nest and DMA descriptors (its core_functions.c), replayed through the simulator's DMA model with a
    perfect inner loop (one vector FMA every cycle), must not beat swDNN's measured time by more than the DMA
    model's calibration error (0.15) on any of the 43 Ro=16 shapes perf.1 timed, and must follow the sweep.
    Today the ratio model/measured spans 0.51-1.10 (median 0.86), correlation 0.92: swDNN's timings are
    DMA-bound under the model, so they do not show the model flattering conv; what they cannot separate is a
    slower DMA from a slower inner loop (the flat-DMA reading fits 14 GB/s with the inner loop at 0.57)."""
    sched = _benchmark("swdnn_schedule")
    figures = sched.compare(sched.DmaHypothesis.MODEL, 1.0)
    assert figures["ratio_max"] <= 1.15
    assert figures["correlation"] >= 0.85
    # the replay is swDNN's loop: halving the inner loop's issue rate slows it, as does a slower DMA
    assert sched.compare(sched.DmaHypothesis.MODEL, 0.5)["model_mean"] < figures["model_mean"]
    assert sched.compare(sched.DmaHypothesis.FLAT, 1.0, flat_gbps=5.0)["model_mean"] < sched.compare(
        sched.DmaHypothesis.FLAT, 1.0, flat_gbps=22.0)["model_mean"]


# the calibration's best DGEMM tiles (32^3 on 8x8, register block of 16)
RLC_CFG = {"acc": "reg", "db_a": 1, "db_b": 1, "db_c": 1, "dma": "rows", "grid": "8x8", "inner": "n", "pack": "none",
           "put_lines": 0, "share": "mesh", "simd": 4, "tile_k": 32, "tile_m": 32, "tile_n": 32, "tile_order": "col",
           "unroll": 16}


def rlc_cycles(w, cfg) -> float:
    """Share cycles per step on SW26010 beyond the same target sharing by RMA: the CPEs' RLC work."""
    import dataclasses

    from tuner.space.factory import space_for
    from tuner.targets import Sharing

    t = get_target("sw26010")
    out = []
    for target in (t, dataclasses.replace(t, sharing=Sharing.RMA)):
        sp = space_for(w, target)
        a = sp.analyze(sp.encode(cfg)[None, :])
        assert a.valid[0], a.reason[0]
        out.append(float(a.share_cycles_per_step[0]))
    return out[0] - out[1]


def test_mesh_rlc_charges_only_the_k_tiles_a_chunk_holds():
    """K = 128 in k tiles of 32 is 4 k tiles, one chunk of a mesh row of 8: the C sends those 4 (2 P1
    ops per 32-B message each, a and b), half of what 8 k tiles (K = 256) send per step."""
    full, half = rlc_cycles(Dense(256, 256, 256, "float64"), RLC_CFG), rlc_cycles(Dense(256, 256, 128, "float64"),
                                                                                RLC_CFG)
    msgs = 2 * 32 * 32 * 8 / 32  # a and b tiles of 32x32 doubles, in 32-B messages
    assert full == msgs * 2 * 8 and half == msgs * 2 * 4


def test_bcast_b_on_sw26010_pays_its_column_rlc():
    """bcast's b on SW26010 goes over the column by RLC (sw_rlc_col_span), which the model charges:
    32 requests of 256 B, 8 messages each, 3 ops per message on every CPE (unaligned load = 2 + a
    broadcast putc, or a getc + unaligned store = 2), and a column sync per owner round."""
    t = get_target("sw26010")
    cycles = rlc_cycles(Dense(256, 256, 256, "float64"), {**RLC_CFG, "share": "bcast"})
    assert cycles == 32 * 8 * 3 + 8 * t.share_latency_cycles
