"""SIMD code for the innermost compute loop (annotated ``swtune.simd`` = lanes).

The loop body must be the update ``c[..] = c[..] + a[..] * b[..]`` (optionally under TVM's bound
predicate). Lanes run ``w`` consecutive iterations: an operand that does not depend on the loop is
broadcast, one that is contiguous along it (unit step in its innermost LDM dimension) is loaded with
``simd_loadu``, one strided along it is read from its repacked LDM copy (:func:`gathered_dims`, the
packing the analysis accounts for), any other is gathered lane by lane. A
reduction loop (c independent of the loop var) keeps a vector accumulator and sums its lanes at the
end. The predicate is a prefix in the loop variable (``base + x < extent``), so full vectors run while
the last lane is inside and a scalar tail finishes the rest.
"""

from __future__ import annotations

import random
from typing import Any

from tuner.ir.tir import cexpr, const_int, evaluate, free_vars, kind


def _vtype(ty: str, w: int) -> str:
    return f"{ty}v{w}"


def _unit_stride(load_indices: list, var: str, shape: list[int] | None = None) -> bool:
    """The loop var appears only in the innermost index, with step 1. With the buffer's ``shape``,
    trailing dimensions of extent 1 (a 1x1 conv's r, s) do not count: the lanes are contiguous in
    LDM as they are for the analysis (tuner/space/ops.py inner_access), so no repacked copy is needed."""
    if shape is not None:
        n = len(load_indices)
        while n > 1 and shape[n - 1] == 1:
            n -= 1
        load_indices = list(load_indices[:n])
    if any(var in free_vars(i) for i in load_indices[:-1]):
        return False
    return _step(load_indices[-1], var) == 1


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
        if _unit_stride(idx, var, pr.ldm_shape(load.source)):
            return f"SW_VLOADU({vt}, &{pr._load(load)})"
        if pr.roles.get(load.source.name) in pr.pack:  # the repacked copy: lanes contiguous
            return f"SW_VLOADU({vt}, &{pr._pk_ref(load)})"
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
        if _unit_stride(list(body.indices), var, pr.ldm_shape(body.buffer)):
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


_LANE_SPAN = 17  # consecutive loop values an index is checked over: every vector width (<= 16 lanes) and more


def _step(index: Any, var: str) -> int | None:
    """How far ``index`` moves when ``var`` grows by one (None: not affine in it). Checked over
    consecutive values of ``var`` from several starts, the other variables random: an index such as
    ``(4*t + x) // 2`` looks affine between two chosen points but steps 0, 1, 0, 1 along the lanes
    (a grouped conv's group index), and lanes of it are not one contiguous vector."""
    names = sorted(free_vars(index))
    rnd = random.Random(1)
    step = None
    for _ in range(4):
        env = {n: rnd.randrange(0, 7) for n in names}
        start = rnd.randrange(0, 7)
        values = []
        for x in range(start, start + _LANE_SPAN):
            env[var] = x
            values.append(evaluate(index, env))
        for d in (b - a for a, b in zip(values, values[1:])):
            if step is not None and d != step:
                return None
            step = d
    return step


def _update(node: Any) -> tuple[Any, Any, list] | None:
    """(predicate or None, store, [operand loads]) of a loop body ``c = c + x * y``, else None."""
    body, cond = node.body, None
    if kind(body) == "IfThenElse" and body.else_case is None:
        cond, body = body.condition, body.then_case
    if kind(body) != "BufferStore":
        return None
    val = body.value
    if kind(val) != "Add" or kind(val.b) != "Mul" or kind(val.a) != "TensorLoad":
        return None
    ops = [val.b.a, val.b.b]
    if any(kind(o) != "TensorLoad" for o in ops) or val.a.source.name != body.buffer.name:
        return None
    if cond is not None and kind(cond) == "IntImm":
        cond = None
    return cond, body, ops


