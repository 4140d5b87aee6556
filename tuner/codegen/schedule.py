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

from tuner.space.factory import space_for
from tuner.space.space import Config
from tuner.targets import Target, get_target
from tuner.workloads import BatchMatmul, Conv2d, Workload

LDM_SCOPE = "local.ldm"

# loop names of the te.compute block, in create_prim_func order, as axis names of tuner/space/ops.py
_LOOP_AXES = {"dense": ("m", "n", "k"), "batch_matmul": ("b", "m", "n", "k"),
              "conv2d": ("n", "k", "oh", "ow", "c", "r", "s")}


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
    reuse_a: bool
    reuse_b: bool
    share_a: bool
    share_b: bool

    @property
    def func(self) -> Any:
        return self.sch.mod["main"]


def _grid(config: Config) -> tuple[int, int]:
    pr, pc = config["grid"].split("x")
    return int(pr), int(pc)


def operand_reuse(workload: Workload, tiles: dict[str, int], chunks: int, order: str) -> tuple[bool, bool]:
    """Whether a (row order) or b (col order) stays in LDM across a CPE's consecutive tiles.

    Only with one reduction chunk, and only when the kept operand's box does not depend on the other
    tile index (conv with groups: a depends on the k tile; batch_matmul: b depends on the batch)."""
    if chunks != 1:
        return False, False
    a_free = not (isinstance(workload, Conv2d) and workload.groups > 1 and tiles["k"] < workload.k)
    b_free = not (isinstance(workload, BatchMatmul) and tiles["b"] < workload.b)
    return order == "row" and a_free, order == "col" and b_free


