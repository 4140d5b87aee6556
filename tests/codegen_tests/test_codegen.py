"""Code generation: schedules of every op, the TIR-vs-analysis check, and generated C run on swemu.

A small sample of what benchmarks/codegen_check.py runs at scale: random configs of every op
(strided, padded, grouped and depthwise conv; float32 and float64; both targets), built with gcc
against the athread emulator, output vs numpy, DMA counts vs the analysis layer.
"""

from __future__ import annotations

import numpy as np
import pytest
from tools import require

from tuner.space.space import ScheduleSpace
from tuner.workloads import BatchMatmul, Conv2d, Dense

tvm = pytest.importorskip("tvm")

TIR_CASES = [
    (Dense(20, 24, 36), "sw26010"),
    (Dense(17, 12, 40, "float64"), "sw26010-pro"),
    (BatchMatmul(3, 12, 10, 24), "sw26010"),
    (BatchMatmul(2, 9, 16, 20, "float64"), "sw26010-pro"),
    (Conv2d(1, 8, 9, 9, 8, 3, 3, pad_h=1, pad_w=1), "sw26010"),
    (Conv2d(2, 4, 11, 11, 8, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1), "sw26010"),
    (Conv2d(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=8), "sw26010"),
    (Conv2d(1, 4, 12, 12, 6, 3, 3, stride_h=2, stride_w=2, groups=2, dtype="float64"), "sw26010-pro"),
]
OPS = {"dense": TIR_CASES[0:2], "batch_matmul": TIR_CASES[2:4], "conv2d": TIR_CASES[4:]}


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(OPS))
def test_tir_walk_matches_analysis(op):
    """LDM bytes and DMA requests/bytes per buffer from the lowered TIR equal the analysis (~50 configs)."""
    from tuner.codegen.schedule import build_schedule
    from tuner.codegen.tir_check import compare_with_analysis

    rng = np.random.default_rng(11)
    cases = OPS[op]
    checked = 0
    for wl, target in cases:
        space = ScheduleSpace(wl, target)
        for row in space.sample(50 // len(cases) + 1, rng):
            cfg = space.decode(row)
            s = build_schedule(wl, target, cfg)
            assert compare_with_analysis(s) == {}, (wl.key, target, cfg)
            checked += 1
    assert checked >= 50


def test_schedule_annotations_and_ldm_scope():
    from tuner.codegen.schedule import build_schedule

    wl = Dense(20, 24, 36)
    space = ScheduleSpace(wl, "sw26010")
    cfg = space.decode(space.sample(1, np.random.default_rng(0))[0])
    cfg.update(grid="2x2", share="bcast", db_a=1)
    space.check(cfg)
    script = build_schedule(wl, "sw26010", cfg).func.script()
    assert '"swtune.cpe": "2x2"' in script and 'scope="local.ldm"' in script
    assert '"swtune.share": "bcast"' in script and '"swtune.db": 1' in script


def test_reference_conv_matches_naive_loops():
    from tuner.backends.emulator_backend import random_inputs, reference

    wl = Conv2d(1, 4, 7, 6, 6, 3, 2, stride_h=2, pad_h=1, pad_w=2, dil_w=2, groups=2, dtype="float64")
    x, w = random_inputs(wl, np.random.default_rng(0))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)))
    out = np.zeros((wl.n, wl.k, wl.oh, wl.ow))
    cpg, kpg = wl.c // wl.groups, wl.k // wl.groups
    for k in range(wl.k):
        for y in range(wl.oh):
            for z in range(wl.ow):
                for c in range(cpg):
                    for r in range(wl.r):
                        for s in range(wl.s):
                            out[0, k, y, z] += (xp[0, (k // kpg) * cpg + c, y * 2 + r, z + 2 * s] * w[k, c, r, s])
    np.testing.assert_allclose(reference(wl, x, w), out, rtol=1e-12)


def test_reference_gemm_matches_numpy():
    """The TVM reference of the dense and batch_matmul specs (tuner/space/gemm.py) is numpy's matmul."""
    from tuner.backends.emulator_backend import random_inputs, reference

    for wl in (Dense(5, 7, 9, "float64"), BatchMatmul(3, 4, 6, 5, "float64")):
        a, b = random_inputs(wl, np.random.default_rng(1))
        np.testing.assert_allclose(reference(wl, a, b), a @ np.swapaxes(b, -1, -2), rtol=1e-12)


# configs chosen to cover sharing, double buffering, SIMD, line-padded puts and ragged tiles
RUN_CASES = [
    (Dense(20, 24, 36), "sw26010", dict(tile_m=8, tile_n=16, tile_k=16, grid="2x2", share="bcast", dma="strided",
                                         put_lines=0, db_a=1, db_b=1, tile_order="row", inner="k", simd=4, unroll=2)),
    (Dense(17, 12, 40, "float64"), "sw26010", dict(tile_m=4, tile_n=4, tile_k=8, grid="2x2", share="mesh",
                                                   dma="rows", put_lines=0, db_a=1, db_b=0, tile_order="col",
                                                   inner="n", simd=4, unroll=1)),
    (Dense(33, 20, 28), "sw26010-pro", dict(tile_m=11, tile_n=20, tile_k=28, grid="4x2", share="none",
                                            dma="strided", put_lines=0, db_a=0, db_b=1, tile_order="row",
                                            inner="m", simd=8, unroll=4)),
    (BatchMatmul(3, 12, 10, 24), "sw26010", dict(tile_b=1, tile_m=6, tile_n=8, tile_k=8, grid="2x2", share="mesh",
                                                 dma="strided", put_lines=0, db_a=1, db_b=1, tile_order="row",
                                                 inner="k", simd=4, unroll=4)),
    (BatchMatmul(2, 9, 16, 20, "float64"), "sw26010-pro", dict(tile_b=1, tile_m=9, tile_n=16, tile_k=4, grid="1x4",
                                                               share="bcast", dma="rows", put_lines=1, db_a=1,
                                                               db_b=0, tile_order="col", inner="n", simd=8,
                                                               unroll=1)),
    (Conv2d(2, 4, 11, 11, 8, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1), "sw26010",
     dict(tile_n=1, tile_oh=2, tile_ow=6, tile_k=4, tile_c=2, grid="2x2", share="bcast", dma="strided", put_lines=0,
          db_a=1, db_b=1, tile_order="row", inner="ow", simd=4, unroll=2)),
    (Conv2d(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=8), "sw26010",
     dict(tile_n=1, tile_oh=4, tile_ow=10, tile_k=2, tile_c=1, grid="4x4", share="none", dma="rows", put_lines=1,
          db_a=1, db_b=0, tile_order="col", inner="c", simd=4, unroll=1)),
    (Conv2d(1, 4, 12, 12, 6, 3, 3, stride_h=2, stride_w=2, groups=2, dtype="float64"), "sw26010-pro",
     dict(tile_n=1, tile_oh=2, tile_ow=5, tile_k=3, tile_c=2, grid="2x1", share="none", dma="strided", put_lines=0,
          db_a=0, db_b=1, tile_order="row", inner="k", simd=1, unroll=1)),
    (Conv2d(1, 8, 9, 9, 8, 3, 3, pad_h=1, pad_w=1), "sw26010-pro",
     dict(tile_n=1, tile_oh=3, tile_ow=9, tile_k=2, tile_c=4, grid="2x2", share="mesh", dma="strided", put_lines=0,
          db_a=1, db_b=1, tile_order="col", inner="c", simd=4, unroll=2)),
    # SIMD along k over a k tile of two groups of two channels: the data's group index k // 2 is not
    # affine along the lanes (steps 0, 1, 0, 1), so its lanes are gathered one by one, not read as
    # one vector of a repacked copy (wrong results before: a max abs error of 7.4)
    (Conv2d(1, 6, 8, 8, 6, 3, 3, pad_h=2, pad_w=2, dil_h=2, dil_w=2, groups=3), "sw26010-pro",
     dict(tile_n=1, tile_oh=4, tile_ow=8, tile_k=4, tile_c=2, grid="8x8", share="none", dma="rows", put_lines=0,
          db_a=1, db_b=0, tile_order="row", inner="k", simd=4, unroll=1)),
    # db_c (asynchronous puts from two output copies) with several tiles per CPE, ragged last tiles,
    # and RLC over whole mesh rows and columns (the hardware broadcast putr/putc)
    (Dense(44, 52, 64, "float64"), "sw26010", dict(tile_m=4, tile_n=4, tile_k=4, grid="8x8", share="mesh",
                                                   dma="rows", put_lines=0, db_a=1, db_b=1, db_c=1,
                                                   tile_order="col", inner="m", simd=4, unroll=4, acc="reg")),
    (Conv2d(2, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1), "sw26010",
     dict(tile_n=1, tile_oh=2, tile_ow=5, tile_k=4, tile_c=4, grid="2x2", share="bcast", dma="strided", put_lines=0,
          db_a=1, db_b=1, db_c=1, tile_order="row", inner="k", simd=4, unroll=4, acc="reg")),
]


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    require("gcc", "nm", "objcopy")
    from tuner.backends.emulator_backend import EmulatorBackend

    return EmulatorBackend(workdir=tmp_path_factory.mktemp("emu"))


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(RUN_CASES)))
def test_generated_kernel_on_emulator(backend, case):
    wl, target, cfg = RUN_CASES[case]
    ScheduleSpace(wl, target).check(cfg)
    res = backend.measure(wl, target, [cfg])[0]
    assert res.source == "emulator"
    assert res.status == "ok", res.error
    assert res.details["dma_match"], (res.details["dma"], res.details["dma_expected"])
    assert res.times[0] > 0


def test_a_wrong_conv_output_is_caught(backend, monkeypatch):
    """The reference (TVM's llvm build of the spec, the padded input) rejects a kernel whose output is
    off in one element: a padded, grouped conv whose host program adds 1 to the first output value."""
    import tuner.codegen.sources as sources

    wl, target, cfg = next(c for c in RUN_CASES if isinstance(c[0], Conv2d) and c[0].pad_h and c[0].groups > 1)
    real = sources.generate

    def corrupted(*args, **kwargs):
        src = real(*args, **kwargs)
        src.files["host.c"] = src.files["host.c"].replace("athread_join();", "athread_join(); c[0] += 1;")
        return src

    assert backend.measure(wl, target, [cfg])[0].status == "ok"
    monkeypatch.setattr(sources, "generate", corrupted)
    res = backend.measure(wl, target, [cfg])[0]
    assert res.status == "wrong_result", res.error


def test_db_c_put_is_asynchronous_and_waited_before_reuse():
    from tuner.codegen.printer import SlavePrinter
    from tuner.codegen.schedule import build_schedule

    wl, target, cfg = RUN_CASES[-2]
    slave = SlavePrinter(build_schedule(wl, target, cfg)).render()
    puts = [i for i, line in enumerate(slave.splitlines()) if "SW_PUT(&C_ldm[0]" in line]
    lines = slave.splitlines()
    assert puts and all("&c_reply[c_slot]" in lines[i] for i in puts)
    assert "SW_WAIT(&c_reply[0], c_exp[0]);" not in "\n".join(lines[puts[-1]:puts[-1] + 4])
    assert "c_slot ^= 1; C_ldm = &C_buf[c_slot];" in slave and "SW_WAIT(&c_reply[c_slot], c_exp[c_slot]);" in slave
    assert "simd_putr(v, 8)" in slave and "simd_putc(v, 8)" in slave
    single = SlavePrinter(build_schedule(wl, target, {**cfg, "db_c": 0})).render()
    assert "C_buf" not in single and "SW_WAIT(&c_reply[0], c_exp[0]);" in single


@pytest.mark.slow
def test_random_configs_on_emulator(backend):
    rng = np.random.default_rng(7)
    for wl, target in TIR_CASES[::2]:
        space = ScheduleSpace(wl, target)
        cfgs = [space.decode(r) for r in space.sample(2, rng)]
        for res in backend.measure(wl, target, cfgs):
            assert res.status == "ok", (wl.key, res.config, res.error)
            assert res.details["dma_match"], (wl.key, res.config, res.details)


def test_failures_are_results_not_exceptions(backend):
    wl = Dense(20, 24, 36)
    bad = {"tile_m": 3}
    res = backend.measure(wl, "sw26010", [bad])[0]
    assert res.status == "invalid_config"


def test_sunway_sources_and_timing_line(tmp_path):
    from tuner.codegen.sunway import parse_timing, write_kernel

    wl, target, cfg = RUN_CASES[0]
    job = write_kernel(wl, target, cfg, tmp_path / "k")
    names = {p.name for p in job.directory.iterdir()}
    assert {"slave.c", "host.c", "Makefile", "swtune_kernel.h", "swtune_slave_api.h"} <= names
    mk = (job.directory / "Makefile").read_text()
    assert "sw5cc -slave -msimd -O1" in mk.replace("$(CC_SLAVE)", "sw5cc") and "-hybrid" in mk
    slave = (job.directory / "slave.c").read_text()
    assert "__thread_local" in slave and "ROW_MODE" not in slave  # the API shim spells the modes
    assert "athread_spawn(swtune_kernel" in (job.directory / "host.c").read_text()
    assert parse_timing("x\nSWTUNE_KERNEL_SECONDS=1.5e-03\n") == pytest.approx(1.5e-3)
    assert parse_timing("nothing") is None
    pro = write_kernel(wl, "sw26010-pro", cfg, tmp_path / "p")
    assert "swgcc -mslave -msimd -O3 -faddress_align=64" in (pro.directory / "Makefile").read_text().replace(
        "$(CC_SLAVE)", "swgcc")


def test_builtin_te_compute_is_its_spec_expression():
    """dense and batch_matmul's kernel PrimFunc, read back as an expression, is the spec's (same axes,
    accesses and output); conv2d's loops carry its axes' names, output order then the reductions."""
    from tuner.codegen.te_ops import op_def
    from tuner.expr.parse import compute_block, describe
    from tuner.space.ops import geometry_for

    for wl in (Dense(5, 7, 9), BatchMatmul(3, 4, 6, 5, "float64")):
        spec, got = geometry_for(wl).expr, describe(op_def(wl).func, wl.op)
        assert got.axes == spec.axes and got.inputs == spec.inputs and got.output == spec.output
    conv = Conv2d(1, 4, 7, 6, 6, 3, 2, groups=2)
    block = compute_block(op_def(conv).func)
    assert [str(iv.var.name) for iv in block.iter_vars] == ["v_n", "v_k", "v_oh", "v_ow", "v_c", "v_r", "v_s"]
    assert "data[v_n, v_k // 3, v_c, v_oh + v_r, v_ow + v_s]" in str(block.body)  # the spec's group index
