"""Vector code for an expression operator's innermost loop whose body is not ``c += a * b``.

tuner/codegen/simd.py prints the plain update (and its micro-kernel); this prints any other body the
parser found vectorisable (tuner/expr/parse.py ``_profile``: loads, constants, + - * /, max/min,
sqrt/fabs), so that the lanes the space offers are the lanes the C issues. Lanes run ``w``
consecutive iterations of the loop variable:

* every load becomes a vector: broadcast when it does not move with the loop, ``SW_VLOADU`` when it
  moves with unit stride in its innermost index, else gathered lane by lane (what the expression
  analysis charges for these bodies: no repacked copy);
* an add or subtract of a product is one ``simd_vmad``/``simd_vmsd``/``simd_vnmad``, max/min a
  compare and a select, the others their vector instruction -- the instruction count ``_profile``
  gives the analysis;
* an output that moves with the loop is loaded, computed and stored as vectors (lane by lane when it
  is strided along it); one that does not (the lanes run along a reduction) keeps a vector
  accumulator combined with the reducer (+, max, min) and folds its lanes into the output at the end.

A prefix predicate ``base + x < extent`` runs full vectors while the last lane is inside, and the
scalar tail finishes the rest, as simd.py does.
"""

from __future__ import annotations

from typing import Any

from tuner.codegen.simd import _unit_stride
from tuner.expr.intrinsics import INTRINSICS, vector_function
from tuner.ir.tir import cexpr, const_int, free_vars, kind

_VOP = {"Add": "simd_vadd", "Sub": "simd_vsub", "Mul": "simd_vmul", "Div": "simd_vdiv"}
_COMBINE = ("Add", "Max", "Min")


class _NotVector(Exception):
    """A node with no vector form: the loop is printed scalar (the parser gave it simd = 1)."""


class _Vectoriser:
    def __init__(self, pr: Any, var: str, w: int) -> None:
        self.pr, self.var, self.w = pr, var, w
        self.ty = pr.ty
        self.vt = f"{pr.ty}v{w}"
        self.sfx = "s" if pr.ty == "float" else "d"
        self.dtype = "float32" if pr.ty == "float" else "float64"
        self.lanes = [f"({var} + {i})" for i in range(w)]
        self.pre: list[str] = []  # temporaries the loop body computes first (a select reads its operands twice)

    def tmp(self, x: str) -> str:
        if x.isidentifier():
            return x
        name = f"_v{len(self.pre)}"
        self.pre.append(f"const {self.vt} {name} = {x};")
        return name

    def splat(self, x: str) -> str:
        return f"simd_set_{self.vt}({', '.join([x] * self.w)})"

    def load(self, e: Any) -> str:
        pr, var = self.pr, self.var
        idx = list(e.indices)
        if not any(var in free_vars(i) for i in idx):
            return self.splat(pr._load(e))
        if _unit_stride(idx, var, pr.ldm_shape(e.source)):
            return f"SW_VLOADU({self.vt}, &{pr._load(e)})"
        return f"simd_set_{self.vt}({', '.join(pr._load(e, {var: ln}) for ln in self.lanes)})"

    def select(self, op: str, a: str, b: str) -> str:
        """max/min as a compare and a select (a < b ? b : a for max)."""
        a, b = self.tmp(a), self.tmp(b)
        lt = f"simd_vfcmplt({a}, {b})"
        return f"simd_vselne({lt}, {b}, {a})" if op == "Max" else f"simd_vselne({lt}, {a}, {b})"

    def vec(self, e: Any) -> str:
        k = kind(e)
        if k == "TensorLoad":
            return self.load(e)
        if k in ("FloatImm", "IntImm"):
            return self.splat(repr(float(e.value)))
        if k == "Cast":
            if kind(e.value) not in ("FloatImm", "IntImm") and str(e.dtype) != self.dtype:
                raise _NotVector(k)
            return self.vec(e.value)
        if k in ("Add", "Sub"):
            for mul, other, first in ((e.b, e.a, False), (e.a, e.b, True)):
                if kind(mul) == "Mul":
                    x, y, z = self.vec(mul.a), self.vec(mul.b), self.vec(other)
                    if k == "Add":
                        return f"simd_vma{self.sfx}({x}, {y}, {z})"
                    # x*y - z (the product first) or z - x*y
                    return f"simd_vms{self.sfx}({x}, {y}, {z})" if first else f"simd_vnma{self.sfx}({x}, {y}, {z})"
            return f"{_VOP[k]}{self.sfx}({self.vec(e.a)}, {self.vec(e.b)})"
        if k in ("Mul", "Div"):
            return f"{_VOP[k]}{self.sfx}({self.vec(e.a)}, {self.vec(e.b)})"
        if k in ("Max", "Min"):
            return self.select(k, self.vec(e.a), self.vec(e.b))
        if k == "Call":
            op = str(e.op.name)
            fn = vector_function(op, self.dtype) if op in INTRINSICS else None
            if fn is None or len(e.args) != 1:
                raise _NotVector(op)
            return f"{fn}({self.vec(e.args[0])})"
        raise _NotVector(k)


