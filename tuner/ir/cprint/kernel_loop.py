"""A scheduled kernel's innermost compute loop (annotated ``swtune.simd`` = lanes) as vectors.

Lanes run ``w`` consecutive iterations. The update ``c[..] = c[..] + a[..] * b[..]`` loads its two
operands (expr_vector: broadcast, contiguous, from the repacked copy the analysis charges, or
gathered) and issues one ``simd_vmad``; any other body the parser found vectorisable
(tuner/expr/parse.py ``_profile``) is printed by expr_vector, so that the lanes the space offers are
the lanes the C issues. An output that moves with the loop is loaded, computed and stored as vectors
(lane by lane when it is strided along it); one that does not (the lanes run along a reduction)
keeps a vector accumulator combined with the reducer (+, max, min) and folds its lanes into the
output at the end. The predicate is a prefix in the loop variable (``base + x < extent``), so full
vectors run while the last lane is inside and a scalar tail finishes the rest.
"""

from __future__ import annotations

from typing import Any

from tuner.ir.cprint import vector
from tuner.ir.cprint.expr import cexpr
from tuner.ir.cprint.expr_vector import NotVector, Tiles, Vectoriser
from tuner.ir.cprint.lanes import guarded_store, unit_stride, update_body
from tuner.ir.tir import const_int, free_vars, kind

_COMBINE = ("Add", "Max", "Min")


def vector_loop(pr: Tiles, node: Any, ctx: Any, w: int) -> bool:
    """Print ``node`` as a vector loop of ``w`` lanes; False (print nothing) when it has no vector form."""
    return _update_loop(pr, node, ctx, w) or _expr_loop(pr, node, ctx, w)


def _update_loop(pr: Tiles, node: Any, ctx: Any, w: int) -> bool:
    """The update ``c += a * b``: two operand vectors and one multiply-add."""
    found = update_body(node)
    if found is None:
        return False
    cond, body, ops = found
    var = node.loop_var.name
    v = Vectoriser(pr, var, w, packed=True)
    ty, vt, vmad = pr.ty, v.vt, vector.fma(pr.ty)
    lines = [f"{vt} _va = {v.load(ops[0])}, _vb = {v.load(ops[1])};"]
    reduction = not any(var in free_vars(i) for i in body.indices)
    if reduction:
        lines.append(f"_acc = {vmad}(_va, _vb, _acc);")
    else:
        store = pr.ldm_ref(body.buffer, list(body.indices))
        if unit_stride(list(body.indices), var, pr.ldm_shape(body.buffer)):
            lines += [f"{vt} _vc = {vector.load_value(vt, '&' + store)};", f"_vc = {vmad}(_va, _vb, _vc);",
                      f"simd_storeu(_vc, &{store});"]
        else:
            vmul = f"simd_vmul{vector.suffix(ty)}"
            lines += [vector.lanes_array(ty, w), f"{vt} _vc = {vmul}(_va, _vb);", "simd_storeu(_vc, _l);"]
            lines += [f"{pr.ldm_ref(body.buffer, list(body.indices), {var: ln})} += _l[{i}];"
                      for i, ln in enumerate(v.lanes)]
    _emit(pr, node, ctx, w, cond, body, lines, "0" if reduction else None, "Add")
    return True


