"""SIMD printing of a legalized TIR PrimFunc: the ``lanes`` knob of tuner.ir.cprint.prim_func.print_prim_func.

A memory-bound CPE kernel's body (tuner/aot/cpe_ops.py) is printed by tuner.ir.cprint.legalized as scalar C. With
``lanes`` = 4 or 8 this printer writes the loops a Sunway programmer would vectorise with the vector
types of simd.h (floatv4/doublev4 for 4 lanes, floatv8/doublev8 for 8; on SW26010 both float and
double have 4 lanes, the caller picks ``lanes`` from Target.simd_widths) and leaves every other loop
exactly as the scalar printer prints it. The rules:

1. Only an innermost ``For`` (after legalized.lower_for_mpe) with a constant extent that is a multiple
   of ``lanes``, unit step, and a body of BufferStores is vectorised; no peel loop is written, so a
   loop with a remainder stays scalar. Every buffer access, flattened row-major, must be unit-stride
   in the loop variable (coefficient exactly 1) or independent of it; any other access (stride != 1,
   an index through floordiv/floormod of the loop variable) leaves the loop scalar. A buffer the loop
   writes must be accessed at one index only (no dependence between lanes). The one condition allowed
   is the first-iteration init TVM's legalized reductions carry (``if (k == lo) buf[i] = init``,
   possibly and-ed with conditions on outer variables): it becomes lane 0 of the accumulator.
2. Reductions: a store whose index does not depend on the loop variable and whose value is
   ``buf[i] + e``, ``max(buf[i], e)`` or ``min(buf[i], e)`` accumulates in a vector register,
   initialised with buf's value (or the init) in lane 0 and the identity (0, -inf, +inf) in the
   others, and is folded into ``buf[i]`` after the loop by a pairwise horizontal reduction (lanes-1
   arith). Float sums are reordered: results differ from the scalar order by rounding.
3. ``+ - * /`` are GCC vector operators (a vector divide is charged as one transcendental); min/max
   are a compare and a select (``simd_vfcmplt`` + ``simd_vseleq``, NaN-exact with the scalar SWG_MIN/
   SWG_MAX; charged one arith per vector like the scalar SWG_* are). There is no vector libm on the
   CPE: exp, erf, tanh, sqrt, rsqrt, sigmoid... are the scalar C call on each lane (``v[0]`` ..
   ``v[lanes-1]``, charged ``lanes`` transcendental per vector; the lane moves are not charged), and
   any other float expression (casts, selects, isnan, if_then_else) is the scalar code on each lane.
   A loop-invariant sub-expression (not using the loop variable, reading no buffer the loop writes)
   is computed once before the loop and splatted: a load with ``simd_loade`` (load-and-replicate, one
   load), a computed value or a constant with ``simd_set_*`` (one arith per splat).
4. Alignment: every pointer parameter and every scratch array is assumed 64-byte aligned (the caller
   guarantees it for the parameters; this printer adds ``__attribute__((aligned(64)))`` to the scratch
   declarations). A vector access is aligned when its flattened offset is provably a multiple of
   ``lanes`` (the constant part and every other variable's coefficient): ``simd_load``/``simd_store``
   then, else ``simd_loadu``/``simd_storeu``, charged as 2 loads/stores.
5. Work: one load/store/arith per vector instruction; the scalar parts are counted as the scalar printer counts
   them. ``CFunction.vector_loops`` is how many loops were vectorised; with none the result is the
   scalar printer's.
"""

from __future__ import annotations

from typing import Any

from tuner.ir.cprint import vector
from tuner.ir.cprint.dtypes import ctype_of, dtype_of
from tuner.ir.cprint.functions import is_math, math_call, op_name
from tuner.ir.cprint.legalized import LegalizedPrinter, Work
from tuner.ir.cprint.lines import for_line
from tuner.ir.graph import AotError
from tuner.ir.tir import kind

