"""A kernel split over the chip's core groups, generated as C and run on swemu with 4 and 6 CGs.

Each CG runs the one-CG schedule over its share of the split axis' tiles (tuner/codegen/schedule.py,
``_CGN``); a split reduction's CGs write partial outputs that a second spawn adds; the host program
launches it in the target's form (tuner/codegen/host.py). The checks: the output against TVM's build of
the op, each CG's DMA requests and bytes (the emulator's ``core_groups``) against the analysis' plan for
the busiest CG (plus the adding pass' requests), and the host program's form on each target.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense, Workload

pytestmark = pytest.mark.needs("gcc", "nm", "objcopy")

GEMM = dict(tile_m=8, tile_n=8, tile_k=8, grid="2x2", share="none", dma="strided", put_lines=0, db_a=0, db_b=0,
            tile_order="row", inner="n", simd=1, unroll=1)
CONV = dict(tile_n=1, tile_oh=2, tile_ow=8, tile_k=4, tile_c=2, grid="2x2", share="bcast", dma="strided",
            put_lines=0, db_a=1, db_b=1, tile_order="row", inner="ow", simd=4, unroll=2)

# (workload, target, config): every CG gets the same number of whole tiles, so each CG's DMA is the plan's
EVEN = [
    (Dense(64, 64, 16), "sw26010-4cg", dict(GEMM, cgs=4, cg_split="rows", cg_operands="replicate")),
    (Dense(64, 64, 16), "sw26010-4cg", dict(GEMM, cgs=4, cg_split="cols", cg_operands="cross")),
    (Dense(48, 40, 24), "sw26010-pro-6cg", dict(GEMM, share="bcast", db_a=1, db_b=1, simd=4, cgs=6,
                                                cg_split="rows", cg_operands="cross")),
    (Dense(40, 48, 24), "sw26010-pro-6cg", dict(GEMM, share="mesh", db_a=1, db_b=1, cgs=6, cg_split="cols",
                                                cg_operands="replicate")),
    (Conv2d(1, 4, 8, 8, 8, 3, 3, pad_h=1, pad_w=1), "sw26010-4cg",
     dict(CONV, cgs=4, cg_split="rows", cg_operands="replicate")),
    (Conv2d(1, 4, 8, 8, 24, 3, 3, pad_h=1, pad_w=1), "sw26010-pro-6cg",
     dict(CONV, cgs=6, cg_split="cols", cg_operands="replicate")),
]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Path:
    from tuner.codegen.emulator.build import compile_emulator

    return compile_emulator(tmp_path_factory.mktemp("swemu_chip"))


def run_split(workload: Workload, target: str, cfg: dict, d: Path, emulator: Path) -> tuple[dict, object]:
    """Generate, build and run the kernel on its inputs; returns the report and the analysis. Asserts the
    output matches the reference."""
    from tuner.backends.emulator_backend import RTOL, random_inputs, reference
    from tuner.codegen.emulator.build import build_kernel, launch
    from tuner.codegen.sources import generate

    t = get_target(target)
    src = generate(workload, t, cfg)
    src.write(d)
    prog = build_kernel(d, d / "kernel_emu", pro="pro" in t.name, emulator_object=emulator)
    inputs = random_inputs(workload, np.random.default_rng(0))
    files = []
    for i, x in enumerate(inputs):
        files.append(d / f"in{i}.bin")
        x.tofile(files[-1])
    proc = launch([prog, *files, d / "c.bin"], wait_s=60, target=t, timeout=30, report=d / "report.json")
    assert proc.returncode == 0, proc.stderr
    ref = reference(workload, *inputs)
    out = np.fromfile(d / "c.bin", dtype=workload.dtype).reshape(ref.shape)
    np.testing.assert_allclose(out, ref, rtol=RTOL[workload.dtype], atol=RTOL[workload.dtype] * np.abs(ref).max())
    space = space_for(workload, t)
    return json.loads((d / "report.json").read_text()), space.analyze(space.encode(cfg)[None, :])


def plan(an: object) -> dict[str, float]:
    """The busiest CG's DMA as the analysis plans it."""
    return {"get_reqs": an.a.total_requests[0] + an.b.total_requests[0],  # type: ignore[attr-defined]
            "get_bytes": an.a.total_bytes[0] + an.b.total_bytes[0],  # type: ignore[attr-defined]
            "put_reqs": an.c.total_requests[0], "put_bytes": an.c.total_bytes[0]}  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", range(len(EVEN)), ids=lambda i: f"{EVEN[i][0].op}-{EVEN[i][2]['cg_split']}-"
                                                            f"{EVEN[i][2]['cgs']}cg")
