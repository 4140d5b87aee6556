"""Several memory-bound operators of one cut as one CPE kernel plan.

An optimizer's update of one parameter is four element-wise operators (momentum) or a dozen (Adam),
each too small to be worth a kernel phase of its own: a phase's DMA latency and barrier outweigh its
arithmetic. Fused, the operators run block by block in one kernel: the kernel gets each block of the
operands that come from outside, calls the members' bodies in order, and puts the values something
outside reads. A value that only later members read stays in LDM and never goes to main memory.

The fused plan is a KernelPlan like any other, so the schedule analysis (DMA, compute, LDM),
the configuration choice and the slave file treat it as one operator. Its members must cut the same
way (one output axis, the same extents; no halo window) and every tensor they share must be sliced
the same way in each of them. Bodies are scalar C (``lanes`` 1): the vector printer's bodies are
not composed.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from tuner.ir.cprint.legalized import CFunction, Work
from tuner.space.cpe.plan import KernelPlan, ParamSlice

SIMD_BYTES = 64  # an LDM buffer is rounded to whole 64 B, aligned, so any body may read it with vectors


@dataclass(frozen=True)
class Member:
    """One operator of a fused kernel: its plan, and the tensor behind each of its parameters
    (inputs, then outputs, in the plan's order)."""

    plan: KernelPlan
    tensors: tuple[Hashable, ...]


def _same_cut(plans: Sequence[KernelPlan]) -> bool:
    first = plans[0]
    return all(p.window is None and (p.axis, p.lead, p.ext, p.item) == (first.axis, first.lead, first.ext, first.item)
               for p in plans)


def _slices(members: Sequence[Member]) -> dict[Hashable, ParamSlice] | None:
    """Each tensor's slice, or None when two members slice one tensor differently."""
    out: dict[Hashable, ParamSlice] = {}
    for m in members:
        for t, p in zip(m.tensors, m.plan.params):
            if out.setdefault(t, p) != p:
                return None
    return out


def fuse_plans(members: Sequence[Member], inputs: Sequence[Hashable], outputs: Sequence[Hashable],
               ctype: str) -> KernelPlan | None:
    """The members (in program order) as one kernel reading ``inputs`` and writing ``outputs``; every
    other tensor a member writes is an intermediate in LDM. None when they do not cut one way."""
    plans = [m.plan for m in members]
    if len(members) < 2 or not _same_cut(plans):
        return None
    if any(len(m.tensors) != len(m.plan.params) for m in members):
        raise ValueError("a member names one tensor per parameter of its plan")
    slices = _slices(members)
    if slices is None:
        return None
    written = [t for m in members for t in m.tensors[m.plan.n_inputs:]]
    temps = [t for t in dict.fromkeys(written) if t not in outputs]
    if not set(outputs) <= set(written) or set(inputs) & set(written):
        raise ValueError("the fused kernel reads what no member writes and writes what the members write")
    names = {t: f"p{k}" for k, t in enumerate([*inputs, *outputs])}
    names.update({t: f"fused_t{k}" for k, t in enumerate(temps)})
    first = plans[0]
    per = max(1, SIMD_BYTES // first.item)

    def body_at(block: int, lanes: int) -> CFunction | None:
        if lanes != 1:
            return None  # scalar bodies only (the module docstring)
        parts = [m.plan.body(block, 1) for m in members]
        if any(f is None for f in parts):
            return None
        code, decls, calls = [], [], []
        work = Work()
        scratch = 0
        for k, (m, f) in enumerate(zip(members, parts)):
            assert f is not None
            own = re.sub(r"\bg_s(\d+)\b", rf"g{k}_s\1", f.code)  # each member's LDM scratch, its own names
            code.append(re.sub(r"\bstatic void body\(", f"static void body_m{k}(", own, count=1))
            decls += [re.sub(r"\bg_s(\d+)\b", rf"g{k}_s\1", d) for d in f.ldm_decls]
            calls.append(f"  body_m{k}({', '.join(names[t] for t in m.tensors)});")
            work = Work(work.stores + f.work.stores, work.loads + f.work.loads, work.arith + f.work.arith,
                        work.transcendental + f.work.transcendental)
            scratch += f.scratch_bytes
        for t in temps:
            s = slices[t]
            elems = -(-(block * s.inner if s.sliced else s.elems) // per) * per
            decls.append(f"__thread_local {ctype} {names[t]}[{elems}] __attribute__((aligned({SIMD_BYTES})));")
            scratch += elems * first.item
        args = ", ".join(f"SWTUNE_T *restrict {names[t]}" for t in [*inputs, *outputs])
        code.append(f"static void body({args}) {{\n" + "\n".join(calls) + "\n}")
        shapes: list[tuple[int, ...]] = [(block * slices[t].inner if slices[t].sliced else slices[t].elems,)
                                         for t in [*inputs, *outputs]]
        dtype = parts[0].param_dtypes[0] if parts[0] is not None else ""
        return CFunction("body", "\n".join(code), [dtype] * len(shapes), shapes, work, decls, scratch)

    return KernelPlan(first.axis, first.lead, first.ext, [slices[t] for t in [*inputs, *outputs]], len(inputs),
                      first.item, body_at)