def gathered_dims(func_body: Any, roles: dict[str, str]) -> dict[str, int]:
    """Role -> LDM box dimension of each operand a vector loop reads strided along its lanes.

    Such an operand is repacked after its fetch into an LDM copy with that dimension innermost
    (``{R}_pk``, the packing tuner/space/analysis.py charges), so the loop reads whole vectors. Only
    an operand whose lanes run along one dimension with step 1 can be repacked so; any other stays
    gathered lane by lane."""
    out: dict[str, int] = {}
    bad: set[str] = set()

    def walk(node: Any) -> None:
        k = kind(node)
        if k == "SeqStmt":
            for x in node.seq:
                walk(x)
            return
        if k == "IfThenElse":
            walk(node.then_case)
            if node.else_case is not None:
                walk(node.else_case)
            return
        if k in ("AttrStmt", "LetStmt", "DeclBuffer", "AllocBuffer"):
            if hasattr(node, "body"):
                walk(node.body)
            return
        if k != "For":
            return
        if int(dict(node.annotations).get("swtune.simd", 1)) <= 1:
            walk(node.body)
            return
        up = _update(node)
        if up is None:
            return
        var = node.loop_var.name
        for load in up[2]:
            idx = list(load.indices)
            dims = [d for d, i in enumerate(idx) if var in free_vars(i)]
            role = roles.get(load.source.name)
            if not dims or _unit_stride(idx, var, [const_int(e) for e in load.source.shape]) or role is None:
                continue
            if len(dims) == 1 and _step(idx[dims[0]], var) == 1 and out.get(role, dims[0]) == dims[0]:
                out[role] = dims[0]
            else:
                bad.add(role)

    walk(func_body)
    return {r: d for r, d in out.items() if r not in bad}


def block_nest(node: Any) -> tuple[list, Any, Any, tuple] | None:
    """An ``acc = "reg"`` register-block nest starting at ``node``: (reduction loops, rows loop,
    vector loop, update), where the reduction loops come first and none of their variables indexes
    the output, and the rows loop (annotated ``swtune.unroll``) holds the vector loop. Else None."""
    chain = []
    n = node
    while kind(n) == "For":
        chain.append(n)
        if "swtune.simd" in dict(n.annotations):
            break
        n = n.body
    else:
        return None
    # a unit reduction loop (one element of k per chunk) is gone after lowering: no reduction loops
    if len(chain) < 2 or "swtune.unroll" not in dict(chain[-2].annotations):
        return None
    up = _update(chain[-1])
    if up is None:
        return None
    out_vars = set().union(*(free_vars(i) for i in up[1].indices))
    red = chain[:-2]
    if any(f.loop_var.name in out_vars for f in red):
        return None
    if chain[-2].loop_var.name not in out_vars or chain[-1].loop_var.name not in out_vars:
        return None
    return red, chain[-2], chain[-1], up