def test_a_split_kernel_matches_the_reference_and_each_cg_moves_the_planned_dma(case, tmp_path, emulator):
    workload, target, cfg = EVEN[case]
    report, an = run_split(workload, target, cfg, tmp_path, emulator)
    assert an.valid[0]
    want = plan(an)
    per_cg = report["core_groups"]
    assert len(per_cg) == cfg["cgs"]
    for g in per_cg:
        assert {k: g[k] for k in want} == pytest.approx(want), g["cg"]


def test_a_ragged_split_gives_the_busiest_cg_the_planned_requests(tmp_path, emulator):
    """7 row tiles over 4 CGs: 2, 2, 2 and 1. The busiest CGs issue the plan's requests (its bytes
    average the ragged last tile over the axis), the last one fewer."""
    cfg = dict(GEMM, cgs=4, cg_split="rows", cg_operands="replicate")
    report, an = run_split(Dense(50, 40, 24), "sw26010-4cg", cfg, tmp_path, emulator)
    want = plan(an)
    reqs = [(g["get_reqs"], g["put_reqs"]) for g in report["core_groups"]]
    assert reqs[:3] == [(want["get_reqs"], want["put_reqs"])] * 3
    assert reqs[3][1] == want["put_reqs"] / 2


@pytest.mark.parametrize("target", ["sw26010-4cg", "sw26010-pro-6cg", "sw26010"])
def test_the_host_program_launches_the_kernel_in_the_targets_form(target):
    pytest.importorskip("tvm")
    from tuner.codegen.sources import generate

    t = get_target(target)
    cfg = dict(GEMM, cgs=t.cgs, cg_split="rows", cg_operands="replicate") if t.cgs > 1 else GEMM
    files = generate(Dense(64, 64, 16), t, cfg).files
    host, slave = files["host.c"], files["slave.c"]
    if t.cgs == 1:  # the one-CG program as ever
        assert "athread_init();\n" in host and "athread_spawn(swtune_kernel, &args);" in host
        assert "pthread" not in host and "malloc_cross" not in host and "_CGN" not in slave
        return
    assert "malloc_cross" in host and "_CGN" in slave
    if t.base_name == "sw26010":  # swDNN's form: a host thread per CG, each spawning on its own
        assert "pthread_create(&sw_cg[g], NULL, sw_cg_main, (void *)g);" in host
        assert "athread_spawn(swtune_kernel, sw_cg_args[0]);" in host and "athread_spawn_cgs" not in host
        assert "for (int g = 0; g < 4; g++)" in host and "-allshare" in files["Makefile"]
    else:  # the all-shared mode
        assert "athread_init_cgs();" in host and "athread_spawn_cgs(swtune_kernel, &args);" in host
        assert "athread_join_cgs();" in host and "pthread" not in host


