"""SIMD code for the innermost compute loop (annotated ``swtune.simd`` = lanes).

The loop body must be the update ``c[..] = c[..] + a[..] * b[..]`` (optionally under TVM's bound
predicate). Lanes run ``w`` consecutive iterations: an operand that does not depend on the loop is
broadcast, one that is contiguous along it (unit step in its innermost LDM dimension) is loaded with
``simd_loadu``, any other is gathered lane by lane (the packing the analysis accounts for). A
reduction loop (c independent of the loop var) keeps a vector accumulator and sums its lanes at the
end. The predicate is a prefix in the loop variable (``base + x < extent``), so full vectors run while
the last lane is inside and a scalar tail finishes the rest.
"""

from __future__ import annotations

import random
from typing import Any

from tuner.codegen.tir import cexpr, const_int, evaluate, free_vars, kind


def _vtype(ty: str, w: int) -> str:
    return f"{ty}v{w}"


def _unit_stride(load_indices: list, var: str) -> bool:
    """The loop var appears only in the innermost index, with step 1."""
    if any(var in free_vars(i) for i in load_indices[:-1]):
        return False
    last = load_indices[-1]
    names = sorted(free_vars(last))
    rnd = random.Random(0)
    for _ in range(4):
        env = {n: rnd.randrange(0, 7) for n in names}
        env[var] = 3
        lo = evaluate(last, env)
        env[var] = 4
        if evaluate(last, env) - lo != 1:
            return False
    return True


def simd_loop(pr: Any, node: Any, ctx: Any, w: int) -> bool:
    """Print ``node`` as a vector loop; False (print nothing) when the body is not the update."""
    var = node.loop_var.name
    body = node.body
    cond = None
    if kind(body) == "IfThenElse" and body.else_case is None:
        cond, body = body.condition, body.then_case
    if kind(body) != "BufferStore":
        return False
    val = body.value
    if kind(val) != "Add" or kind(val.b) != "Mul" or kind(val.a) != "TensorLoad":
        return False
    ops = [val.b.a, val.b.b]
    if any(kind(o) != "TensorLoad" for o in ops) or val.a.source.name != body.buffer.name:
        return False
    if cond is not None and kind(cond) in ("IntImm",):
        cond = None
    ext = const_int(node.extent)
    ty, vt = pr.ty, _vtype(pr.ty, w)
    vmad = "simd_vmad" if ty == "double" else "simd_vmas"  # a*b+c (sw5cc/swgcc intrinsics)
    lanes = [f"({var} + {i})" for i in range(w)]

    def vec(load: Any) -> str:
        idx = list(load.indices)
        if not any(var in free_vars(i) for i in idx):
            x = pr._load(load)
            return f"simd_set_{vt}({', '.join([x] * w)})"
        if _unit_stride(idx, var):
            return f"SW_VLOADU({vt}, &{pr._load(load)})"
        return f"simd_set_{vt}({', '.join(pr._load(load, {var: ln}) for ln in lanes)})"

    reduction = not any(var in free_vars(i) for i in body.indices)
    last = {var: f"({var} + {w - 1})"}
    guard = f" && {cexpr(cond, last, lambda e: pr._load(e, last))}" if cond is not None else ""
    ctx.emit("{")
    ctx.depth += 1
    ctx.emit(f"int {var} = 0;")
    if reduction:
        ctx.emit(f"{vt} _acc = simd_set_{vt}({', '.join(['0'] * w)});")
    ctx.emit(f"for (; {var} + {w} <= {ext}{guard}; {var} += {w}) {{")
    ctx.depth += 1
    ctx.emit(f"{vt} _va = {vec(ops[0])}, _vb = {vec(ops[1])};")
    if reduction:
        ctx.emit(f"_acc = {vmad}(_va, _vb, _acc);")
    else:
        store = pr._ldm_ref(body.buffer, list(body.indices))
        if _unit_stride(list(body.indices), var):
            ctx.emit(f"{vt} _vc = SW_VLOADU({vt}, &{store});", f"_vc = {vmad}(_va, _vb, _vc);",
                     f"simd_storeu(_vc, &{store});")
        else:
            vmul = "simd_vmuld" if ty == "double" else "simd_vmuls"
            ctx.emit(f"{ty} _l[{w}] __attribute__((aligned(64)));", f"{vt} _vc = {vmul}(_va, _vb);",
                     "simd_storeu(_vc, _l);")
            for i, ln in enumerate(lanes):
                ctx.emit(f"{pr._ldm_ref(body.buffer, list(body.indices), {var: ln})} += _l[{i}];")
    ctx.depth -= 1
    ctx.emit("}")
    if reduction:
        store = pr._ldm_ref(body.buffer, list(body.indices), {var: "0"})
        ctx.emit(f"if ({var} > 0) {{", f"  {ty} _l[{w}] __attribute__((aligned(64)));",
                 "  simd_storeu(_acc, _l);",
                 f"  {store} += {' + '.join(f'_l[{i}]' for i in range(w))};", "}")
    ctx.emit(f"for (; {var} < {ext}; {var}++) {{")
    ctx.depth += 1
    stmt = f"{pr._ldm_ref(body.buffer, list(body.indices))} = {cexpr(val, {}, pr._load)};"
    if cond is not None:
        ctx.emit(f"if ({cexpr(cond, {}, pr._load)}) {stmt}")
    else:
        ctx.emit(stmt)
    ctx.depth -= 1
    ctx.emit("}")
    ctx.depth -= 1
    ctx.emit("}")
    return True