def _body(node: Any) -> tuple[Any, Any] | None:
    body, cond = node.body, None
    if kind(body) == "IfThenElse" and body.else_case is None:
        cond, body = body.condition, body.then_case
    if kind(body) != "BufferStore":
        return None
    if cond is not None and kind(cond) == "IntImm":
        cond = None
    return cond, body


def _reads(e: Any, name: str) -> bool:
    """Whether expression ``e`` loads buffer ``name``."""
    k = kind(e)
    if k == "TensorLoad":
        return str(e.source.name) == name
    kids = [getattr(e, f) for f in ("a", "b", "value") if hasattr(e, f)] + list(getattr(e, "args", []) or [])
    return any(_reads(c, name) for c in kids if hasattr(c, "same_as"))


def expr_simd_loop(pr: Any, node: Any, ctx: Any, w: int) -> bool:
    """Print ``node`` as a vector loop of ``w`` lanes; False (print nothing) when it has no vector form."""
    found = _body(node)
    if found is None:
        return False
    cond, store = found
    var = node.loop_var.name
    val = store.value
    out = str(store.buffer.name)
    v = _Vectoriser(pr, var, w)
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
            step = (f"simd_vma{v.sfx}({v.vec(term.a)}, {v.vec(term.b)}, _acc)" if kind(val) == "Add"
                    and kind(term) == "Mul" else
                    f"simd_vadd{v.sfx}(_acc, {v.vec(term)})" if kind(val) == "Add" else
                    v.select(kind(val), "_acc", v.vec(term)))
        else:
            value = v.vec(val)
    except _NotVector:
        return False
    ext = const_int(node.extent)
    ty, vt = pr.ty, v.vt
    last = {var: f"({var} + {w - 1})"}
    guard = f" && {cexpr(cond, last, lambda e: pr._load(e, last))}" if cond is not None else ""
    ctx.emit("{")
    ctx.depth += 1
    ctx.emit(f"int {var} = 0;")
    if reduction:
        # sum: from zero; max/min: from the output's current value (idempotent)
        init = "0" if kind(val) == "Add" else pr._ldm_ref(store.buffer, list(store.indices), {var: "0"})
        ctx.emit(f"{vt} _acc = {v.splat(init)};")
    ctx.emit(f"for (; {var} + {w} <= {ext}{guard}; {var} += {w}) {{")
    ctx.depth += 1
    ctx.emit(*v.pre)
    if reduction:
        ctx.emit(f"_acc = {step};")
    else:
        ref = pr._ldm_ref(store.buffer, list(store.indices))
        if _unit_stride(list(store.indices), var, pr.ldm_shape(store.buffer)):
            ctx.emit(f"simd_storeu({value}, &{ref});")
        else:  # an output strided along the lanes: stored lane by lane
            ctx.emit(f"{ty} _l[{w}] __attribute__((aligned(64)));", f"simd_storeu({value}, _l);")
            for i, ln in enumerate(v.lanes):
                ctx.emit(f"{pr._ldm_ref(store.buffer, list(store.indices), {var: ln})} = _l[{i}];")
    ctx.depth -= 1
    ctx.emit("}")
    if reduction:
        ref = pr._ldm_ref(store.buffer, list(store.indices), {var: "0"})
        fold = (f"{ref} += {' + '.join(f'_l[{i}]' for i in range(w))};" if kind(val) == "Add" else
                f"{ref} = " + _fold(kind(val), [f"_l[{i}]" for i in range(w)]) + ";")
        ctx.emit(f"if ({var} > 0) {{", f"  {ty} _l[{w}] __attribute__((aligned(64)));",
                 "  simd_storeu(_acc, _l);", f"  {fold}", "}")
    ctx.emit(f"for (; {var} < {ext}; {var}++) {{")
    ctx.depth += 1
    stmt = f"{pr._ldm_ref(store.buffer, list(store.indices))} = {cexpr(val, {}, pr._load)};"
    ctx.emit(f"if ({cexpr(cond, {}, pr._load)}) {stmt}" if cond is not None else stmt)
    ctx.depth -= 1
    ctx.emit("}")
    ctx.depth -= 1
    ctx.emit("}")
    return True


def _fold(op: str, xs: list[str]) -> str:
    """max/min of the lanes (the accumulator started from the output, so they cover it)."""
    acc = xs[0]
    for x in xs[1:]:
        acc = f"SW_{op.upper()}({acc}, {x})"
    return acc
