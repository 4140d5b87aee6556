"""Vectorised analysis of an expression's configs, producing the built-in :class:`Analysis` record.

The rules are tuner/space/analysis.py's (same knobs, same validity reasons, same DMA block rule via
its ``_plan``, same inner-loop model via ``inner_loop``), generalised from two operands to two
*groups* of any number of operands (tuner/expr/geometry.py). A group's BufferPlan sums its operands'
requests, bytes and LDM; its block size is the bytes-weighted mean block of its operands -- the one
approximation the simulator sees for a group of several operands with different block sizes (the
request count, bytes and LDM stay exact). An empty group (a stencil's single input) issues nothing.
The built-in analysis is the reference: tests/expr_tests/test_space.py checks that dense,
batch_matmul and conv2d written as expressions give its figures and simulated times exactly, so a
change of the built-in rules that is not carried over here fails that test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuner.space.analysis import Analysis, BufferPlan, _plan, packed_plan
from tuner.space.choices import Acc, Order, Pack, Reason, Share
from tuner.space.compute import BodyReads, block_shape, inner_loop
from tuner.space.ops import AxisTiles, axis_tiles
from tuner.targets import Sharing

if TYPE_CHECKING:
    from tuner.expr.geometry import ExprGeometry
    from tuner.expr.space import ExprSpace

def _merge(plans: list[BufferPlan], n: int) -> BufferPlan:
    if not plans:
        zero = np.zeros(n)
        return BufferPlan(zero, zero, zero, zero, zero, np.ones(n), np.ones(n, dtype=bool), zero, zero)
    def total(field: str) -> np.ndarray:
        return np.sum([getattr(p, field) for p in plans], axis=0)

    requests, moved = total("requests"), total("bytes")
    blocks = np.sum([p.requests * p.blocks_per_request for p in plans], axis=0)
    return BufferPlan(
        ldm_bytes=total("ldm_bytes"), loads=np.maximum.reduce([p.loads for p in plans]),
        requests=requests, bytes=moved, block_bytes=moved / np.maximum(blocks, 1e-12),
        blocks_per_request=blocks / np.maximum(requests, 1e-12),
        aligned=np.logical_and.reduce([p.aligned for p in plans]),
        total_requests=total("total_requests"), total_bytes=total("total_bytes"),
    )


def analyze_expr(space: ExprSpace, index: np.ndarray) -> Analysis:
    """Analyse configs (rows of choice indices) of an expression's space."""
    index = np.atleast_2d(np.asarray(index, dtype=np.int64))
    geo: ExprGeometry = space.geometry
    target = space.target
    v = {k.name: space.codes[j][index[:, j]] for j, k in enumerate(space.knobs)}
    n = index.shape[0]
    ds = space.workload.dtype_bytes
    t: dict[str, AxisTiles] = {a.name: axis_tiles(a.extent, v[f"tile_{a.name}"]) for a in geo.axes}
    g = index[:, space.knob_index["grid"]]
    pr, pc = space.grid_rows[g], space.grid_cols[g]
    share, dma_mode = v["share"], v["dma"]
    db_a, db_b = v["db_a"].astype(bool), v["db_b"].astype(bool)
    db_c = v["db_c"].astype(bool) if "db_c" in v else np.zeros(n, dtype=bool)

    rows_total, cols_total, out_mean, out_full = np.ones(n), np.ones(n), np.ones(n), np.ones(n)
    for a in geo.axes:
        if a.role == "row":
            rows_total = rows_total * t[a.name].count
        elif a.role == "col":
            cols_total = cols_total * t[a.name].count
        if a.role != "red":
            out_mean = out_mean * t[a.name].mean
            out_full = out_full * t[a.name].full
    red = t[geo.red_axis.name]
    rows_cpe, cols_cpe = np.ceil(rows_total / pr), np.ceil(cols_total / pc)
    tiles_cpe = rows_cpe * cols_cpe
    active = np.minimum(pr, rows_total) * np.minimum(pc, cols_total)
    imbalance = tiles_cpe * active / (rows_total * cols_total)

    group_a, group_b = geo.group("a"), geo.group("b")
    on_mesh = (pr <= target.mesh_rows) & (pc <= target.mesh_cols)
    a_ok = np.logical_and.reduce([geo.shareable(op, t, pr) for op in group_a] + [np.ones(n, dtype=bool)])
    b_ok = np.logical_and.reduce([geo.shareable(op, t, pr) for op in group_b] + [np.ones(n, dtype=bool)])
    sharing = share != Share.NONE
    a_shared = sharing & a_ok & (pc > 1) & bool(group_a)
    b_shared = sharing & b_ok & (pr > 1) & bool(group_b)
    mesh = share == Share.MESH
    kf = np.where(mesh, pr, 1.0)
    chunks = np.ceil(geo.red_axis.extent / (red.full * kf))
    steps = tiles_cpe * chunks
    k_tiles = np.ceil(geo.red_axis.extent / red.full)
    single_chunk = k_tiles == 1
    row_order = v["tile_order"] == Order.ROW
    col_rounds, row_rounds = np.ceil(cols_total / pc), np.ceil(rows_total / pr)

    boxes = {op.access.tensor: geo.dims(op.access, t) for op in geo.operands}  # each operand's LDM box
    packed_b = (v["pack"] == Pack.B) if "pack" in v else np.zeros(n, dtype=bool)
    b_whole = np.ones(n, dtype=bool)

    def plans(group: tuple, is_a: bool) -> tuple[list[BufferPlan], np.ndarray, np.ndarray]:
        out, limits, fetches = [], np.ones(n, dtype=bool), np.zeros(n)
        shared = a_shared if is_a else b_shared
        bcast = shared & (share == Share.BCAST)
        split = np.where(bcast, np.minimum(pc, cols_total) if is_a else np.minimum(pr, rows_total), 1.0)
        for op in group:
            reuse = single_chunk & (row_order if is_a else ~row_order) & geo.reusable(op, t)
            loads = np.where(reuse, rows_cpe if is_a else cols_cpe, steps)
            own, other = (rows_total, cols_total) if is_a else (cols_total, rows_total)
            other_p = pc if is_a else pr
            rounds = col_rounds if is_a else row_rounds
            total = np.where(shared, np.where(reuse, own, own * rounds * k_tiles),
                             np.where(reuse, own * np.minimum(other_p, other), rows_total * cols_total * k_tiles))
            plan, _, limit = _plan(boxes[op.access.tensor], ds, loads, split, dma_mode, total)
            if not is_a:  # the pack knob stores every b operand tile after tile
                plan, whole = packed_plan(plan, boxes[op.access.tensor], ds, total, packed_b)
                np.logical_and(b_whole, whole, out=b_whole)
            out.append(plan)
            limits &= limit
            fetches = np.maximum(fetches, loads)
        return out, limits, fetches

    # ``fetches``: tile fetches of the busiest CPE before a bcast splits their requests (what it packs)
    a_plans, limit_a, fetches_a = plans(group_a, True)
    b_plans, limit_b, fetches_b = plans(group_b, False)
    plan_a, plan_b = _merge(a_plans, n), _merge(b_plans, n)
    # b operands that read no row axis are a layer's weights (dense, conv; tuner/space/ops.py
    # b_constant), packed at compile time; one that follows a row axis (a batch) is an activation,
    # packed by the host before each call
    b_constant = all(not op.row_axes for op in group_b)
    b_bytes = float(sum(np.prod(op.access.shape) for op in group_b)) * ds
    host_pack = np.where(packed_b & (not b_constant), 2.0 * b_bytes, 0.0)
    plan_c, lines_c, limit_c = _plan(geo.output_dims(t), ds, tiles_cpe, np.ones(n), dma_mode,
                                     rows_total * cols_total, put_lines=v["put_lines"])

    # Inner loop: an operand needs a packed copy for SIMD when its LDM stride along the inner axis
    # is neither 0 (broadcast) nor 1 (contiguous).
    w = v["simd"]
    inner_code = v["inner"].astype(np.int64)
    gather = {"a": np.zeros(n, dtype=bool), "b": np.zeros(n, dtype=bool)}
    lane_gathered = [np.zeros(n, dtype=bool) for _ in geo.operands]
    reduction = np.zeros(n, dtype=bool)
    inner_ext = np.ones(n)
    misaligned = np.zeros(n)
    out_strided = np.zeros(n, dtype=bool)
    body_loads, body_unaligned, body_out = np.zeros(n), np.zeros(n), np.zeros(n)
    for code, name in enumerate(geo.inner_axes):
        sel = inner_code == code
        if not sel.any():
            continue
        for i, op in enumerate(geo.operands):
            stride = geo.stride_along(op.access, name, boxes[op.access.tensor])
            strided = (stride != 0) & (stride != 1)
            # the generated C repacks it (tuner/codegen/simd.py gathered_dims) when the axis moves one
            # index dimension with step 1; else it gathers a vector lane by lane
            # (only in the c += a*b loops tuner/codegen/simd.py prints; the other vector bodies,
            # tuner/codegen/simd_expr.py, gather it lane by lane)
            moving = [d for d in op.access.dims if d.coef(name) != 0]
            repack = len(moving) == 1 and moving[0].coef(name) == 1 and not geo.expr.block_reason
            gather[op.group] = np.where(sel, gather[op.group] | (strided & repack), gather[op.group])
            lane_gathered[i] = np.where(sel, strided & (not repack), lane_gathered[i])
            misaligned = np.where(sel, np.maximum(misaligned, geo.misaligned(op.access, name)), misaligned)
        # the output tile's LDM stride along the inner axis (strided: accumulators move lane by lane)
        out_stride = geo.stride_along(geo.expr.output, name, geo.output_dims(t))
        out_strided = np.where(sel, (out_stride != 1) & (name != geo.red_axis.name), out_strided)
        reduction = np.where(sel, name == geo.red_axis.name, reduction)
        if geo.expr.block_reason:
            loads_b, unaligned_b = geo.body_reads(name, boxes, v["simd"])
            body_loads = np.where(sel, loads_b, body_loads)
            body_unaligned = np.where(sel, unaligned_b, body_unaligned)
            body_out = np.where(sel, geo.body_output_ops(name, v["simd"]), body_out)
        inner_ext = np.where(sel, t[name].full, inner_ext)
    vector = w > 1
    simd_fraction = np.where(vector, np.floor(inner_ext / w) * w / inner_ext, 0.0)
    pack_a, pack_b = vector & gather["a"], vector & gather["b"]
    ldm_pack = np.where(pack_a, plan_a.ldm_bytes, 0.0) + np.where(pack_b, plan_b.ldm_bytes, 0.0)

    macs_tile = out_mean * geo.red_axis.extent * geo.red_fixed
    fma_step = macs_tile * geo.fma_per_point / chunks
    # every CPE packs the whole tile it holds, however many CPEs shared its fetch
    pack_elems = (np.where(pack_a, fetches_a / np.maximum(steps, 1) * plan_a.ldm_bytes / ds, 0.0)
                  + np.where(pack_b, fetches_b / np.maximum(steps, 1) * plan_b.ldm_bytes / ds, 0.0))
    # a body other than c += a*b (tuner/codegen/simd_expr.py) loads what its reads are, per trip of w
    # points (c += a*b bodies keep the built-in rule: rb_o + rb_i loads per u FMAs)
    body = (BodyReads(body_loads, body_unaligned, np.full(n, float(geo.fma_per_point)), body_out)
            if geo.expr.block_reason else None)
    # acc = "reg": the register block the generated C holds (rows along the largest other output tile)
    shape = block_shape(inner_code, geo.inner_axes, list(geo.row_axes) + list(geo.col_axes),
                        {a.name: t[a.name].full for a in geo.axes}, [set(op.access.axes) for op in geo.operands],
                        lane_gathered, red.mean < red.full)
    cp = inner_loop(target, w, v["unroll"], reduction, v["acc"] == Acc.REG, inner_ext, out_full, out_mean, fma_step,
                    simd_fraction, pack_elems, np.where(vector, misaligned, 0.0),
                    red.full if geo.red_innermost == 0 else np.full(n, float(geo.red_innermost)),
                    out_strided & vector, shape, body)
    compute = cp.cycles
    bus = np.maximum(plan_a.ldm_bytes, plan_b.ldm_bytes) * kf / target.share_bytes_per_cycle
    share_cost = np.where(mesh, kf * target.share_latency_cycles + np.maximum(0.0, bus - compute), 0.0)
    if target.sharing is Sharing.RLC:
        # RLC is issued by the CPEs: per 32-B vector the owner loads and sends it to the p-1 others,
        # each receiver takes it off the bus and stores it (P1 work before the step's compute).
        vec = target.vector_bits / 8
        # a whole mesh row (column) takes one broadcast putr/putc
        send_a = np.where(pc >= target.mesh_cols, 2.0, pc)
        send_b = np.where(pr >= target.mesh_rows, 2.0, pr)
        rlc_ops = (np.where(a_shared, plan_a.ldm_bytes / vec * (send_a + 2.0 * (kf - 1.0)), 0.0)
                   + np.where(b_shared, plan_b.ldm_bytes / vec * (send_b + 2.0 * (kf - 1.0)), 0.0))
        share_cost = share_cost + np.where(mesh, rlc_ops, 0.0)

    ldm_a = plan_a.ldm_bytes * np.where(db_a, 2, 1)
    ldm_b = plan_b.ldm_bytes * np.where(db_b, 2, 1)
    ldm_c = plan_c.ldm_bytes * np.where(db_c, 2, 1)
    ldm_total = ldm_a + ldm_b + ldm_c + ldm_pack
    reason = np.zeros(n, dtype=np.int64)

    def fail(why: Reason, bad: np.ndarray) -> None:
        np.putmask(reason, (reason == Reason.OK) & bad, int(why))

    fail(Reason.LDM_OVERFLOW, ldm_total > target.ldm_budget_bytes)
    fail(Reason.SHARING_NEEDS_MESH_GRID, sharing & (~on_mesh | ((pr == 1) & (pc == 1))))
    fail(Reason.RLC_NEEDS_SQUARE_GRID, mesh & ((pr != pc) | (pr < 2)))
    fail(Reason.OPERAND_NOT_SHAREABLE, (mesh & ~(a_ok & b_ok)) | (sharing & ~a_shared & ~b_shared))
    fail(Reason.PUT_LINES_UNALIGNED, v["put_lines"].astype(bool) & ~lines_c)
    fail(Reason.DMA_DESCRIPTOR_LIMIT, ~(limit_a & limit_b & limit_c))
    fail(Reason.ACC_REG_NEEDS_OUTPUT_INNER, (v["acc"] == Acc.REG) & reduction)
    fail(Reason.PACK_NEEDS_WHOLE_TILES, packed_b & ~b_whole)

    macs_cpe = tiles_cpe * macs_tile
    flops_cpe = tiles_cpe * out_mean * geo.red_axis.extent * geo.red_fixed * geo.expr.ops_per_point
    mem = plan_a.bytes + plan_b.bytes + plan_c.bytes
    return Analysis(
        valid=reason == Reason.OK, reason=reason, ldm_a=ldm_a, ldm_b=ldm_b, ldm_c=ldm_c, ldm_pack=ldm_pack,
        ldm_total=ldm_total, a=plan_a, b=plan_b, c=plan_c, pr=pr, pc=pc, active_cpes=active,
        tiles_per_cpe=tiles_cpe, steps_per_cpe=steps, chunks_per_tile=chunks, imbalance=imbalance,
        macs_per_cpe=macs_cpe, flops_per_cpe=flops_cpe, simd_width=w, simd_fraction=simd_fraction,
        kernel_efficiency=cp.efficiency, compute=cp, compute_cycles_per_step=compute,
        share_cycles_per_step=share_cost, double_buffer_a=db_a, double_buffer_b=db_b, share_mode=share,
        dma_mode=dma_mode, arithmetic_intensity=flops_cpe / np.maximum(mem, 1.0), double_buffer_c=db_c,
        host_pack_bytes=host_pack,
    )