def microkernel(pr: Any, node: Any, ctx: Any) -> bool:
    """Print the register block starting at ``node`` as swGEMM's micro-kernel; False if it is none.

    rb_o rows x rb_i vectors of accumulators (``_c{r}_{v}``, plus scalar ones when the block's inner
    extent is not a multiple of ``w``) are loaded from the LDM output tile once, held in registers
    across the reduction loops, and stored once after them. Per reduction step each operand is
    loaded once per row it depends on (``simd_loade`` when it does not move with the lanes) or per
    vector (``simd_load`` from the packed copy, ``simd_loadu`` from a unit-stride tile); then
    rb_o x rb_i ``simd_vmad``. At a ragged tile's edge (predicate terms on output positions)
    the whole block runs and each output is stored under those terms; terms on reduction indices (a
    ragged reduction tile) guard each reduction step; a term on both sends a block that is not wholly
    inside to the lane-by-lane loop.
    """
    nest = block_nest(node)
    if nest is None:
        return False
    red, oi, ii, (cond, store, ops) = nest
    w = int(dict(ii.annotations)["swtune.simd"])
    rb_o, ii_len = const_int(oi.extent), const_int(ii.extent)
    ovar, ivar = oi.loop_var.name, ii.loop_var.name
    nv, rem = (ii_len // w, ii_len % w) if w > 1 else (0, ii_len)
    ty, vt = pr.ty, _vtype(pr.ty, w)
    vmad = "simd_vmad" if ty == "double" else "simd_vmas"
    # The predicate's conjuncts: on output positions only (a ragged tile's edge), the block runs
    # whole -- lanes and rows past the edge accumulate values read from inside the LDM tiles and are
    # never stored -- and each output is stored under them; on reduction indices only (a ragged
    # reduction tile), each reduction step runs under them; a conjunct on both sends the block to the
    # lane-by-lane loop when it is not wholly inside.
    red_vars = {f.loop_var.name for f in red}
    out_c: list[Any] = []
    red_c: list[Any] = []
    mixed: list[Any] = []
    for c in _conjuncts(cond) if cond is not None else []:
        fv = free_vars(c)
        (mixed if fv & red_vars and fv & {ovar, ivar} else red_c if fv & red_vars else out_c).append(c)

    def holds(conds: list, env: dict[str, str]) -> str:
        return " && ".join(f"({cexpr(c, env, lambda e: pr._load(e, env))})" for c in conds) or "1"

    block_vars = [*red, oi, ii]
    first = {f.loop_var.name: "0" for f in block_vars}
    last = {f.loop_var.name: str(const_int(f.extent) - 1) for f in block_vars}
    edge = bool(out_c) and not mixed
    inside = f"{holds(out_c, first)} && {holds(out_c, last)}"
    if mixed:
        ctx.emit(f"if ({holds(_conjuncts(cond), first)} && {holds(_conjuncts(cond), last)}) {{")
        ctx.depth += 1
    ctx.emit("{")
    ctx.depth += 1
    sidx = list(store.indices)
    unit_out = _unit_stride(sidx, ivar, pr.ldm_shape(store.buffer))

    def out_ref(r: int, lane: int) -> str:
        return pr._ldm_ref(store.buffer, sidx, {ovar: str(r), ivar: str(lane)})

    for r in range(rb_o):
        for v in range(nv):
            if unit_out:
                ctx.emit(f"{vt} _c{r}_{v}; simd_loadu(_c{r}_{v}, &{out_ref(r, v * w)});")
            else:  # an output strided along the lanes: w scalar loads, as the model charges
                lanes = ", ".join(out_ref(r, v * w + i) for i in range(w))
                ctx.emit(f"{vt} _c{r}_{v} = simd_set_{vt}({lanes});")
        for i in range(rem):
            ctx.emit(f"{ty} _s{r}_{i} = {out_ref(r, nv * w + i)};")
    for f in red:
        v = f.loop_var.name
        ctx.emit(f"for (int {v} = 0; {v} < {cexpr(f.extent, {})}; {v}++) {{")
        ctx.depth += 1
    if red_c and not mixed:
        ctx.emit(f"if ({holds(red_c, {})}) {{")
        ctx.depth += 1
    names: list[list[list[str]]] = []  # per operand, per row, per vector: the register holding it
    for n, load in enumerate(ops):
        idx = list(load.indices)
        lanes_dep = any(ivar in free_vars(i) for i in idx)
        rows_dep = any(ovar in free_vars(i) for i in idx)
        role = pr.roles[load.source.name]
        per_row: list[list[str]] = []
        for r in range(rb_o if rows_dep else 1):
            regs = []
            for vv in range(nv if lanes_dep else min(nv, 1)):
                reg = f"_x{n}_{r}_{vv}"
                env = {ovar: str(r), ivar: str(vv * w)}
                if not lanes_dep:
                    ctx.emit(f"{vt} {reg}; simd_loade({reg}, &{pr._load(load, env)});")
                elif role in pr.pack:
                    # rows of the packed copy start on a vector when its box is whole vectors (_pack_copy)
                    op = "simd_load" if rem == 0 and pr.pack_aligned(role) else "simd_loadu"
                    ctx.emit(f"{vt} {reg}; {op}({reg}, &{pr._pk_ref(load, env)});")
                elif _unit_stride(idx, ivar, pr.ldm_shape(load.source)):
                    ctx.emit(f"{vt} {reg}; simd_loadu({reg}, &{pr._load(load, env)});")
                else:  # strided and not packable: lane by lane
                    lanes = ", ".join(pr._load(load, {ovar: str(r), ivar: str(vv * w + i)}) for i in range(w))
                    ctx.emit(f"{vt} {reg} = simd_set_{vt}({lanes});")
                regs.append(reg)
            for i in range(rem if lanes_dep else min(rem, 1)):
                reg = f"_y{n}_{r}_{i}"
                ctx.emit(f"const {ty} {reg} = {pr._load(load, {ovar: str(r), ivar: str(nv * w + i)})};")
                regs.append(reg)
            per_row.append(regs)
        names.append(per_row)

    def operand(n: int, r: int, slot: int) -> str:
        """The register of operand ``n`` for row ``r``, lane group ``slot`` (vectors, then scalars)."""
        rows = names[n]
        regs = rows[min(r, len(rows) - 1)]
        if not any(ivar in free_vars(i) for i in ops[n].indices):
            return regs[0 if slot < nv else min(nv, 1)]
        return regs[slot]

    for r in range(rb_o):
        for v in range(nv):
            ctx.emit(f"_c{r}_{v} = {vmad}({operand(0, r, v)}, {operand(1, r, v)}, _c{r}_{v});")
        for i in range(rem):
            ctx.emit(f"_s{r}_{i} += {operand(0, r, nv + i)} * {operand(1, r, nv + i)};")
    if red_c and not mixed:
        ctx.depth -= 1
        ctx.emit("}")
    for _ in red:
        ctx.depth -= 1
        ctx.emit("}")
    if edge:
        ctx.emit(f"if ({inside}) {{")
        ctx.depth += 1
    _store_block(ctx, rb_o, nv, rem, w, ty, unit_out, out_ref)
    if edge:
        ctx.depth -= 1
        ctx.emit("} else {")
        ctx.depth += 1

        def guard(r: int, lane: int) -> str:
            return holds(out_c, {ovar: str(r), ivar: str(lane)})

        for r in range(rb_o):
            for v in range(nv):
                ctx.emit("{", f"  {ty} _l[{w}] __attribute__((aligned(64)));", f"  simd_store(_c{r}_{v}, _l);",
                         *(f"  if ({guard(r, v * w + i)}) {out_ref(r, v * w + i)} = _l[{i}];" for i in range(w)),
                         "}")
            for i in range(rem):
                ctx.emit(f"if ({guard(r, nv * w + i)}) {out_ref(r, nv * w + i)} = _s{r}_{i};")
        ctx.depth -= 1
        ctx.emit("}")
    ctx.depth -= 1
    ctx.emit("}")
    if mixed:
        ctx.depth -= 1
        ctx.emit("} else {")
        ctx.depth += 1
        pr.plain(node, ctx, block=False)
        ctx.depth -= 1
        ctx.emit("}")
    return True


def _store_block(ctx: Any, rb_o: int, nv: int, rem: int, w: int, ty: str, unit_out: bool, out_ref: Any) -> None:
    """Store a register block's accumulators into the LDM output tile (strided: lane by lane)."""
    for r in range(rb_o):
        for v in range(nv):
            if unit_out:
                ctx.emit(f"simd_storeu(_c{r}_{v}, &{out_ref(r, v * w)});")
            else:
                ctx.emit("{", f"  {ty} _l[{w}] __attribute__((aligned(64)));", f"  simd_store(_c{r}_{v}, _l);",
                         *(f"  {out_ref(r, v * w + i)} = _l[{i}];" for i in range(w)), "}")
        for i in range(rem):
            ctx.emit(f"{out_ref(r, nv * w + i)} = _s{r}_{i};")


def _conjuncts(cond: Any) -> list:
    """The terms of a predicate ``a && b && ...``."""
    if kind(cond) == "And":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]
