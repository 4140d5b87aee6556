"""Fidelity of the simulator to the generated C: the acc = "reg" micro-kernel issues what
tuner/space/compute.py charges.

For the best DGEMM 2048^3 and the best conv3x3 configs (as benchmarks/calibration.py finds them on
sw26010, float64), the slave C is generated for the very workload and the innermost reduction loop
body -- the loop holding the vector FMAs -- is counted: vector FMAs (P0) against LDM loads and stores
(P1). They must equal the model's per-iteration P0 issue and its P1 operand loads (the model's P1 minus
``loop_overhead_ops`` and spill traffic) exactly: both are counts of instructions in straight-line C,
so there is nothing to round. What the count cannot see is the integer address arithmetic, which the
model charges as ``loop_overhead_ops`` per iteration and leaves to the compiler's strength reduction
(the C indexes each operand with one pitch per reduction loop). The same configs then run on swemu
on a smaller workload of the same tiles, against numpy.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tools import require

from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense, Workload

pytest.importorskip("tvm")

DGEMM = Dense(2048, 2048, 2048, "float64")
DGEMM_BEST = {"acc": "reg", "db_a": 1, "db_b": 1, "db_c": 1, "dma": "rows", "grid": "8x8", "inner": "n",
              "pack": "b", "put_lines": 0, "share": "mesh", "simd": 4, "tile_k": 32, "tile_m": 32, "tile_n": 32,
              "tile_order": "col", "unroll": 16}
CONV = Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64")
CONV_BEST = {"tile_n": 1, "tile_oh": 8, "tile_ow": 16, "tile_k": 8, "tile_c": 4, "grid": "8x8", "share": "mesh",
             "dma": "strided", "put_lines": 1, "db_a": 1, "db_b": 1, "db_c": 1, "tile_order": "col", "inner": "k",
             "simd": 4, "unroll": 16, "acc": "reg", "pack": "none"}
# the pick of the calibration search before the model charged the generated block (same 8x2 block)
CONV_EARLIER = {**CONV_BEST, "tile_c": 8, "dma": "rows", "put_lines": 0, "tile_order": "row"}
CASES = {"dgemm": (DGEMM, DGEMM_BEST, Dense(256, 256, 256, "float64")),
         "conv3x3": (CONV, CONV_BEST, Conv2d(2, 16, 18, 18, 64, 3, 3, dtype="float64")),
         "conv3x3_earlier": (CONV, CONV_EARLIER, Conv2d(2, 16, 18, 18, 64, 3, 3, dtype="float64"))}
# ragged tiles (m = 20 in tiles of 8, n = 28 in tiles of 8): the edge blocks run the micro-kernel too
RAGGED = Dense(20, 28, 36)
RAGGED_CFG = {"tile_m": 8, "tile_n": 8, "tile_k": 12, "grid": "2x2", "share": "none", "dma": "rows", "put_lines": 0,
              "db_a": 0, "db_b": 0, "db_c": 0, "tile_order": "row", "inner": "n", "simd": 4, "unroll": 8, "acc": "reg",
              "pack": "none"}

_LOADS = re.compile(r"\bsimd_load[ue]?\(")
_STORES = re.compile(r"\bsimd_store[u]?\(")
_FMAS = re.compile(r"\bsimd_vma[ds]\(")
_SCALAR_FMAS = re.compile(r"\b_s\d+_\d+ \+= ")  # scalar lanes of a block narrower than whole vectors
_SCALAR_LOADS = re.compile(r"\bconst (?:double|float) _y\d+_\d+_\d+ = ")
_LDM_REFS = re.compile(r"\b[A-Z]\w*_(?:ldm|pk)\[")


def innermost_fma_loop(c: str) -> list[str]:
    """The statements of the first innermost ``for`` loop whose body holds an FMA of a register block
    (a predicated block's micro-kernel comes before its lane-by-lane fallback)."""
    lines = c.splitlines()
    best: list[str] | None = None
    for i, ln in enumerate(lines):
        if not ln.lstrip().startswith("for (") or not ln.rstrip().endswith("{"):
            continue
        depth, body = 1, []
        for inner in lines[i + 1:]:
            depth += inner.count("{") - inner.count("}")
            if depth <= 0:
                break
            body.append(inner)
        fma = any(_FMAS.search(b) or _SCALAR_FMAS.search(b) for b in body)
        if fma and not any(b.lstrip().startswith("for (") for b in body):
            best = body
            break
    assert best is not None, "no loop with register-block FMAs in the generated C"
    return best


def counts(body: list[str]) -> dict[str, int]:
    text = "\n".join(body)
    # every LDM reference in the loop is one load on P1 (a vector gathered lane by lane is w of them)
    return {"fma": len(_FMAS.findall(text)) + len(_SCALAR_FMAS.findall(text)),
            "loads": len(_LDM_REFS.findall(text)),
            "vector_loads": len(_LOADS.findall(text)), "scalar_loads": len(_SCALAR_LOADS.findall(text)),
            "stores": len(_STORES.findall(text)),
            "output_refs": text.count("C_ldm["), "unaligned": text.count("simd_loadu(")}


def model(w: Workload, cfg: dict) -> dict[str, float]:
    target = get_target("sw26010")
    space = space_for(w, target)
    a = space.analyze(space.encode(cfg)[None, :])
    assert a.valid[0]
    cp = a.compute
    # the P1 issue beyond the operand loads: loop overhead, spills (and a ragged bound's guard)
    spills = cp.spilled[0] * target.spill_ops_per_register
    assert cp.p1_per_iter[0] >= cp.operand_loads[0] + target.loop_overhead_ops + spills
    # an unaligned vector load is charged as two loads and a merge: the share of them is in P0 and P1
    unaligned = float(cp.p0_per_iter[0] - cp.register_block[0])
    return {"p0": float(cp.p0_per_iter[0]), "p1": float(cp.p1_per_iter[0]), "operand_p1": float(cp.operand_loads[0]),
            "unaligned": unaligned,
            "u": float(cp.register_block[0]),
            "spilled": float(cp.spilled[0]), "in_regs": bool(cp.acc_in_registers[0]),
            "bound": int(cp.bound[0])}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inner_loop_issues_what_the_model_charges(name):
    from tuner.codegen.sources import generate
    from tuner.space.compute import PipeBound

    w, cfg, _ = CASES[name]
    c = counts(innermost_fma_loop(generate(w, "sw26010", cfg).files["slave.c"]))
    m = model(w, cfg)
    assert m["in_regs"] and m["spilled"] == 0 and m["bound"] == PipeBound.P0
    # P0: one vector FMA per accumulator vector of the register block, nothing else
    assert c["fma"] == m["p0"] == m["u"] and m["unaligned"] == 0, (c, m)
    # P1: the operand loads the model charges (rb_o broadcasts + rb_i vectors), each one vector load
    # (no lane-by-lane gathers, no scalar lanes), no accumulator traffic, no unaligned (two-load) vectors
    assert c["loads"] == m["operand_p1"], (c, m)
    assert m["p1"] == m["operand_p1"] + get_target("sw26010").loop_overhead_ops  # nothing else on P1
    assert c["vector_loads"] == c["loads"] and c["stores"] == 0 and c["output_refs"] == 0, c
    assert c["unaligned"] == 0, c


def test_micro_kernel_shape_dgemm():
    """swGEMM's 4x4 doublev4 block: 4 simd_loade of a, 4 aligned simd_load of the packed b, 16 FMAs
    on accumulators loaded before and stored after the reduction loop."""
    from tuner.codegen.sources import generate

    c = generate(DGEMM, "sw26010", DGEMM_BEST).files["slave.c"]
    body = "\n".join(innermost_fma_loop(c))
    assert body.count("simd_loade(") == 4 and body.count("simd_load(") == 4
    assert "B_pk[" in body and "A_ldm[" in body
    assert "simd_set_doublev4" not in body  # no lane-by-lane operand building
    assert len(re.findall(r"doublev4 _c\d+_\d+; simd_loadu\(", c)) == 16
    assert len(re.findall(r"simd_storeu\(_c\d+_\d+, ", c)) == 16


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    require("gcc", "nm", "objcopy")
    from tuner.backends.emulator_backend import EmulatorBackend

    return EmulatorBackend(workdir=tmp_path_factory.mktemp("emu"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_micro_kernel_correct_on_emulator(backend, name):
    """The same config (same tiles, grid, sharing, packing) on a smaller workload, vs numpy."""
    _, cfg, small = CASES[name]
    space_for(small, "sw26010").check(cfg)
    res = backend.measure(small, "sw26010", [cfg])[0]
    assert res.status == "ok", res.error
    assert res.details["dma_match"], (res.details["dma"], res.details["dma_expected"])
    assert np.isfinite(res.times[0]) and res.times[0] > 0


def test_ragged_edge_blocks_run_the_micro_kernel(backend):
    """A block past a ragged tile's edge runs whole and stores under the predicate: no lane-by-lane
    fallback loop (``_va``/``_vc``) is printed, the counts match the model, and the result is right."""
    from tuner.codegen.sources import generate

    c = generate(RAGGED, "sw26010", RAGGED_CFG).files["slave.c"]
    assert "_vc" not in c and "_va" not in c
    got, m = counts(innermost_fma_loop(c)), model(RAGGED, RAGGED_CFG)
    assert got["fma"] == m["u"] and got["loads"] == m["operand_p1"], (got, m)
    res = backend.measure(RAGGED, "sw26010", [RAGGED_CFG])[0]
    assert res.status == "ok", res.error
