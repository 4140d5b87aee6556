"""(workload, target, config) -> a TVM ``s_tir.Schedule`` of the op, following tuner/space/ops.py.

Loop structure (outermost first)::

    cpe            fused (CPE row i, CPE col j) = i*pc + j, annotated "swtune.cpe" (no thread binding)
      rounds       row rounds and col rounds (tile_order row: rows outside), "swtune.rounds"
        [a/b copy]   when the operand is reused across the inner rounds (single reduction chunk)
        C_init     zero the LDM output tile
        ko         reduction chunks, "swtune.chunks"
          a copy, b copy      cache_read stages in scope "local.ldm"
          compute            intra-tile loops, the ``inner`` axis innermost ("swtune.simd"/"swtune.unroll")
        c copy     cache_write stage in "local.ldm", put after the last chunk

Row tile ``t`` is ``rounds*pr + i``; col tile ``rounds*pc + j``. Knobs -> schedule:

* ``tile_*``: ``split`` of each axis; row-axis tile loops fused row-major, then split by ``pr``
  (col axes by ``pc``); ``grid``: the two CPE factors fused into the annotated ``cpe`` loop.
* ``tile_order``: ``reorder`` of the two rounds loops; ``inner``: ``reorder`` of the intra-tile loops.
* a/b/c LDM tiles: ``cache_read`` / ``cache_write`` into ``local.ldm`` at the chunk loop (or at the
  outer rounds loop when the operand is reused: one k tile, box independent of the other tile);
  ``decompose_reduction`` puts the zeroing before the chunk loop.
* copy blocks are annotated (the printer reads them): ``swtune.buf`` (a|b|c), ``swtune.share``
  (none|bcast|mesh: shared over the mesh row for a, column for b), ``swtune.db`` (0|1: a second LDM
  copy, the next iteration of the copy's loop prefetched), ``swtune.dma`` (strided|rows),
  ``swtune.put_lines``. With ``mesh`` the chunk loop walks k tiles and k tile ``t`` of ``a`` (``b``)
  is fetched by CPE column (row) ``t % p`` and sent over the row (column).
* ``cgs`` / ``cg_split`` (a chip target, tuner/space/chip.py): the fused row (col) tile loop is split
  into ``cgs`` parts of ceil(tiles / cgs) tiles, outermost; core group g runs part ``_CGN``
  (:func:`bind_core_group`), so each CG walks the one-CG schedule over its share of the tiles, the
  busiest CG's share the analysis charges. The printer's tile guard bounds a CG's tiles by its own
  count (:class:`CgTiles`), so a CG with fewer (the last, or one past the kernel's count that an
  all-CG spawn starts) fetches and computes nothing past them. A split reduction cuts the chunk loop
  instead, inside the rounds: each CG sums its k tiles of every output tile into its own partial output
  (tuner/codegen/host.py adds them); with share=mesh the space leaves it out (cg_reduction_with_mesh).
* ``simd`` / ``unroll``: annotations on the innermost loop. ``acc = "reg"`` (inner an output axis): the
  register block -- rb_i vectors of the inner axis x rb_o rows of the output axis with the largest tile
  (:func:`register_block`, the shape tuner/space/compute.py models) -- is split off and moved inside
  the reduction loops, so its accumulators are loop-invariant across the chunk.

tvm is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.codegen.te_ops import role_group
from tuner.errors import NotBuiltYetError
from tuner.space.choices import Acc, CgSplit, Order, Share
from tuner.space.compute import rows_axis
from tuner.space.expr_geometry import PAD_AXIS
from tuner.space.factory import space_for
from tuner.space.ops import AxisTiles, axis_tiles
from tuner.space.space import Config
from tuner.targets import Target, get_target
from tuner.workloads import Workload

LDM_SCOPE = "local.ldm"
CGN = "_CGN"  # the core group a CPE belongs to (slave.h): the part of a split kernel it runs

class CgTiles(int):
    """One core group's tiles of the split axis: as a number, the busiest CG's share ceil(total / cgs)
    (what the analysis charges and the checks count); printed (``format``, the printer's tile guards),
    the C count of CG ``_CGN``, min(share, total - _CGN * share): smaller for the last CG, none for a CG
    past the kernel's ``cgs``."""

    c: str

    def __new__(cls, total: int, cgs: int) -> CgTiles:
        share = -(-total // cgs)
        obj = super().__new__(cls, share)
        obj.c = f"SW_MIN({share}, {total} - {CGN} * {share})"
        return obj

    def __format__(self, spec: str) -> str:
        return self.c if not spec else int.__format__(self, spec)


@dataclass
class Scheduled:
    """A schedule plus what the printer and the checks need to know about it."""

    sch: Any
    workload: Workload
    target: Target
    config: Config
    op: Any  # te_ops.OpDef
    pr: int
    pc: int
    rows_total: int
    cols_total: int
    chunks: int
    reuse: dict[str, bool]  # role -> the operand stays in LDM across the inner rounds
    share_a: bool  # group a is shared along mesh rows
    share_b: bool  # group b is shared along mesh columns
    ldm_roles: dict[str, str]  # LDM buffer name -> role (a, a1, b, ..., c)
    cgs: int = 1  # core groups the kernel is split over; rows_total / cols_total are then one CG's share
    cg_split: CgSplit | None = None  # what they divide (None on one CG)

    @property
    def func(self) -> Any:
        return self.sch.mod["main"]

    @property
    def roles(self) -> tuple[str, ...]:
        """The input roles, in parameter order."""
        return tuple(self.op.roles)

    def shared(self, role: str) -> bool:
        g = role_group(role)
        return self.share_a if g == "a" else self.share_b if g == "b" else False


def _grid(config: Config) -> tuple[int, int]:
    pr, pc = config["grid"].split("x")
    return int(pr), int(pc)


@dataclass(frozen=True)
class _Layout:
    """Loop names of the compute block (in its loop order) and the intra-tile order before ``inner``."""

    loops: tuple[str, ...]
    intra: tuple[str, ...]
    reduces: bool  # the block has a reduction (decompose_reduction applies)


def _layout(block: Any) -> _Layout:
    """The compute block's loops named after its iterators (the axes: a built-in op's te compute,
    tuner/codegen/te_ops.py, and an expression's script name them so), spatial then reduction, which
    is the intra-tile order too (a reduction nest keeps the op's order: tuner/space/expr_geometry.py
    red_innermost); no reduction: the unit loop added for it (PAD_AXIS) innermost."""
    from tvm.tirx import IterVar

    names = tuple(str(iv.var.name).removeprefix("v_") for iv in block.iter_vars)
    reduce = [n for n, iv in zip(names, block.iter_vars) if int(iv.iter_type) == IterVar.CommReduce]
    spatial = [n for n in names if n not in reduce]
    return _Layout(names, tuple(spatial + (reduce or [PAD_AXIS])), bool(reduce))


def _tiles(geo: Any, tiles: dict[str, int]) -> dict[str, AxisTiles]:
    return {a.name: axis_tiles(a.extent, np.array([float(tiles[a.name])])) for a in geo.axes}


def _reuse(geo: Any, roles: dict[str, str], tiles: dict[str, int], chunks: int,
           order: str) -> dict[str, bool]:
    """Per role: the operand stays in LDM across the inner rounds: one chunk, the traversal keeps its
    group (row order group a, col order group b) and its box does not change with the other tile index
    (the op's geometry, as the analysis reads it: tuner/space/ops.py OpGeometry.reusable)."""
    t = _tiles(geo, tiles)
    out = {}
    for op in geo.operands:
        keeps = (Order.ROW if op.group == "a" else Order.COL).label  # the order that keeps this operand
        out[roles[op.access.tensor]] = chunks == 1 and order == keeps and bool(geo.reusable(op, t)[0])
    return out


def _shareable(geo: Any, tiles: dict[str, int], pr: int) -> tuple[bool, bool]:
    """Whether group a (b) may be shared along mesh rows (columns): every CPE sharing it needs one box."""
    t = _tiles(geo, tiles)
    ok = {g: all(bool(geo.shareable(op, t, np.array([float(pr)]))[0]) for op in geo.group(g)) for g in "ab"}
    return ok["a"], ok["b"]


def build_schedule(workload: Workload, target: Target | str, config: Config) -> Scheduled:
    import tvm

    from tuner.codegen.te_ops import op_def

    target = get_target(target)
    space = space_for(workload, target)
    space.check(config)
    cgs, split = core_groups(config)
    geo = space.geometry
    op = op_def(workload)
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.func}))
    blk = sch.get_sblock(op.block)
    layout = _layout(sch.get(blk))
    loops = dict(zip(layout.loops, sch.get_loops(blk)))
    extents = {a.name: a.extent for a in geo.axes}
    tiles = {a.name: min(int(config[f"tile_{a.name}"]), a.extent) for a in geo.axes}
    rows = [a.name for a in geo.axes if a.role == "row"]
    cols = [a.name for a in geo.axes if a.role == "col"]
    red = geo.red_axis.name
    fixed = [n for n in layout.loops if n not in extents]
    # An element-wise expression has no reduction loop, one over a single spatial axis no col axis:
    # a unit loop stands in for each, so every op has the same loop structure.
    for name in [red] + ([] if cols else ["_c"]):
        if name not in loops:
            loops[name] = sch.add_unit_loop(blk)
            extents.setdefault(name, 1)
            tiles.setdefault(name, 1)
    cols = cols or ["_c"]
    outer, inner = {}, {}
    for name in rows + cols + [red]:
        outer[name], inner[name] = sch.split(loops[name], [None, tiles[name]])
    inner.update({n: loops[n] for n in fixed})
    pr, pc = _grid(config)
    rows_total = int(np.prod([-(-extents[n] // tiles[n]) for n in rows]))
    cols_total = int(np.prod([-(-extents[n] // tiles[n]) for n in cols]))
    chunks = -(-extents[red] // tiles[red])

    # intra-tile order: output axes, then the reduction, with the `inner` axis moved innermost
    intra = [n for n in layout.intra if n in inner] + [n for n in cols if n not in layout.intra]
    intra = [n for n in intra if n != config["inner"]] + [config["inner"]]
    intra_loops = [inner[n] for n in intra]
    vec_loop = inner[config["inner"]]
    # rows of the block: the largest other output tile, row axes before col axes on a tie (the order
    # tuner/space/compute.py block_shape reads, for built-in ops and expressions alike)
    order = rows + cols + [n for n in tiles if n not in rows + cols]
    block = register_block(config, {n: tiles[n] for n in order if n in layout.loops}, [red] + fixed,
                           list(geo.operand_axes))
    if block is not None:
        # acc = "reg": the register block (rb_o rows of `other` x rb_i vectors of `inner`) moves
        # outside the reduction loops, so its accumulators stay in registers across the chunk
        other, rb_o, ii_len = block
        io, ii = sch.split(inner[config["inner"]], [None, ii_len])
        oo, oi = sch.split(inner[other], [None, rb_o])
        outputs = [inner[n] for n in intra if n not in (config["inner"], other) and n not in [red] + fixed]
        intra_loops = outputs + [oo, io] + [inner[n] for n in [red] + fixed if n in inner] + [oi, ii]
        vec_loop = ii
        sch.annotate(oi, "swtune.unroll", rb_o)
    sch.reorder(*[outer[n] for n in rows], *[outer[n] for n in cols], outer[red], *intra_loops)
    row_f = sch.fuse(*[outer[n] for n in rows]) if len(rows) > 1 else outer[rows[0]]
    col_f = sch.fuse(*[outer[n] for n in cols]) if len(cols) > 1 else outer[cols[0]]
    cg_loop = []
    if split is CgSplit.ROWS:  # core group g holds row tiles [g*q, (g+1)*q), q = ceil(tiles / cgs)
        cg, row_f = sch.split(row_f, [cgs, None])
        cg_loop, rows_total = [cg], CgTiles(rows_total, cgs)
    elif split is CgSplit.COLS:
        cg, col_f = sch.split(col_f, [cgs, None])
        cg_loop, cols_total = [cg], CgTiles(cols_total, cgs)
    red_cg = []
    if split is CgSplit.REDUCTION:  # each CG sums its k tiles into its own partial output (host.py adds them)
        cg, outer[red] = sch.split(outer[red], [cgs, None])
        red_cg, chunks = [cg], -(-chunks // cgs)
    r_round, r_cpe = sch.split(row_f, [None, pr])
    c_round, c_cpe = sch.split(col_f, [None, pc])
    order = [r_round, c_round] if config["tile_order"] == Order.ROW.label else [c_round, r_round]
    sch.reorder(*cg_loop, r_cpe, c_cpe, *order, *red_cg, outer[red])
    cpe = sch.fuse(r_cpe, c_cpe)
    sch.annotate(cpe, "swtune.cpe", f"{pr}x{pc}")
    sch.annotate(order[0], "swtune.rounds", "outer")
    sch.annotate(order[1], "swtune.rounds", "inner")
    sch.annotate(outer[red], "swtune.chunks", chunks)
    sch.annotate(vec_loop, "swtune.simd", int(config["simd"]))
    sch.annotate(vec_loop, "swtune.unroll", int(config["unroll"]) if block is None
                 else max(1, block[2] // int(config["simd"])))
    if red_cg:  # bound before the LDM stages are placed, so their regions are one CG's k tiles
        sch = bind_core_group(sch, red_cg[0])
        blk = sch.get_sblock(op.block)
        _cpe, *order, red_cg[0], outer[red] = sch.get_loops(blk)[:5]

    roles = dict(zip(op.inputs, op.roles))
    reuse = _reuse(geo, roles, tiles, chunks, config["tile_order"])
    share = config["share"]
    a_ok, b_ok = _shareable(geo, tiles, pr)
    groups = {role_group(r) for r in op.roles}
    share_a = share != Share.NONE.label and a_ok and pc > 1 and "a" in groups
    share_b = share != Share.NONE.label and pr > 1 and b_ok and "b" in groups

    cw = sch.cache_write(blk, 0, LDM_SCOPE)
    sch.reverse_compute_at(cw, order[1])
    stages = []
    for name in op.inputs:
        reads = [str(r.source.name) for r in sch.get(blk).reads]
        stage = sch.cache_read(blk, reads.index(name), LDM_SCOPE)
        role = roles[name]
        sch.compute_at(stage, order[0] if reuse[role] else outer[red])
        stages.append((stage, role))
    ldm_roles = {str(sch.get(cw).reads[0].source.name): "c"}
    for stage, role in stages:
        ldm_roles[str(sch.get(stage).writes[0].source.name)] = role
    for stage, role in [*stages, (cw, "c")]:
        g = role_group(role)
        shared = share_a if g == "a" else share_b if g == "b" else False
        sch.annotate(stage, "swtune.buf", role)
        sch.annotate(stage, "swtune.share", share if shared else "none")
        sch.annotate(stage, "swtune.db", int(config[f"db_{g}"]) if g != "c" else 0)
        sch.annotate(stage, "swtune.dma", config["dma"])
        sch.annotate(stage, "swtune.put_lines", int(config["put_lines"]) if g == "c" else 0)
    if layout.reduces and red_cg:  # a CG's k tiles start from zero: its partial sums
        try:
            sch.decompose_reduction(blk, red_cg[0])
        except tvm.s_tir.ScheduleError as exc:  # the bindings over _CGN's part are not affine to TVM
            raise NotBuiltYetError(f"{workload.key} on {target.name}: this reduction split over {cgs} core "
                                   "groups is not generated as C yet: TVM does not see its bindings over a "
                                   "core group's k tiles as affine (decompose_reduction)") from exc
    elif layout.reduces:
        sch.decompose_reduction(blk, outer[red])
    if cg_loop:
        sch = bind_core_group(sch, cg_loop[0])
    return Scheduled(sch, workload, target, dict(config), op, pr, pc, rows_total, cols_total, chunks,
                     reuse, share_a, share_b, ldm_roles, cgs, split)


def core_groups(config: Config) -> tuple[int, CgSplit | None]:
    """(core groups, what they divide) of a config: (1, None) for one CG (a one-CG target's config has no
    chip knobs, tuner/space/chip.py)."""
    cgs = int(config.get("cgs", 1))
    return (cgs, CgSplit.of(str(config["cg_split"]))) if cgs > 1 else (1, None)  # type: ignore[return-value]


def bind_core_group(sch: Any, cg_loop: Any) -> Any:
    """The schedule with its loop ``cg_loop`` over the core groups' parts (the outermost; a split
    reduction's, inside the rounds) run once, at part ``_CGN``: the loop becomes a unit loop from
    ``_CGN`` (a scalar parameter of the kernel, the CPE's core group in the C), which lowering
    (tuner.ir.tir.lower: LowerOpaqueBlock) replaces by ``_CGN``. Loop handles of ``sch`` do not carry
    over to the schedule returned."""
    import tvm
    from tvm import s_tir, tirx

    func = sch.mod["main"]
    realize = func.body
    root = realize.block
    loop = sch.get(cg_loop)
    cgn = tirx.Var(CGN, "int32")

    def bound(stmt: Any) -> Any:  # the chain of loops from the root down to the CGs' loop, rebuilt
        if stmt.same_as(loop):
            return tirx.For(loop.loop_var, cgn, 1, loop.kind, loop.body)
        assert isinstance(stmt, tirx.For), "the core groups' loop lies on the kernel's outer chain of loops"
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, bound(stmt.body), stmt.thread_binding,
                        stmt.annotations)

    unit = bound(root.body)
    block = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, unit, root.init,
                         root.alloc_buffers, root.match_buffers, root.annotations)
    body = s_tir.SBlockRealize(realize.iter_values, realize.predicate, block)
    bound = tirx.PrimFunc([*func.params, cgn], body, func.ret_type, func.attrs)
    return s_tir.Schedule(tvm.IRModule({"main": bound}))


def register_block(config: Config, tiles: dict[str, int], reduction: list[str],
                   operand_axes: list[set[str]]) -> tuple[str, int, int] | None:
    """(other axis, rb_o, inner elements rb_i*w) of an ``acc = "reg"`` register block, else None.

    The block shape is the one tuner/space/compute.py charges: rb_i vectors along the inner axis (as
    many as its tile holds, up to sqrt(u)), rb_o = u / rb_i rows along the axis
    :func:`tuner.space.compute.rows_axis` picks from ``tiles`` (in their order) and the axes each
    operand moves with (``operand_axes``) -- each cut down to a divisor of its tile.
    """
    inner = config["inner"]
    if config.get("acc", Acc.LDM.label) != Acc.REG.label or inner in reduction:
        return None
    w = int(config["simd"])
    outputs = [n for n in tiles if n not in reduction and n != inner]
    out_tile = int(np.prod([tiles[n] for n in tiles if n not in reduction]))
    u = int(min(int(config["unroll"]), max(1, out_tile // w)))
    along_inner = max(1, tiles[inner] // w)
    rb_i = min(2 ** int(np.ceil(np.log2(u) / 2)), 2 ** int(np.floor(np.log2(min(along_inner, u)))))
    if not outputs:  # a single output axis: no rows to block (an expression such as gemv)
        return None
    full = {n: np.array(float(tiles[n])) for n in tiles if n not in reduction}
    index, _ = rows_axis(inner, [n for n in tiles if n not in reduction], full, operand_axes)
    other = [n for n in tiles if n not in reduction][int(index)]
    # Split factors divide the tiles: a ragged split would widen the LDM boxes TVM derives. So a
    # tile that rb_i vectors (rb_o rows) do not divide gets the largest block that does.
    ii = max(d for d in range(1, min(rb_i * w, tiles[inner]) + 1) if tiles[inner] % d == 0)
    rb_o = max(d for d in range(1, min(u // rb_i, tiles[other]) + 1) if tiles[other] % d == 0)
    return other, rb_o, ii