def _expr_loop(pr: Tiles, node: Any, ctx: Any, w: int) -> bool:
    """Any other vectorisable body (expr_vector)."""
    found = guarded_store(node)
    if found is None:
        return False
    cond, store = found
    var = node.loop_var.name
    val = store.value
    out = str(store.buffer.name)
    v = Vectoriser(pr, var, w)
    reduction = not any(var in free_vars(i) for i in store.indices)
    try:
        if reduction:
            # c = c (+|max|min) term, term not reading c: a vector accumulator of the term
            if kind(val) not in _COMBINE:
                return False
            acc_side, term = (val.a, val.b) if kind(val.a) == "TensorLoad" and str(val.a.source.name) == out \
                else (val.b, val.a)
            if kind(acc_side) != "TensorLoad" or str(acc_side.source.name) != out or _reads(term, out):
                return False
            step = (f"{vector.fma(v.ty)}({v.vec(term.a)}, {v.vec(term.b)}, _acc)" if kind(val) == "Add"
                    and kind(term) == "Mul" else
                    f"simd_vadd{v.sfx}(_acc, {v.vec(term)})" if kind(val) == "Add" else
                    v.select(kind(val), "_acc", v.vec(term)))
        else:
            value = v.vec(val)
    except NotVector:
        return False
    ty = pr.ty
    lines = list(v.pre)
    init = None
    if reduction:
        lines.append(f"_acc = {step};")
        # sum: from zero; max/min: from the output's current value (idempotent)
        init = "0" if kind(val) == "Add" else pr.ldm_ref(store.buffer, list(store.indices), {var: "0"})
    else:
        ref = pr.ldm_ref(store.buffer, list(store.indices))
        if unit_stride(list(store.indices), var, pr.ldm_shape(store.buffer)):
            lines.append(f"simd_storeu({value}, &{ref});")
        else:  # an output strided along the lanes: stored lane by lane
            lines += [vector.lanes_array(ty, w), f"simd_storeu({value}, _l);"]
            lines += [f"{pr.ldm_ref(store.buffer, list(store.indices), {var: ln})} = _l[{i}];"
                      for i, ln in enumerate(v.lanes)]
    _emit(pr, node, ctx, w, cond, store, lines, init, kind(val))
    return True


def _emit(pr: Tiles, node: Any, ctx: Any, w: int, cond: Any, store: Any, body: list[str], init: str | None,
          combine: str) -> None:
    """The loop: full vectors of ``body`` while the last lane is inside, then the scalar tail. With
    ``init`` the lanes run along a reduction: a vector accumulator ``_acc`` starts at ``init`` in
    every lane and its lanes are folded into the output with ``combine`` (+, max, min) after."""
    var = node.loop_var.name
    ext = const_int(node.extent)
    ty, vt = pr.ty, vector.vector_type(pr.ty, w)
    last = {var: f"({var} + {w - 1})"}
    guard = f" && {cexpr(cond, last, lambda e: pr.load(e, last))}" if cond is not None else ""
    ctx.emit("{")
    ctx.depth += 1
    ctx.emit(f"int {var} = 0;")
    if init is not None:
        ctx.emit(f"{vt} _acc = {vector.splat(vt, init, w)};")
    ctx.emit(f"for (; {var} + {w} <= {ext}{guard}; {var} += {w}) {{")
    ctx.depth += 1
    ctx.emit(*body)
    ctx.depth -= 1
    ctx.emit("}")
    if init is not None:
        ref = pr.ldm_ref(store.buffer, list(store.indices), {var: "0"})
        fold = (f"{ref} += {' + '.join(f'_l[{i}]' for i in range(w))};" if combine == "Add" else
                f"{ref} = " + _fold(combine, [f"_l[{i}]" for i in range(w)]) + ";")
        ctx.emit(f"if ({var} > 0) {{", f"  {vector.lanes_array(ty, w)}", "  simd_storeu(_acc, _l);", f"  {fold}",
                 "}")
    ctx.emit(f"for (; {var} < {ext}; {var}++) {{")
    ctx.depth += 1
    stmt = f"{pr.ldm_ref(store.buffer, list(store.indices))} = {cexpr(store.value, {}, pr.load)};"
    ctx.emit(f"if ({cexpr(cond, {}, pr.load)}) {stmt}" if cond is not None else stmt)
    ctx.depth -= 1
    ctx.emit("}")
    ctx.depth -= 1
    ctx.emit("}")


def _reads(e: Any, name: str) -> bool:
    """Whether expression ``e`` loads buffer ``name``."""
    k = kind(e)
    if k == "TensorLoad":
        return str(e.source.name) == name
    kids = [getattr(e, f) for f in ("a", "b", "value") if hasattr(e, f)] + list(getattr(e, "args", []) or [])
    return any(_reads(c, name) for c in kids if hasattr(c, "same_as"))


def _fold(op: str, xs: list[str]) -> str:
    """max/min of the lanes (the accumulator started from the output, so they cover it)."""
    acc = xs[0]
    for x in xs[1:]:
        acc = f"SW_{op.upper()}({acc}, {x})"
    return acc