_SUBS = ("a", "b", "value", "condition", "true_value", "false_value")
# Assumption [A]: an unaligned vector load/store costs two aligned ones (SW26010's unaligned access
# is a sequence of aligned accesses); FACTS gives no figure.
UNALIGNED_COST = 2


class _NotVector(Exception):
    """This loop stays scalar (the reason is the message)."""


def _children(e: Any) -> list[Any]:
    out = [getattr(e, a) for a in _SUBS if getattr(e, a, None) is not None and hasattr(getattr(e, a), "ty")]
    if kind(e) == "Call":
        out += list(e.args)
    if kind(e) == "TensorLoad":
        out += list(e.indices)
    return out


def _uses(e: Any, var: Any) -> bool:
    """Whether expression ``e`` mentions variable ``var``."""
    if kind(e) == "Var":
        return bool(e.same_as(var))
    return any(_uses(c, var) for c in _children(e))


def _loads(e: Any, out: list[Any]) -> list[Any]:
    """Every TensorLoad in ``e`` (outermost first)."""
    if kind(e) == "TensorLoad":
        out.append(e)
    for c in _children(e):
        _loads(c, out)
    return out


def affine(e: Any) -> dict[Any, int] | None:
    """``e`` as {variable: coefficient, None: constant}, or None when it is not affine in its
    variables with integer coefficients (floordiv, floormod, a product of variables...)."""
    k = kind(e)
    if k == "IntImm":
        return {None: int(e.value)}
    if k == "Var":
        return {e: 1}
    if k == "Cast" and not dtype_of(e).startswith("float"):
        return affine(e.value)
    if k in ("Add", "Sub"):
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        sign = 1 if k == "Add" else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return out
    if k == "Mul":
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        if set(a) == {None}:
            a, b = b, a
        if set(b) != {None}:
            return None
        return {v: c * b[None] for v, c in a.items()}
    return None


def flat_offset(indices: list[Any], shape: list[int]) -> tuple[dict[Any, int], list[Any]]:
    """The row-major flattened offset of ``indices`` into a buffer of ``shape``: its affine part and
    the (stride-scaled) index expressions that are not affine."""
    lin: dict[Any, int] = {}
    rest: list[Any] = []
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        a = affine(indices[d])
        if a is None:
            rest.append(indices[d])
        else:
            for v, c in a.items():
                lin[v] = lin.get(v, 0) + c * stride
        stride *= shape[d]
    return lin, rest


def is_aligned(lin: dict[Any, int], rest: list[Any], loop_var: Any, lo: int, lanes: int) -> bool:
    """Whether a unit-stride access with flattened offset ``lin`` (+ the non-affine ``rest``) starts
    every vector on a multiple of ``lanes`` elements, the loop variable running lo, lo+lanes, ..."""
    if rest:
        return False  # a floordiv/floormod term: not provable
    const = lin.get(None, 0) + lin.get(loop_var, 0) * lo
    return const % lanes == 0 and all(c % lanes == 0 for v, c in lin.items() if v is not None
                                      and not v.same_as(loop_var))