def test_core_groups_past_the_kernels_count_do_nothing(tmp_path, emulator):
    """athread_spawn_cgs starts every CG of the target (6); a kernel split over 4 leaves CGs 4 and 5 idle:
    no DMA, and no compute on the boxes of tiles past the axis (their negative pitches wrote outside LDM
    before each CG's tile guard bounded its own count)."""
    cfg = dict(GEMM, pack="b", cgs=4, cg_split="cols", cg_operands="replicate")
    report, an = run_split(Dense(64, 64, 32), "sw26010-pro-6cg", cfg, tmp_path, emulator)
    want = plan(an)
    per_cg = [(g["get_reqs"], g["put_reqs"]) for g in report["core_groups"]]
    assert per_cg == [(want["get_reqs"], want["put_reqs"])] * 4 + [(0, 0)] * 2


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"
EXPRESSIONS = [("linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36}), ("stencil.py:stencil5", {"h": 14, "w": 18}),
               ("stencil.py:max_plus", {"m": 12, "n": 16, "k": 20}),
               ("conv.py:conv1d", {"n": 2, "c": 6, "w": 19, "k": 10, "s": 3, "stride": 2})]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sw26010-4cg", "sw26010-pro-6cg"])
@pytest.mark.parametrize(("ref", "args"), EXPRESSIONS, ids=[e[0].split(":")[1] for e in EXPRESSIONS])
def test_sampled_splits_of_expression_operators_match_the_reference(ref, args, target, tmp_path, emulator):
    """The first rows or cols split a seeded sample of the chip space holds, for operators written as
    expressions (several operands in a group, no reduction, a max-plus reducer, a strided conv)."""
    from tuner.expr.workload import workload_from_op

    workload = workload_from_op(f"{EXAMPLES}/{ref}", args)
    space = space_for(workload, target)
    cfg = next(c for c in map(space.decode, space.sample(60, np.random.default_rng(7)))
               if c.get("cgs", 1) > 1 and c["cg_split"] != "reduction")
    report, an = run_split(workload, target, cfg, tmp_path, emulator)
    assert an.valid[0] and len(report["core_groups"]) == get_target(target).cgs


REDUCTION = [
    (Dense(16, 16, 64), "sw26010-4cg", dict(GEMM, cgs=4, cg_split="reduction", cg_operands="replicate")),
    (Dense(24, 40, 96), "sw26010-pro-6cg", dict(GEMM, share="bcast", db_a=1, db_b=1, simd=4, cgs=6,
                                                cg_split="reduction", cg_operands="replicate")),
    (Dense(24, 40, 96), "sw26010-pro-6cg", dict(GEMM, cgs=4, cg_split="reduction", cg_operands="replicate")),
    (Conv2d(1, 8, 8, 8, 8, 3, 3, pad_h=1, pad_w=1), "sw26010-4cg",
     dict(CONV, cgs=4, cg_split="reduction", cg_operands="replicate")),
]


@pytest.mark.parametrize("case", range(len(REDUCTION)), ids=lambda i: f"{REDUCTION[i][0].op}-{REDUCTION[i][1]}-"
                                                                 f"{REDUCTION[i][2]['cgs']}cg")
def test_a_split_reduction_adds_the_partial_outputs_of_its_cgs(case, tmp_path, emulator):
    """Each CG sums its share of the k tiles into its own partial output (the plan's DMA for the busiest
    CG), then a second spawn adds the partials, CG g its slice of the output (one get per partial and
    one put per block: host.reduce_requests). A 4-CG split on the Pro's 6 leaves CGs 4 and 5 idle."""
    from math import prod

    from tuner.codegen.host import c_pitch, reduce_requests, shapes
    from tuner.codegen.schedule import build_schedule

    workload, target, cfg = REDUCTION[case]
    report, an = run_split(workload, target, cfg, tmp_path, emulator)
    s = build_schedule(workload, target, cfg)
    n = prod(shapes(s)["c"][:-1]) * c_pitch(s)
    want = plan(an)
    for g in report["core_groups"]:
        c = g["cg"]
        gets, puts = reduce_requests(n, cfg["cgs"], c)
        kernel = (want["get_reqs"], want["put_reqs"]) if c < cfg["cgs"] else (0, 0)
        assert (g["get_reqs"], g["put_reqs"]) == (kernel[0] + gets, kernel[1] + puts), c


@pytest.mark.parametrize("target", ["sw26010-4cg", "sw26010-pro-6cg"])
def test_a_split_reductions_host_program_runs_two_phases(target):
    pytest.importorskip("tvm")
    from tuner.codegen.sources import generate

    t = get_target(target)
    files = generate(Dense(16, 16, 64), t, dict(GEMM, cgs=4, cg_split="reduction", cg_operands="replicate")).files
    host = files["host.c"]
    assert "swtune_args args[4];" in host and "c_parts + g * 256L" in host
    assert "void swtune_reduce(swtune_reduce_args *r)" in files["swtune_kernel.h"]
    if t.base_name == "sw26010":  # per thread: its CG's arguments, a barrier, the adding pass
        assert "athread_spawn(swtune_kernel, (swtune_args *)sw_cg_args[0] + g);" in host
        assert "pthread_barrier_wait(&sw_cg_phase);" in host and "athread_spawn(swtune_reduce, sw_cg_args[1]);" in host
    else:  # one spawn per phase; the slave picks its CG's arguments
        assert "athread_spawn_cgs(swtune_kernel_parts, args);" in host
        assert "athread_spawn_cgs(swtune_reduce, &red);" in host
    assert "-DSWTUNE_SLAVE -c slave.c" in files["Makefile"]


def test_a_split_max_plus_reduction_folds_its_partials_with_max(tmp_path, emulator):
    """A max-plus product's partial maxima over 10 k tiles on 4 CGs (3, 3, 3 and 1) are folded with max,
    not added: the pass follows the op's reducer (host.COMBINE)."""
    from tuner.expr.workload import workload_from_op

    workload = workload_from_op(f"{EXAMPLES}/stencil.py:max_plus", {"m": 12, "n": 16, "k": 40})
    cfg = dict(tile_i=4, tile_j=8, tile_rk=4, grid="2x2", share="none", dma="strided", put_lines=0, db_a=0,
               db_b=0, tile_order="row", inner="j", simd=1, unroll=1, cgs=4, cg_split="reduction",
               cg_operands="replicate")
    report, an = run_split(workload, "sw26010-4cg", cfg, tmp_path, emulator)
    busiest = max(report["core_groups"], key=lambda g: g["get_reqs"])
    assert busiest["get_reqs"] == plan(an)["get_reqs"] + 4  # and one get per partial of its block


def test_a_reduction_split_tvm_cannot_decompose_is_refused_clearly():
    """Some reduction splits' bindings over a CG's k tiles are not affine to TVM (here a conv1d whose
    batch is one tile): the schedule refuses them with NotBuiltYetError, before any C."""
    pytest.importorskip("tvm")
    from tuner.codegen.schedule import build_schedule
    from tuner.errors import NotBuiltYetError
    from tuner.expr.workload import workload_from_op

    workload = workload_from_op(f"{EXAMPLES}/conv.py:conv1d", {"n": 2, "c": 6, "w": 19, "k": 10, "s": 3, "stride": 2})
    cfg = {"tile_b": 2, "tile_f": 2, "tile_x": 8, "tile_rc": 1, "grid": "4x1", "share": "bcast", "dma": "rows",
           "put_lines": 0, "db_a": 0, "db_b": 1, "db_c": 1, "tile_order": "row", "inner": "f", "simd": 8,
           "unroll": 1, "acc": "ldm", "pack": "b", "cgs": 3, "cg_split": "reduction", "cg_operands": "replicate"}
    with pytest.raises(NotBuiltYetError, match="decompose_reduction"):
        build_schedule(workload, "sw26010-pro-6cg", cfg)


@pytest.mark.parametrize("case", [EVEN[0], EVEN[3], REDUCTION[0]], ids=["rows-4cg", "cols-6cg", "reduction-4cg"])
def test_the_emulator_backend_checks_each_cgs_dma_against_the_plan(case, tmp_path):
    """A chip target's measurement compares every CG's own counts (not the chip's totals) with the plan."""
    from tuner.backends.emulator_backend import EmulatorBackend

    workload, target, cfg = case
    res = EmulatorBackend(workdir=tmp_path).measure(workload, target, [cfg])[0]
    assert res.status == "ok", res.error
    assert len(res.details["dma"]) == get_target(target).cgs
    assert res.details["dma_match"], (res.details["dma"], res.details["dma_expected"])
