"""An ``acc = "reg"`` register block of a scheduled kernel, printed as swGEMM's micro-kernel.

The nest is the reduction loops, a rows loop (annotated ``swtune.unroll``) and the vector loop over
the update ``c += a * b``: rb_o rows x rb_i vectors of accumulators held in registers across the
reduction loops (microkernel).
"""

from __future__ import annotations

from typing import Any

from tuner.ir.cprint import vector
from tuner.ir.cprint.expr import cexpr
from tuner.ir.cprint.expr_vector import Tiles
from tuner.ir.cprint.lanes import conjuncts, unit_stride, update_body
from tuner.ir.cprint.lines import for_line
from tuner.ir.tir import const_int, free_vars, kind


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
    up = update_body(chain[-1])
    if up is None:
        return None
    out_vars = set().union(*(free_vars(i) for i in up[1].indices))
    red = chain[:-2]
    if any(f.loop_var.name in out_vars for f in red):
        return None
    if chain[-2].loop_var.name not in out_vars or chain[-1].loop_var.name not in out_vars:
        return None
    return red, chain[-2], chain[-1], up


def microkernel(pr: Tiles, node: Any, ctx: Any) -> bool:
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
    ty, vt = pr.ty, vector.vector_type(pr.ty, w)
    vmad = vector.fma(ty)
    # The predicate's conjuncts: on output positions only (a ragged tile's edge), the block runs
    # whole -- lanes and rows past the edge accumulate values read from inside the LDM tiles and are
    # never stored -- and each output is stored under them; on reduction indices only (a ragged
    # reduction tile), each reduction step runs under them; a conjunct on both sends the block to the
    # lane-by-lane loop when it is not wholly inside.
    red_vars = {f.loop_var.name for f in red}
    out_c: list[Any] = []
    red_c: list[Any] = []
    mixed: list[Any] = []
    for c in conjuncts(cond) if cond is not None else []:
        fv = free_vars(c)
        (mixed if fv & red_vars and fv & {ovar, ivar} else red_c if fv & red_vars else out_c).append(c)

    def holds(conds: list, env: dict[str, str]) -> str:
        return " && ".join(f"({cexpr(c, env, lambda e: pr.load(e, env))})" for c in conds) or "1"

    block_vars = [*red, oi, ii]
    first = {f.loop_var.name: "0" for f in block_vars}
    last = {f.loop_var.name: str(const_int(f.extent) - 1) for f in block_vars}
    edge = bool(out_c) and not mixed
    inside = f"{holds(out_c, first)} && {holds(out_c, last)}"
    if mixed:
        ctx.emit(f"if ({holds(conjuncts(cond), first)} && {holds(conjuncts(cond), last)}) {{")
        ctx.depth += 1
    ctx.emit("{")
    ctx.depth += 1
    sidx = list(store.indices)
    unit_out = unit_stride(sidx, ivar, pr.ldm_shape(store.buffer))

    def out_ref(r: int, lane: int) -> str:
        return pr.ldm_ref(store.buffer, sidx, {ovar: str(r), ivar: str(lane)})

    for r in range(rb_o):
        for v in range(nv):
            if unit_out:
                ctx.emit(f"{vt} _c{r}_{v}; " + vector.load(f"_c{r}_{v}", f"&{out_ref(r, v * w)}", False))
            else:  # an output strided along the lanes: w scalar loads, as the model charges
                lanes = [out_ref(r, v * w + i) for i in range(w)]
                ctx.emit(f"{vt} _c{r}_{v} = {vector.set_lanes(vt, lanes)};")
        for i in range(rem):
            ctx.emit(f"{ty} _s{r}_{i} = {out_ref(r, nv * w + i)};")
    for f in red:
        v = f.loop_var.name
        ctx.emit(for_line("int", v, None, cexpr(f.extent, {}), f"{v}++"))
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
                    ctx.emit(f"{vt} {reg}; " + vector.load_replicated(reg, f"&{pr.load(load, env)}"))
                elif role in pr.pack:
                    # rows of the packed copy start on a vector when its box is whole vectors (_pack_copy)
                    aligned = rem == 0 and pr.pack_aligned(role)
                    ctx.emit(f"{vt} {reg}; " + vector.load(reg, f"&{pr.pk_ref(load, env)}", aligned))
                elif unit_stride(idx, ivar, pr.ldm_shape(load.source)):
                    ctx.emit(f"{vt} {reg}; " + vector.load(reg, f"&{pr.load(load, env)}", False))
                else:  # strided and not packable: lane by lane
                    lanes = [pr.load(load, {ovar: str(r), ivar: str(vv * w + i)}) for i in range(w)]
                    ctx.emit(f"{vt} {reg} = {vector.set_lanes(vt, lanes)};")
                regs.append(reg)
            for i in range(rem if lanes_dep else min(rem, 1)):
                reg = f"_y{n}_{r}_{i}"
                ctx.emit(f"const {ty} {reg} = {pr.load(load, {ovar: str(r), ivar: str(nv * w + i)})};")
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
                ctx.emit("{", f"  {vector.lanes_array(ty, w)}", f"  {vector.store(f'_c{r}_{v}', '_l', True)}",
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
                ctx.emit(vector.store(f"_c{r}_{v}", f"&{out_ref(r, v * w)}", False))
            else:
                ctx.emit("{", f"  {vector.lanes_array(ty, w)}", f"  {vector.store(f'_c{r}_{v}', '_l', True)}",
                         *(f"  {out_ref(r, v * w + i)} = _l[{i}];" for i in range(w)), "}")
        for i in range(rem):
            ctx.emit(f"{out_ref(r, nv * w + i)} = _s{r}_{i};")
