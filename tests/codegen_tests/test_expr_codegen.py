"""Athread C of operators written as tensor expressions: generated, built on swemu, checked.

Each config's output is compared with TVM's llvm run of the same expression, the emulator's DMA
counters and the lowered TIR's DMA figures with the analysis (tuner/backends/expr_check.py).
"""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.backends.expr_check import EmulatorSummary, check_config, emulator_check
from tuner.codegen.schedule import build_schedule
from tuner.codegen.sources import generate
from tuner.expr.workload import workload_from_op
from tuner.space import space_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"
pytestmark = pytest.mark.needs("gcc", "objcopy", "nm")


def _op(ref: str, **args):
    return workload_from_op(f"{EXAMPLES}/{ref}", args)


# several operands per group (weighted_gemm: A and w in group a), one group only (gemv), no
# reduction (stencil: a unit loop stands in), a max-plus reducer, a strided conv with a whole-LDM tap axis
CASES = [("linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36}), ("linalg.py:gemv", {"m": 40, "k": 36}),
         ("stencil.py:stencil5", {"h": 14, "w": 18}), ("stencil.py:max_plus", {"m": 12, "n": 16, "k": 20}),
         ("conv.py:conv1d", {"n": 2, "c": 6, "w": 19, "k": 10, "s": 3, "stride": 2})]


@pytest.mark.slow
@pytest.mark.parametrize("ref, args", CASES)
def test_expression_kernels_run_right_on_the_emulator(ref, args, tmp_path):
    space = space_for(_op(ref, **args), "sw26010")
    summary = emulator_check(space, 3, seed=5, workdir=str(tmp_path))
    assert summary.configs_checked == 3
    assert summary.as_json() | {"problems": []} == {
        "configs_checked": 3, "wrong_results": 0, "dma_count_mismatches": 0, "tir_mismatches": 0,
        "compile_failures": 0, "runtime_errors": 0, "problems": []}, summary.problems


def test_roles_follow_the_operand_groups():
    wl = _op("linalg.py:weighted_gemm", m=24, n=20, k=36)
    space = space_for(wl, "sw26010")
    s = build_schedule(wl, "sw26010", space.decode(space.sample(1, 0)[0]))
    assert dict(zip(s.op.inputs, s.roles)) == {"A": "a", "B": "b", "w": "a1"}
    src = generate(wl, "sw26010", s.config)
    assert "typedef struct { float *a, *b, *a1, *c; } swtune_args;" in src.files["swtune_kernel.h"]
    assert "A1_ldm" in src.files["slave.c"] and "sw_read(argv[3], a1" in src.files["host.c"]


@pytest.mark.slow
def test_packed_b_operands_run_right(tmp_path):
    space = space_for(_op("linalg.py:batch_matmul_at", b=3, m=10, n=12, k=14), "sw26010", restrict={"pack": ["b"]})
    backend, summary = EmulatorBackend(workdir=tmp_path), EmulatorSummary()
    for row in space.sample(2, np.random.default_rng(2)):
        check_config(space, space.decode(row), backend, summary)
    assert (summary.configs_checked, summary.wrong_results, summary.compile_failures) == (2, 0, 0), summary.problems
    assert summary.dma_count_mismatches == summary.tir_mismatches == 0, summary.problems


def test_pack_is_not_offered_when_boxes_overlap():
    stencil = space_for(_op("stencil.py:stencil5", h=14, w=18), "sw26010")  # halo: boxes overlap
    knob = stencil.knobs[stencil.knob_index["pack"]]
    assert knob.choices == ("none",) and "overlap" in knob.doc
    gemm = space_for(_op("linalg.py:weighted_gemm", m=24, n=20, k=36), "sw26010")
    assert "b" in gemm.knobs[gemm.knob_index["pack"]].choices


# every example operator at a small size: (function, args)
SMALL = [("linalg.py:gemv", {"m": 40, "k": 36}), ("linalg.py:batch_matmul_at", {"b": 2, "m": 10, "n": 12, "k": 14}),
         ("linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36}),
         ("linalg.py:attention_score", {"batch": 1, "heads": 2, "seq": 12, "d": 8}),
         ("stencil.py:stencil5", {"h": 14, "w": 18}), ("stencil.py:max_plus", {"m": 12, "n": 16, "k": 20}),
         ("conv.py:conv1d", {"n": 1, "c": 6, "w": 19, "k": 10, "s": 3, "stride": 1}),
         ("conv.py:conv3d", {"n": 1, "c": 3, "d": 5, "h": 6, "w": 6, "k": 4, "r": 3}),
         ("conv.py:conv2d_transpose", {"n": 1, "c": 4, "h": 5, "w": 5, "k": 6, "r": 3}),
         ("conv.py:depthwise_separable", {"n": 1, "c": 4, "h": 8, "w": 8, "k": 6, "r": 3}),
         ("mathfn.py:l1_distance", {"m": 12, "n": 10, "d": 9}), ("mathfn.py:exp_gemm", {"m": 12, "n": 10, "k": 9})]


@pytest.mark.slow
@pytest.mark.parametrize("ref, args", SMALL)
def test_simd_the_space_offers_is_the_simd_codegen_emits(ref, args):
    """Lanes the analysis charges are lanes the C issues: a config with simd > 1 prints vector
    arithmetic (simd_v*), one with simd = 1 none; a body with no vector form offers simd = 1 alone."""
    wl = _op(ref, **args)
    space = space_for(wl, "sw26010")
    knob = space.knobs[space.knob_index["simd"]]
    if wl.expr.scalar_reason:
        assert knob.choices == (1,) and wl.expr.scalar_reason in knob.doc
    else:
        assert max(knob.choices) > 1
    acc = space.knobs[space.knob_index["acc"]]
    assert ("reg" in acc.choices) == (not wl.expr.block_reason)
    for w in knob.choices:
        for inner in space.knobs[space.knob_index["inner"]].choices:
            sub = space_for(wl, "sw26010", restrict={"simd": [w], "inner": [inner]})
            for row in sub.sample(1, np.random.default_rng(len(inner) + w)):
                config = sub.decode(row)
                slave = generate(wl, "sw26010", config).files["slave.c"]
                assert ("simd_v" in slave) == (w > 1), (config, slave[-3000:])
    if "reg" not in acc.choices:
        return
    # acc = "reg": the analysis holds accumulators in registers exactly when the C prints the micro-kernel
    for inner in space.knobs[space.knob_index["inner"]].choices:
        if inner == space.geometry.red_axis.name:
            continue
        sub = space_for(wl, "sw26010", restrict={"acc": ["reg"], "simd": [max(knob.choices)], "inner": [inner]})
        for row in sub.sample(1, np.random.default_rng(1)):
            slave = generate(wl, "sw26010", sub.decode(row)).files["slave.c"]
            in_regs = bool(sub.analyze(row[None, :]).compute.acc_in_registers[0])
            assert in_regs == ("_c0_0" in slave or "_s0_0" in slave), (sub.decode(row), slave[-3000:])


@pytest.mark.slow
@pytest.mark.parametrize("ref, args", [("mathfn.py:l1_distance", {"m": 12, "n": 10, "d": 9}),
                                       ("mathfn.py:exp_gemm", {"m": 12, "n": 10, "k": 9})])
def test_math_functions_run_right(ref, args, tmp_path):
    wl = _op(ref, **args)
    full = space_for(wl, "sw26010")
    lanes = max(full.knobs[full.knob_index["simd"]].choices)
    space = space_for(wl, "sw26010", restrict={"simd": [lanes]})  # fabs: vectors; exp: scalar only
    backend, summary = EmulatorBackend(workdir=tmp_path), EmulatorSummary()
    for row in space.sample(3, np.random.default_rng(4)):
        check_config(space, space.decode(row), backend, summary)
    assert summary.as_json() | {"problems": []} == {
        "configs_checked": 3, "wrong_results": 0, "dma_count_mismatches": 0, "tir_mismatches": 0,
        "compile_failures": 0, "runtime_errors": 0, "problems": []}, summary.problems