class SimdPrinter(LegalizedPrinter):
    """The scalar printer with the innermost loops that qualify (module docstring) vectorised."""

    def __init__(self, func: Any, name: str, store_type: str, ldm_prefix: str | None, lanes: int) -> None:
        super().__init__(func, name, store_type, ldm_prefix)
        if lanes not in (4, 8):
            raise AotError(f"{name}: {lanes} SIMD lanes (4 or 8 supported)")
        self.lanes = lanes
        self.ntmp = 0  # vector temporaries named so far
        # the loop being vectorised
        self.loop_var: Any = None
        self.lo = 0
        self.dtype, self.ctype, self.vtype = "", "", ""
        self.written: dict[str, list[Any]] = {}  # buffer C name -> the indices the loop stores it at
        self.pre: list[str] = []  # before the loop: accumulators, splats of loop invariants
        self.body: list[str] = []
        self.cache: dict[tuple[str, str], str] = {}  # (buffer, offset) -> vector register holding it
        self.hoisted: dict[str, str] = {}  # loop-invariant scalar expression -> its splat

    def finish(self) -> None:
        if self.vector_loops:  # vector loads/stores of the scratch need it (rule 4)
            self.ldm_decls = [d.replace("];", "] __attribute__((aligned(64)));") for d in self.ldm_decls]
            self.statics = [d.replace("];", "] __attribute__((aligned(64)));", 1) for d in self.statics]

    def stmt(self, s: Any, depth: int) -> None:
        if kind(s) == "For" and kind(s.body) in ("BufferStore", "SeqStmt"):
            saved = (len(self.lines), Work(**vars(self.work)), dict(self.vars), self.ntmp, list(self.trips))
            try:
                self._vector_for(s, depth)
                self.vector_loops += 1
                return
            except _NotVector:
                del self.lines[saved[0]:]
                self.work, self.vars, self.ntmp, self.trips = saved[1], saved[2], saved[3], saved[4]
        super().stmt(s, depth)

    # ---- the vector loop ----------------------------------------------------------------------
    def _tmp(self, prefix: str = "vt") -> str:
        self.ntmp += 1
        return f"{prefix}{self.ntmp - 1}"

    def _access(self, b: Any, indices: list[Any]) -> tuple[int, bool]:
        """(coefficient of the loop variable in the flattened offset: 0 or 1, aligned)."""
        _, shape, _ = self.buffer(b)
        lin, rest = flat_offset(indices, shape)
        if any(_uses(r, self.loop_var) for r in rest):
            raise _NotVector(f"{b.name}: index through a non-affine function of the loop variable")
        coef = lin.get(self.loop_var, 0)
        if coef not in (0, 1):
            raise _NotVector(f"{b.name}: stride {coef} in the loop variable")
        return coef, coef == 1 and is_aligned(lin, rest, self.loop_var, self.lo, self.lanes)

    def _vector_buffer(self, b: Any) -> None:
        cname, _, dt = self.buffer(b)
        if dt != self.dtype:
            raise _NotVector(f"{b.name} is {dt}, not {self.dtype}")
        if self.is_param(b) and self.store in ("float", "double") and self.store != self.ctype:
            raise _NotVector(f"{b.name} is stored as {self.store}")

    def _vector_for(self, s: Any, depth: int) -> None:
        step = getattr(s, "step", None)
        if step is not None and not (kind(step) == "IntImm" and int(step.value) == 1):
            raise _NotVector("step")
        if kind(s.extent) != "IntImm" or kind(s.min) != "IntImm":
            raise _NotVector("bounds not constant")
        ext, self.lo = int(s.extent.value), int(s.min.value)
        if ext <= 0 or ext % self.lanes:
            raise _NotVector(f"extent {ext} is not a multiple of {self.lanes}")
        items = list(s.body.seq) if kind(s.body) == "SeqStmt" else [s.body]
        stores = [x for x in items if kind(x) == "BufferStore"]
        if not stores or any(kind(x) not in ("BufferStore", "IfThenElse") for x in items):
            raise _NotVector("body is not a sequence of stores")
        self.dtype = str(stores[0].buffer.dtype)
        if self.dtype not in ("float32", "float64"):
            raise _NotVector(f"stores {self.dtype}")
        self.ctype = ctype_of(self.dtype)
        self.vtype = vector.vector_type(self.ctype, self.lanes)
        self.loop_var = s.loop_var
        # --- classify the stores, check the dependences ---
        reductions: dict[str, tuple[Any, str, Any]] = {}  # buffer C name -> (store, op, operand e)
        written: dict[str, list[Any]] = {}  # buffer C name -> the indices it is accessed at
        for x in stores:
            self._vector_buffer(x.buffer)
            coef, _ = self._access(x.buffer, list(x.indices))
            cname = self.buffer(x.buffer)[0]
            if coef == 0:
                red = self._reduction(x)
                if red is None or cname in reductions or cname in written:
                    raise _NotVector(f"{x.buffer.name}: a store independent of the loop variable")
                reductions[cname] = (x, red[0], red[1])
            elif cname in reductions:
                raise _NotVector(f"{x.buffer.name}: reduced and stored")
            written.setdefault(cname, []).append(list(x.indices))
        inits: dict[str, tuple[Any, list[Any]]] = {}  # reduction -> (init store, outer conditions)
        for p, x in enumerate(items):
            if kind(x) == "IfThenElse":
                cname, init, conds = self._init(x, reductions, inits)
                if not any(st.same_as(reductions[cname][0]) for st in items[p + 1:]):
                    raise _NotVector("a reduction init after the reduction")
                inits[cname] = (init, conds)
        for x in stores:
            cname = self.buffer(x.buffer)[0]
            own = reductions[cname][2] if cname in reductions else None
            for ld in _loads(own if own is not None else x.value, []):
                self._check_load(ld, written, reductions)
            for i in x.indices:
                if _loads(i, []):
                    raise _NotVector("a load in an index")
        for init, conds in inits.values():
            for e in [init.value, *conds, *init.indices]:
                if any(self.buffer(ld.source)[0] in written for ld in _loads(e, [])) or _uses(e, s.loop_var):
                    raise _NotVector("reduction init reads what the loop writes")
        # --- print ---
        v = self.bind(s.loop_var)
        self.written, self.pre, self.body, self.cache, self.hoisted = written, [], [], {}, {}
        outer = self.trips[-1]
        accs: dict[str, str] = {}
        for cname, (x, op, _) in reductions.items():
            acc = self._tmp("acc")
            accs[cname] = acc
            ident = {"Add": "0.0f" if self.ctype == "float" else "0.0", "Max": "(-INFINITY)",
                     "Min": "INFINITY"}[op]
            if cname in inits and not inits[cname][1]:  # the init value itself goes to lane 0
                first = self.expr(inits[cname][0].value)
                self.count(inits[cname][0].value)
            else:
                if cname in inits:  # an init on outer variables too: done before the loop
                    init, conds = inits[cname]
                    cond = " && ".join(self.expr(c) for c in conds)
                    self.pre.append(f"if ({cond}) {{ {self.index(init.buffer, list(init.indices))} = "
                                    f"{self.expr(init.value)}; }}")
                    self.work.stores += outer
                    self.count(init.value)
                first = self.index(x.buffer, list(x.indices))
                self.work.loads += outer
            self.pre.append(f"{self.vtype} {acc} = {self._set([first] + [ident] * (self.lanes - 1))};")
            self.work.arith += outer
        self.trips.append(outer * (ext // self.lanes))
        n = self.trips[-1]
        for x in stores:
            cname = self.buffer(x.buffer)[0]
            if cname in reductions:
                _, op, e = reductions[cname]
                acc = accs[cname]
                val = self._name(self.vexpr(e))
                upd = f"{acc} + {val}" if op == "Add" else vector.select_exact(op, acc, val)
                self.body.append(f"{acc} = {upd};")
                self.work.arith += n
                continue
            val = self._name(self.vexpr(x.value))
            _, aligned = self._access(x.buffer, list(x.indices))
            self.body.append(vector.store(val, f"&{self.index(x.buffer, list(x.indices))}", aligned))
            self.work.stores += n * (1 if aligned else UNALIGNED_COST)
            self.cache[(cname, self.index(x.buffer, list(x.indices)))] = val  # store-to-load forwarding
        self.trips.pop()
        post = []
        for cname, (x, op, _) in reductions.items():
            post.append(f"{self.index(x.buffer, list(x.indices))} = {self._fold(accs[cname], op)};")
            self.work.stores += outer
            self.work.arith += outer * (self.lanes - 1)
        lo = self.expr(s.min)
        self.emit(depth, f"/* simd: {ext // self.lanes} iterations of {self.vtype} */")
        for line in self.pre:
            self.emit(depth, line)
        self.emit(depth, for_line("long", v, lo if self.lo else None, f"{ext}L", f"{v} += {self.lanes}"))
        for line in self.body:
            self.emit(depth + 1, line)
        self.emit(depth, "}")
        for line in post:
            self.emit(depth, line)

    def _reduction(self, x: Any) -> tuple[str, Any] | None:
        """(op, operand e) when store ``x`` is ``buf[i] = buf[i] (+|max|min) e``."""
        from tvm_ffi import structural_equal

        k = kind(x.value)
        if k not in ("Add", "Max", "Min"):
            return None
        for own, e in ((x.value.a, x.value.b), (x.value.b, x.value.a)):
            if kind(own) == "TensorLoad" and own.source.same_as(x.buffer) and all(
                    structural_equal(i, j) for i, j in zip(own.indices, x.indices)):
                return k, e
        return None

    def _init(self, x: Any, reductions: dict[str, tuple[Any, str, Any]],
              seen: dict[str, Any]) -> tuple[str, Any, list[Any]]:
        """(reduction, init store, conditions on outer variables) of ``if (k == lo && ...) buf[i] = init``."""
        from tvm_ffi import structural_equal

        t = x.then_case
        if x.else_case is not None or kind(t) != "BufferStore":
            raise _NotVector("a condition in the body")
        cname = self.buffer(t.buffer)[0]
        if cname not in reductions or cname in seen or not all(
                structural_equal(i, j) for i, j in zip(t.indices, reductions[cname][0].indices)):
            raise _NotVector("a condition that is not a reduction's init")
        conds, todo = [], [x.condition]
        while todo:
            c = todo.pop()
            if kind(c) == "And":
                todo += [c.b, c.a]
            else:
                conds.append(c)
        mine = [c for c in conds if _uses(c, self.loop_var)]
        if len(mine) != 1 or kind(mine[0]) != "EQ":
            raise _NotVector("a condition on the loop variable")
        a, b = mine[0].a, mine[0].b
        if kind(a) != "Var":
            a, b = b, a
        if not (kind(a) == "Var" and a.same_as(self.loop_var) and kind(b) == "IntImm" and int(b.value) == self.lo):
            raise _NotVector("a condition on the loop variable")
        return cname, t, [c for c in conds if not _uses(c, self.loop_var)]

    def _check_load(self, ld: Any, written: dict[str, list[Any]], reductions: dict[str, Any]) -> None:
        from tvm_ffi import structural_equal

        cname = self.buffer(ld.source)[0]
        if cname in reductions:
            raise _NotVector(f"{ld.source.name}: a reduction read inside its loop")
        if cname in written and not all(
                all(structural_equal(i, j) for i, j in zip(ld.indices, idx)) for idx in written[cname]):
            raise _NotVector(f"{ld.source.name}: read at another index than it is written")
        self._access(ld.source, list(ld.indices))  # unit stride or independent

    # ---- vector expressions -------------------------------------------------------------------
    def _set(self, lanes: list[str]) -> str:
        return vector.set_lanes(self.vtype, lanes)

    def _name(self, v: str) -> str:
        """``v`` in a named register (simd.h's macros evaluate their arguments more than once)."""
        if v.isidentifier():
            return v
        t = self._tmp()
        self.body.append(f"const {self.vtype} {t} = {v};")
        return t

    def _fold(self, acc: str, op: str) -> str:
        terms = [f"{acc}[{i}]" for i in range(self.lanes)]
        while len(terms) > 1:
            pairs = zip(terms[0::2], terms[1::2])
            terms = [f"({a} + {b})" if op == "Add" else f"SWG_{op.upper()}({a}, {b})" for a, b in pairs]
        return terms[0]

    def _invariant(self, e: Any) -> bool:
        return not _uses(e, self.loop_var) and not any(
            self.buffer(ld.source)[0] in self.written for ld in _loads(e, []))

    def vexpr(self, e: Any) -> str:
        """A vector-valued C expression of float expression ``e`` (lane l = iteration v + l)."""
        k, dt, n = kind(e), dtype_of(e), self.trips[-1]
        if dt != self.dtype:
            raise _NotVector(f"a {dt} value in a {self.dtype} body")
        outer = self.trips[-2]
        if self._invariant(e):  # once before the loop, splatted
            if k == "TensorLoad" and dt == self.dtype and self.buffer(e.source)[2] == dt:
                addr = "&" + self.index(e.source, list(e.indices))
                if addr not in self.hoisted:
                    t = self._tmp()
                    self.pre.append(f"{self.vtype} {t};")
                    self.pre.append(vector.load_replicated(t, addr))
                    self.work.loads += outer
                    self.hoisted[addr] = t
                return self.hoisted[addr]
            scalar = self.expr(e)
            if scalar not in self.hoisted:
                t = self._tmp()
                if k == "FloatImm":
                    self.pre.append(f"const {self.vtype} {t} = {self._set([scalar] * self.lanes)};")
                else:
                    sv = self._tmp("vs")
                    self.pre.append(f"const {self.ctype} {sv} = {scalar};")
                    self.pre.append(f"const {self.vtype} {t} = {self._set([sv] * self.lanes)};")
                    self.trips.append(outer)
                    self.count(e)
                    self.trips.pop()
                self.work.arith += outer
                self.hoisted[scalar] = t
            return self.hoisted[scalar]
        if k == "TensorLoad" and self.buffer(e.source)[2] == dt:
            self._vector_buffer(e.source)
            ref = self.index(e.source, list(e.indices))
            key = (self.buffer(e.source)[0], ref)
            if key not in self.cache:
                _, aligned = self._access(e.source, list(e.indices))
                t = self._tmp()
                self.body.append(f"{self.vtype} {t};")
                self.body.append(vector.load(t, f"&{ref}", aligned))
                self.work.loads += n * (1 if aligned else UNALIGNED_COST)
                self.cache[key] = t
            return self.cache[key]
        if k in ("Add", "Sub", "Mul", "Div"):
            a, b = self.vexpr(e.a), self.vexpr(e.b)
            if k == "Div":
                self.work.transcendental += n
            else:
                self.work.arith += n
            return f"({a} {dict(Add='+', Sub='-', Mul='*', Div='/')[k]} {b})"
        if k in ("Min", "Max"):
            a, b = self._name(self.vexpr(e.a)), self._name(self.vexpr(e.b))
            self.work.arith += n
            return vector.select_exact(k, a, b)
        if k == "Call":
            op = op_name(e)
            if is_math(op) and all(dtype_of(a) == dt for a in e.args):
                args = [self._name(self.vexpr(a)) for a in e.args]
                self.work.transcendental += n * self.lanes
                return self._set([math_call(op, [f"{a}[{i}]" for a in args], self.dtype) for i in range(self.lanes)])
        if k == "Select":  # both sides are evaluated in TIR: vectors, the condition per lane
            a, b = self._name(self.vexpr(e.true_value)), self._name(self.vexpr(e.false_value))
            conds = self._lanes(e.condition)
            self.work.arith += n * self.lanes
            return self._set([f"({c} ? {a}[{i}] : {b}[{i}])" for i, c in enumerate(conds)])
        return self._set(self._lanes(e))

    def _lanes(self, e: Any) -> list[str]:
        """The scalar code of ``e`` once per lane, the loop variable at v + l (no vector form)."""
        v = self.vars[self.loop_var]
        lanes = []
        try:
            for i in range(self.lanes):
                self.vars[self.loop_var] = f"({v} + {i}L)"
                lanes.append(self.expr(e))
        finally:
            self.vars[self.loop_var] = v
        self.trips.append(self.trips[-1] * self.lanes)
        self.count(e)
        self.trips.pop()
        return lanes