def build_schedule(workload: Workload, target: Target | str, config: Config) -> Scheduled:
    import tvm

    from tuner.codegen.te_ops import op_def

    target = get_target(target)
    space = space_for(workload, target)
    space.check(config)
    geo = space.geometry
    op = op_def(workload)
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.func}))
    blk = sch.get_sblock(op.block)
    loops = dict(zip(_LOOP_AXES[workload.op], sch.get_loops(blk)))
    extents = {a.name: a.extent for a in geo.axes}
    tiles = {a.name: min(int(config[f"tile_{a.name}"]), a.extent) for a in geo.axes}
    rows = [a.name for a in geo.axes if a.role == "row"]
    cols = [a.name for a in geo.axes if a.role == "col"]
    red = geo.red_axis.name
    fixed = [n for n in _LOOP_AXES[workload.op] if n not in extents]
    outer, inner = {}, {}
    for name in rows + cols + [red]:
        outer[name], inner[name] = sch.split(loops[name], [None, tiles[name]])
    inner.update({n: loops[n] for n in fixed})
    pr, pc = _grid(config)
    rows_total = int(np.prod([-(-extents[n] // tiles[n]) for n in rows]))
    cols_total = int(np.prod([-(-extents[n] // tiles[n]) for n in cols]))
    chunks = -(-extents[red] // tiles[red])

    # intra-tile order: output axes, then the reduction, with the `inner` axis moved innermost
    intra = rows + cols + [red] + fixed
    if workload.op == "conv2d":
        intra = ["n", "k", "oh", "ow", red] + fixed
    intra = [n for n in intra if n != config["inner"]] + [config["inner"]]
    intra_loops = [inner[n] for n in intra]
    vec_loop = inner[config["inner"]]
    block = register_block(config, tiles, [red] + fixed)
    if block is not None:
        # acc = "reg": the register block (rb_o rows of `other` x rb_i vectors of `inner`) moves
        # outside the reduction loops, so its accumulators stay in registers across the chunk
        other, rb_o, ii_len = block
        io, ii = sch.split(inner[config["inner"]], [None, ii_len])
        oo, oi = sch.split(inner[other], [None, rb_o])
        outputs = [inner[n] for n in intra if n not in (config["inner"], other) and n not in [red] + fixed]
        intra_loops = outputs + [oo, io] + [inner[n] for n in [red] + fixed] + [oi, ii]
        vec_loop = ii
        sch.annotate(oi, "swtune.unroll", rb_o)
    sch.reorder(*[outer[n] for n in rows], *[outer[n] for n in cols], outer[red], *intra_loops)
    row_f = sch.fuse(*[outer[n] for n in rows]) if len(rows) > 1 else outer[rows[0]]
    col_f = sch.fuse(*[outer[n] for n in cols]) if len(cols) > 1 else outer[cols[0]]
    r_round, r_cpe = sch.split(row_f, [None, pr])
    c_round, c_cpe = sch.split(col_f, [None, pc])
    order = [r_round, c_round] if config["tile_order"] == "row" else [c_round, r_round]
    sch.reorder(r_cpe, c_cpe, *order, outer[red])
    cpe = sch.fuse(r_cpe, c_cpe)
    sch.annotate(cpe, "swtune.cpe", f"{pr}x{pc}")
    sch.annotate(order[0], "swtune.rounds", "outer")
    sch.annotate(order[1], "swtune.rounds", "inner")
    sch.annotate(outer[red], "swtune.chunks", chunks)
    sch.annotate(vec_loop, "swtune.simd", int(config["simd"]))
    sch.annotate(vec_loop, "swtune.unroll", int(config["unroll"]) if block is None
                 else max(1, block[2] // int(config["simd"])))

    reuse_a, reuse_b = operand_reuse(workload, tiles, chunks, config["tile_order"])
    share = config["share"]
    a_ok = not (isinstance(workload, Conv2d) and workload.groups > 1)
    share_a = share != "none" and a_ok and pc > 1
    share_b = share != "none" and pr > 1 and _b_shareable(workload, tiles, pr)

    cw = sch.cache_write(blk, 0, LDM_SCOPE)
    sch.reverse_compute_at(cw, order[1])
    ca = sch.cache_read(blk, 0, LDM_SCOPE)
    sch.compute_at(ca, order[0] if reuse_a else outer[red])
    cb = sch.cache_read(blk, 1, LDM_SCOPE)
    sch.compute_at(cb, order[0] if reuse_b else outer[red])
    for block, buf, shared, db in ((ca, "a", share_a, config["db_a"]), (cb, "b", share_b, config["db_b"]),
                                   (cw, "c", False, 0)):
        sch.annotate(block, "swtune.buf", buf)
        sch.annotate(block, "swtune.share", share if shared else "none")
        sch.annotate(block, "swtune.db", int(db))
        sch.annotate(block, "swtune.dma", config["dma"])
        sch.annotate(block, "swtune.put_lines", int(config["put_lines"]) if buf == "c" else 0)
    sch.decompose_reduction(blk, outer[red])
    return Scheduled(sch, workload, target, dict(config), op, pr, pc, rows_total, cols_total, chunks,
                     reuse_a, reuse_b, share_a, share_b)


def register_block(config: Config, tiles: dict[str, int], reduction: list[str]) -> tuple[str, int, int] | None:
    """(other axis, rb_o, inner elements rb_i*w) of an ``acc = "reg"`` register block, else None.

    The block shape follows tuner/space/compute.py: rb_i vectors along the inner axis (as many as its
    tile holds, up to sqrt(u)), rb_o = u / rb_i rows along the output axis with the largest tile --
    each cut down to a divisor of its tile (the analysis idealises ragged blocks).
    """
    inner = config["inner"]
    if config.get("acc", "ldm") != "reg" or inner in reduction:
        return None
    w = int(config["simd"])
    outputs = [n for n in tiles if n not in reduction and n != inner]
    out_tile = int(np.prod([tiles[n] for n in tiles if n not in reduction]))
    u = int(min(int(config["unroll"]), max(1, out_tile // w)))
    along_inner = max(1, tiles[inner] // w)
    rb_i = min(2 ** int(np.ceil(np.log2(u) / 2)), 2 ** int(np.floor(np.log2(min(along_inner, u)))))
    other = max(outputs, key=lambda n: tiles[n])
    # Split factors divide the tiles: a ragged split would widen the LDM boxes TVM derives. So a
    # tile that rb_i vectors (rb_o rows) do not divide gets the largest block that does.
    ii = max(d for d in range(1, min(rb_i * w, tiles[inner]) + 1) if tiles[inner] % d == 0)
    rb_o = max(d for d in range(1, min(u // rb_i, tiles[other]) + 1) if tiles[other] % d == 0)
    return other, rb_o, ii


def _b_shareable(workload: Workload, tiles: dict[str, int], pr: int) -> bool:
    if isinstance(workload, BatchMatmul):
        return (-(-workload.m // tiles["m"])) % pr == 0
    return True
