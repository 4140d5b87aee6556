"""The inner loop of an expression body other than ``c += a*b`` loads what tuner/space/compute.py charges.

tuner/ir/cprint/kernel_loop.py prints one vector of w points per trip of the innermost loop; every operand
read of the body is a broadcast (``simd_set`` of one LDM element w times), a ``SW_VLOADU`` vector or a
``simd_set`` of w different elements (gathered lane by lane). The analysis charges, per model
iteration of u P0 slots, ``operand_loads`` = loads per trip * u / instructions per point (tuner/expr/
analysis.py, compute.py ``BodyReads``). For stencil5 (five reads of X, halo taps along j) and
weighted_gemm (three operands) the loads in the emitted trip are counted -- distinct LDM elements of
the inputs (a broadcast is one load of one element), the output's traffic left out -- and must equal
the charge exactly, as tests/codegen_tests/test_microkernel.py does for the built-in micro-kernels; so
must the output's loads and stores of the trip (accumulators in LDM), the rest of the P1 charge.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from tuner.codegen.sources import generate
from tuner.expr.workload import workload_from_op
from tuner.space import space_for
from tuner.targets import get_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"
CASES = [("stencil.py:stencil5", {"h": 14, "w": 18}), ("linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36})]
_REF = re.compile(r"\b([A-Z]\w*_ldm)\[")


def vector_trip(c: str, w: int) -> str:
    """The body of the first ``for (; x + w <= ...; x += w)`` loop of the update (expr_vector.py's vector
    loop; the output's zeroing loop, over ``*_init`` variables, comes first)."""
    lines = c.splitlines()
    for i, ln in enumerate(lines):
        if re.match(rf"\s*for \(; (?!\w+_init\b)\w+ \+ {w} <= .*\+= {w}\) {{$", ln):
            depth, body = 1, []
            for inner in lines[i + 1:]:
                depth += inner.count("{") - inner.count("}")
                if depth <= 0:
                    return "\n".join(body)
                body.append(inner)
    raise AssertionError("no vector loop in the generated C")


def ldm_refs(text: str) -> list[str]:
    """Every ``NAME_ldm[...][...]`` reference, brackets balanced."""
    refs = []
    for m in _REF.finditer(text):
        j, depth = m.end() - 1, 0
        while True:
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            j += 1
            if depth == 0 and text[j] != "[":
                break
        refs.append(text[m.start():j])
    return refs


def counted(trip: str) -> dict[str, int]:
    refs = [r for r in ldm_refs(trip) if not r.startswith("C_ldm")]  # the output's buffer (role c)
    vectors = [r for r in refs if re.search(rf"SW_VLOADU\(\w+, &{re.escape(r)}", trip)]
    # the output: every reference is a load or a store; a strided one goes through a stack buffer
    # (a vector store to it, then each lane read back and stored)
    out = len([r for r in ldm_refs(trip) if r.startswith("C_ldm")])
    out += len(re.findall(r", _l\);", trip)) + len(re.findall(r"= _l\[\d+\];", trip))
    return {"loads": len(set(refs)), "vector_loads": len(set(vectors)), "output_ops": out}


@pytest.mark.parametrize("ref, args", CASES)
def test_expression_trip_loads_what_the_model_charges(ref, args):
    wl = workload_from_op(f"{EXAMPLES}/{ref}", args)
    assert wl.expr.block_reason  # printed by expr_vector.py, not the c += a*b update loop
    geo_full = space_for(wl, "sw26010")
    ipp = geo_full.geometry.fma_per_point
    target = get_target("sw26010")
    seen = set()
    for inner in geo_full.knobs[geo_full.knob_index["inner"]].choices:
        sub = space_for(wl, "sw26010", restrict={"simd": [4], "inner": [inner]})
        for row in sub.sample(4, np.random.default_rng(7)):
            cfg = sub.decode(row)
            cp = sub.analyze(row[None, :]).compute
            trip = vector_trip(generate(wl, "sw26010", cfg).files["slave.c"], 4)
            got = counted(trip)
            charged = float(cp.operand_loads[0]) * ipp / float(cp.register_block[0])
            assert got["loads"] == pytest.approx(charged, rel=1e-12), (cfg, got, charged)
            # unaligned vectors are charged on top (a merge on P0), never more than the vector loads
            extra = (float(cp.p0_per_iter[0]) - float(cp.register_block[0])) * ipp / float(cp.register_block[0])
            assert 0.0 <= extra <= got["vector_loads"] + 1e-12, (cfg, got, extra)
            # the output's traffic per trip (none when the lanes run along the reduction)
            out_charged = (float(cp.p1_per_iter[0]) - float(cp.operand_loads[0]) - (float(cp.p0_per_iter[0])
                           - float(cp.register_block[0])) - float(cp.spilled[0]) * target.spill_ops_per_register
                           - target.loop_overhead_ops) * ipp / float(cp.register_block[0])
            if not cp.acc_in_registers[0]:
                assert got["output_ops"] == pytest.approx(out_charged, rel=1e-9, abs=1e-9), (cfg, got, out_charged)
            seen.add((inner, got["loads"]))
    if ref.startswith("stencil"):
        # lanes along j: five unit-stride vectors; along i: five reads gathered lane by lane
        assert seen == {("j", 5), ("i", 20)}, seen
    else:
        # along j: A and w broadcast, B a vector; along rk: A and w vectors, B gathered; along i: A
        # gathered, B and w broadcast
        assert seen == {("j", 3), ("rk", 6), ("i", 6)}, seen
