"""Closed-form, numpy-vectorized analysis of schedule configs: LDM, DMA plan, compute, balance.

One call analyses many configs (rows of an index matrix) without Python loops over configs. It is
the hot path of search: validity, the simulator and the cost-model features all read it. Figures are
per CPE for the busiest CPE unless named ``total_``; tile extents are averaged over ragged tiles,
which keeps totals (bytes, blocks, flops) exact because a tile grid is a product of per-axis tilings.

The one analysis of every operator, built-in or expression: it reads only what the operator's
geometry answers (tuner/space/ops.py OpGeometry: operands in two sharing groups, their boxes per tile,
sharing, reuse, the inner loop's strides). A group's BufferPlan is its operands' merged (``_merge``).
On a target of several core groups the figures are the busiest CG's (tuner/space/chip.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from tuner.space.chip import ChipPlan, plan_chip, tensor_bytes
from tuner.space.choices import Acc, Dma, Order, Pack, Reason, Share
from tuner.space.compute import BodyReads, ComputePlan, bcast_column_rlc, block_shape, inner_loop, mesh_rlc_ops
from tuner.space.epilogue import EpiloguePlan, has_epilogue, plan_epilogue
from tuner.space.ops import AxisTiles, Dim, axis_tiles
from tuner.targets import Sharing

if TYPE_CHECKING:
    from tuner.space.space import ScheduleSpace

LINE = 128  # DRAM line bytes: DMA moves whole lines
DMA_BSIZE_MAX = (1 << 20) - 1  # 20-bit block-size field of a DMA descriptor [P] dma.h
DMA_LEN_MAX = (1 << 24) - 1  # 24-bit size field

# Stored strings of the failure reasons, indexed by code (derived; tuner/space/choices.py is the home).
REASONS = Reason.labels()


@dataclass
class BufferPlan:
    """DMA plan of one tensor per CPE: how many requests of what shape, and the bytes moved."""

    ldm_bytes: np.ndarray  # one LDM copy of the tile (x2 when double-buffered is in Analysis.ldm_*)
    loads: np.ndarray  # tile transfers issued by the busiest CPE over the kernel
    requests: np.ndarray  # DMA requests issued by the busiest CPE
    bytes: np.ndarray  # main-memory bytes moved by the busiest CPE
    block_bytes: np.ndarray  # contiguous block size of one request (mean over tiles)
    blocks_per_request: np.ndarray
    aligned: np.ndarray  # blocks start on 128-B lines and are whole lines
    total_requests: np.ndarray  # over the whole mesh, exact (what the generated code issues)
    total_bytes: np.ndarray


@dataclass
class Analysis:
    """Everything the validity check, the simulator and the cost model need, one entry per config."""

    valid: np.ndarray
    reason: np.ndarray  # Reason codes (tuner/space/choices.py)
    ldm_a: np.ndarray
    ldm_b: np.ndarray
    ldm_c: np.ndarray
    ldm_pack: np.ndarray
    ldm_total: np.ndarray
    a: BufferPlan  # group a (row-shared operands), its operands' plans merged
    b: BufferPlan  # group b (column-shared operands)
    c: BufferPlan  # the output
    pr: np.ndarray
    pc: np.ndarray
    active_cpes: np.ndarray
    tiles_per_cpe: np.ndarray
    steps_per_cpe: np.ndarray  # (output tile, reduction chunk) pairs of the busiest CPE
    chunks_per_tile: np.ndarray
    imbalance: np.ndarray  # busiest CPE's tiles over the mean of the active CPEs
    macs_per_cpe: np.ndarray
    flops_per_cpe: np.ndarray
    simd_width: np.ndarray
    simd_fraction: np.ndarray  # share of MACs that run vectorized
    kernel_efficiency: np.ndarray  # P0 issue share of the step's compute (1 = one vector FMA per cycle)
    compute: ComputePlan  # the inner loop on the two pipes (tuner/space/compute.py)
    compute_cycles_per_step: np.ndarray
    share_cycles_per_step: np.ndarray  # register-communication / RMA cost not hidden by compute
    double_buffer_a: np.ndarray
    double_buffer_b: np.ndarray
    share_mode: np.ndarray
    dma_mode: np.ndarray
    arithmetic_intensity: np.ndarray  # flops per main-memory byte of the busiest CPE
    # Two LDM copies of the output tile: a tile's put runs while the next tile computes (None: the
    # space has no db_c knob, one copy, the put is waited on at once).
    double_buffer_c: np.ndarray | None = None
    # Bytes the host reads and writes before the spawn to pack an operand that is not a constant
    # (a constant is packed once when the kernel is compiled). None: the space has no pack knob.
    host_pack_bytes: np.ndarray | None = None
    # What a workload's epilogue adds (tuner/space/epilogue.py: a residual operand's DMA, LDM, work).
    epilogue: EpiloguePlan | None = None
    # The split over core groups (tuner/space/chip.py); None on a one-CG target.
    chip: ChipPlan | None = None

    def __len__(self) -> int:
        return len(self.valid)

    @property
    def cross_cg_bytes(self) -> np.ndarray:
        """Bytes one call moves between core groups: an operand every other CG reads across (each reads
        what the busiest CG's plan fetches), replicated activations, a split reduction's partial sums."""
        if self.chip is None:
            return np.zeros(len(self.valid))
        others = self.chip.cgs - 1
        reads = (np.where(self.chip.cross_a, self.a.total_bytes, 0.0)
                 + np.where(self.chip.cross_b, self.b.total_bytes, 0.0))
        return others * reads + self.chip.cross_bytes

    def row(self, i: int) -> dict[str, float]:
        """A flat dict of one config's figures (for reports and tests)."""
        out: dict[str, float] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, (BufferPlan, ComputePlan, ChipPlan)):
                for g in fields(value):
                    out[f"{f.name}_{g.name}"] = float(getattr(value, g.name)[i])
            else:
                out[f.name] = float(value[i])
        return out


def _block_geometry(dims: list[Dim]) -> tuple[np.ndarray, ...]:
    """Contiguous blocks of a row-major tensor box.

    Trailing dimensions the box covers completely merge into one contiguous block; the dimension
    before them is the strided one (uniform gap), the ones before that need separate descriptors.
    Returns (block elems of the full box, mean block elems, blocks per box (mean), strided
    descriptors per box (mean), box covers its innermost dim completely, row pitch elems).
    """
    n = len(dims)
    block_full = dims[-1].full.copy()
    block_mean = dims[-1].mean.copy()
    merging = np.ones_like(block_full, dtype=bool)
    outer_mean = np.ones_like(block_full)  # product of means of dims outside the block
    desc_mean = np.ones_like(block_full)
    last_outer = np.ones_like(block_full)  # mean extent of the strided dim
    for j in range(n - 2, -1, -1):
        covered = merging & (dims[j + 1].full >= dims[j + 1].extent)
        block_full = np.where(covered, block_full * dims[j].full, block_full)
        block_mean = np.where(covered, block_mean * dims[j].mean, block_mean)
        # first dim outside the block is the strided one; later ones multiply descriptors
        first_outside = merging & ~covered
        desc_mean = np.where(~merging, desc_mean * dims[j].mean, desc_mean)
        last_outer = np.where(first_outside, dims[j].mean, last_outer)
        outer_mean = np.where(covered, outer_mean, outer_mean * dims[j].mean)
        merging = covered
    inner_full = dims[-1].full >= dims[-1].extent
    pitch = np.full_like(block_full, dims[-1].extent, dtype=np.float64)
    return block_full, block_mean, outer_mean, desc_mean, inner_full, pitch, last_outer


def _plan(dims: list[Dim], dtype_bytes: int, loads: np.ndarray, split: np.ndarray, dma_mode: np.ndarray,
          total_loads: np.ndarray, put_lines: np.ndarray | None = None
          ) -> tuple[BufferPlan, np.ndarray, np.ndarray]:
    """DMA plan of one tensor, plus (line rule holds, descriptor limits hold) per config.

    ``loads``/``split`` give the busiest CPE's share; ``total_loads`` is the exact number of tile
    fetches over the mesh (a shared fetch counted once). Box sizes are means over tiles, which is
    exact for totals because every box dimension follows one tiled axis.
    """
    block_full, block_mean, blocks, descs, inner_full, pitch, _ = _block_geometry(dims)
    box_full = np.ones_like(block_full)
    box_mean = np.ones_like(block_full)
    for d in dims:
        box_full = box_full * d.full
        box_mean = box_mean * d.mean
    block_bytes_full = block_full * dtype_bytes
    # A block starts on a line only if both its size and the tensor's row pitch are whole lines.
    aligned = (block_bytes_full % LINE == 0) & ((pitch * dtype_bytes) % LINE == 0)
    ldm = box_full * dtype_bytes
    line_ok = np.ones_like(aligned)
    bytes_per_load = box_mean * dtype_bytes
    block_bytes = block_mean * dtype_bytes
    if put_lines is not None:
        # Line-aligned puts: the output's rows are padded to whole lines (in LDM and in memory, the
        # host ignores the pad). Valid when every tile row starts on a line: its bytes are whole
        # lines or it is the only tile along the row.
        row_bytes = dims[-1].full * dtype_bytes
        line_ok = (row_bytes % LINE == 0) | inner_full
        grow = np.ceil(row_bytes / LINE) * LINE / row_bytes
        use = put_lines.astype(bool)
        ldm = np.where(use, ldm * grow, ldm)
        bytes_per_load = np.where(use, bytes_per_load * grow, bytes_per_load)
        block_bytes = np.where(use, block_bytes * grow, block_bytes)
        aligned = aligned | use
    strided = dma_mode == Dma.STRIDED
    reqs_per_load = np.where(strided, descs, blocks)
    blocks_per_req = np.where(strided, blocks / descs, 1.0)
    # A shared tile is fetched once per mesh row/column; the CPEs there split its requests.
    my_loads = loads / split
    plan = BufferPlan(
        ldm_bytes=ldm,
        loads=my_loads,
        requests=my_loads * reqs_per_load,
        bytes=my_loads * bytes_per_load,
        block_bytes=block_bytes,
        blocks_per_request=blocks_per_req,
        aligned=aligned,
        total_requests=total_loads * reqs_per_load,
        total_bytes=total_loads * bytes_per_load,
    )
    limit_ok = (block_bytes_full <= DMA_BSIZE_MAX) & (ldm <= DMA_LEN_MAX)
    return plan, line_ok, limit_ok


def _lines_padded(dims: list[Dim], dtype_bytes: int, put_lines: np.ndarray) -> list[Dim]:
    """The output box as laid out in LDM: with ``put_lines`` its rows are padded to whole lines (as
    :func:`_plan` charges and tuner/codegen/boxes.py lays out), which sets its stride along every
    other dimension -- a one-column tile is not contiguous along k then."""
    last = dims[-1]
    padded = np.ceil(last.full * dtype_bytes / LINE) * LINE / dtype_bytes
    return [*dims[:-1], Dim(np.where(put_lines.astype(bool), padded, last.full), last.mean, last.extent)]


def packed_plan(plan: BufferPlan, dims: list[Dim], dtype_bytes: int, total_loads: np.ndarray,
                use: np.ndarray) -> tuple[BufferPlan, np.ndarray]:
    """The plan of an operand stored pre-tiled (``pack``), where ``use``; plus whether it can be.

    A packed operand is laid out tile after tile in the order of its box (BLAS/swGEMM packing), so a
    tile is one contiguous request of the whole box and every tile starts on a 128-B line when the
    box is whole lines. Only whole tiles pack: every box dimension divides its tensor extent (a
    ragged or overlapping box would need a padded or duplicated copy).
    """
    whole = np.ones_like(plan.ldm_bytes, dtype=bool)
    box_bytes = np.full_like(plan.ldm_bytes, float(dtype_bytes))
    for d in dims:
        whole &= (d.mean == d.full) & (np.mod(d.extent, d.full) == 0)
        box_bytes = box_bytes * d.full
    packed = BufferPlan(
        ldm_bytes=plan.ldm_bytes, loads=plan.loads, requests=plan.loads, bytes=plan.bytes,
        block_bytes=box_bytes, blocks_per_request=np.ones_like(box_bytes),
        aligned=np.mod(box_bytes, LINE) == 0, total_requests=total_loads, total_bytes=plan.total_bytes,
    )
    chosen = BufferPlan(**{f.name: np.where(use, getattr(packed, f.name), getattr(plan, f.name))
                           for f in fields(BufferPlan)})
    return chosen, whole


def _merge(plans: list[BufferPlan], n: int) -> BufferPlan:
    """One group's plan from its operands' plans: requests, bytes and LDM summed (exact); the block
    size is the bytes-weighted mean block of its operands (the one approximation the simulator sees
    for a group of several operands with different block sizes). An empty group issues nothing."""
    if len(plans) == 1:
        return plans[0]
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


def analyze(space: ScheduleSpace, index: np.ndarray) -> Analysis:
    """Analyse configs given as an (n, n_knobs) matrix of choice indices."""
    index = np.atleast_2d(np.asarray(index, dtype=np.int64))
    geo, target, wl = space.geometry, space.target, space.workload
    v = {k.name: space.codes[j][index[:, j]] for j, k in enumerate(space.knobs)}
    n = index.shape[0]
    ds = wl.dtype_bytes
    t: dict[str, AxisTiles] = {a.name: axis_tiles(a.extent, v[f"tile_{a.name}"]) for a in geo.axes}
    pr, pc = space.grid_rows[index[:, space.knob_index["grid"]]], space.grid_cols[index[:, space.knob_index["grid"]]]
    share, dma_mode = v["share"], v["dma"]
    db_a, db_b = v["db_a"].astype(bool), v["db_b"].astype(bool)
    db_c = v["db_c"].astype(bool) if "db_c" in v else np.zeros(n, dtype=bool)

    rows_total = np.ones(n)
    cols_total = np.ones(n)
    out_mean = np.ones(n)
    out_full = np.ones(n)
    for a in geo.axes:
        if a.role == "row":
            rows_total = rows_total * t[a.name].count
        elif a.role == "col":
            cols_total = cols_total * t[a.name].count
        if a.role != "red":
            out_mean = out_mean * t[a.name].mean
            out_full = out_full * t[a.name].full
    red = t[geo.red_axis.name]
    boxes, out_box = geo.boxes(t)
    # Split over core groups (tuner/space/chip.py): the counts below are the busiest CG's share.
    group_bytes = {"a": 0.0, "b": 0.0}
    for op, box in zip(geo.operands, boxes):
        group_bytes[op.group] += tensor_bytes(box, ds)
    chip = plan_chip(v, n, rows_total, cols_total, np.ceil(geo.red_axis.extent / red.full), group_bytes,
                     geo.b_constant, tensor_bytes(out_box, ds), has_epilogue(wl))
    rows_total, cols_total = chip.rows_total, chip.cols_total
    k_tiles = chip.k_tiles  # tiles of the reduction axis (= chunks unless mesh)

    rows_cpe, cols_cpe = np.ceil(rows_total / pr), np.ceil(cols_total / pc)
    tiles_cpe = rows_cpe * cols_cpe
    active = np.minimum(pr, rows_total) * np.minimum(pc, cols_total)
    imbalance = tiles_cpe * active / (rows_total * cols_total)

    # Sharing: group a is shared along a mesh row (pc CPEs), group b along a column (pr CPEs).
    group_a, group_b = geo.group("a"), geo.group("b")
    on_mesh = (pr <= target.mesh_rows) & (pc <= target.mesh_cols)
    a_ok = np.logical_and.reduce([geo.shareable(op, t, pr) for op in group_a] + [np.ones(n, dtype=bool)])
    b_ok = np.logical_and.reduce([geo.shareable(op, t, pr) for op in group_b] + [np.ones(n, dtype=bool)])
    sharing = share != Share.NONE
    a_shared = sharing & a_ok & (pc > 1) & bool(group_a)
    b_shared = sharing & b_ok & (pr > 1) & bool(group_b)
    mesh = share == Share.MESH
    kf = np.where(mesh, pr, 1.0)  # with RLC/RMA a row's CPEs each hold a slice of a kf*tk chunk
    chunks = np.ceil(k_tiles / kf)
    steps = tiles_cpe * chunks

    # Loads per CPE. Without a reduction split, consecutive tiles of one CPE reuse the operands that
    # the traversal order keeps fixed (row order keeps group a, column order group b), when the
    # kept operand's box does not change with the other tile index (conv groups: the data follows
    # the k tile; batch_matmul: B follows the batch).
    single_chunk = k_tiles == 1
    row_order = v["tile_order"] == Order.ROW
    # Exact fetch counts over the mesh. Unshared: every CPE fetches for each of its tiles (once per
    # row tile when reused, by every CPE that has col tiles). Shared (bcast, mesh): a mesh row
    # (column) walks its rounds in lock step and fetches each (tile, k tile) once for all its CPEs
    # -- bcast splits the requests over the row, mesh has one owner per k tile (k tile t: column
    # t % p fetches a, row t % p fetches b, then sends it over the row / column).
    col_rounds, row_rounds = np.ceil(cols_total / pc), np.ceil(rows_total / pr)
    packed_b = (v["pack"] == Pack.B) if "pack" in v else np.zeros(n, dtype=bool)
    b_whole = np.ones(n, dtype=bool)

    def plans(is_a: bool) -> tuple[list[BufferPlan], np.ndarray, np.ndarray]:
        out, limits, fetches = [], np.ones(n, dtype=bool), np.zeros(n)
        shared = a_shared if is_a else b_shared
        bcast = shared & (share == Share.BCAST)
        split = np.where(bcast, np.minimum(pc, cols_total) if is_a else np.minimum(pr, rows_total), 1.0)
        own, other = (rows_total, cols_total) if is_a else (cols_total, rows_total)
        other_p, rounds = (pc, col_rounds) if is_a else (pr, row_rounds)
        for op, box in zip(geo.operands, boxes):
            if (op.group == "a") != is_a:
                continue
            reuse = single_chunk & (row_order if is_a else ~row_order) & geo.reusable(op, t)
            loads = np.where(reuse, rows_cpe if is_a else cols_cpe, steps)
            total = np.where(shared, np.where(reuse, own, own * rounds * k_tiles),
                             np.where(reuse, own * np.minimum(other_p, other), rows_total * cols_total * k_tiles))
            plan, _, limit = _plan(box, ds, loads, split, dma_mode, total)
            if not is_a:  # the pack knob stores every b operand tile after tile
                plan, whole = packed_plan(plan, box, ds, total, packed_b)
                np.logical_and(b_whole, whole, out=b_whole)
            out.append(plan)
            limits &= limit
            fetches = np.maximum(fetches, loads)
        return out, limits, fetches

    # ``fetches``: tile fetches of the busiest CPE before a bcast splits their requests (what it packs)
    a_plans, limit_a, fetches_a = plans(True)
    b_plans, limit_b, fetches_b = plans(False)
    plan_a, plan_b = _merge(a_plans, n), _merge(b_plans, n)
    # A constant b (weights) is packed when the kernel is compiled; any other b is packed by the host
    # before every call: one read and one write of the whole tensor.
    host_pack = np.where(packed_b & (not geo.b_constant), 2.0 * geo.b_elements * ds, 0.0)
    plan_c, lines_c, limit_c = _plan(out_box, ds, tiles_cpe, np.ones(n), dma_mode, rows_total * cols_total,
                                     put_lines=v["put_lines"])

    # Inner loop: SIMD, register blocking (unroll), packing of strided operands.
    out_ldm = _lines_padded(out_box, ds, v["put_lines"])
    w = v["simd"]
    inner_code = v["inner"].astype(np.int64)
    gather = {"a": np.zeros(n, dtype=bool), "b": np.zeros(n, dtype=bool)}
    lane = [np.zeros(n, dtype=bool) for _ in geo.operands]  # gathered lane by lane (no packed copy)
    reduction = np.zeros(n, dtype=bool)  # lanes along the reduction: summed at the end of each run
    inner_ext = np.ones(n)
    misaligned = np.zeros(n)
    out_strided = np.zeros(n, dtype=bool)
    body: list[np.ndarray] | None = None  # BodyReads fields of an expression body other than c += a*b
    for code, name in enumerate(geo.inner_axes):
        sel = inner_code == code
        if not sel.any():
            continue
        acc = geo.inner_access(name, t, boxes, out_ldm, w)
        for i, op in enumerate(geo.operands):
            gather[op.group] = np.where(sel, gather[op.group] | acc.gather[i], gather[op.group])
            lane[i] = np.where(sel, acc.lane[i], lane[i])
        reduction = np.where(sel, name == geo.red_axis.name, reduction)
        inner_ext = np.where(sel, t[name].full, inner_ext)
        misaligned = np.where(sel, acc.misaligned, misaligned)
        out_strided = np.where(sel, acc.out_strided, out_strided)
        if acc.body is not None:
            parts = [getattr(acc.body, f.name) for f in fields(BodyReads)]
            body = parts if body is None else [np.where(sel, p, q) for p, q in zip(parts, body)]
    vector = w > 1
    simd_fraction = np.where(vector, np.floor(inner_ext / w) * w / inner_ext, 0.0)
    pack_a, pack_b = vector & gather["a"], vector & gather["b"]
    ldm_pack = np.where(pack_a, plan_a.ldm_bytes, 0.0) + np.where(pack_b, plan_b.ldm_bytes, 0.0)

    macs_tile = out_mean * geo.red_axis.extent * geo.red_fixed * chip.red_share
    fma_step = macs_tile * geo.fma_per_point / chunks
    # Every CPE packs the whole tile it holds, however many CPEs shared the fetch: with bcast a
    # row (column) splits the requests (plan.loads is this CPE's share of them), not the packing.
    pack_elems = (np.where(pack_a, fetches_a / np.maximum(steps, 1) * plan_a.ldm_bytes / ds, 0.0)
                  + np.where(pack_b, fetches_b / np.maximum(steps, 1) * plan_b.ldm_bytes / ds, 0.0))
    # acc = "reg": the register block the generated C holds (rows along the largest other output tile)
    shape = block_shape(inner_code, geo.inner_axes, list(geo.row_axes) + list(geo.col_axes),
                        {a.name: t[a.name].full for a in geo.axes}, geo.operand_axes, lane, red.mean < red.full)
    acc_reg = v["acc"] == Acc.REG
    cp = inner_loop(target, w, v["unroll"], reduction, acc_reg, inner_ext, out_full, out_mean, fma_step,
                    simd_fraction, pack_elems, np.where(vector, misaligned, 0.0),
                    red.full if geo.red_innermost == 0 else np.full(n, float(geo.red_innermost)),
                    out_strided & vector, shape, BodyReads(*body) if body is not None else None)
    compute = cp.cycles

    # Register communication / RMA: the row (column) bus carries the row's a (b) k tiles of a chunk,
    # as many as exist (fewer than kf when the reduction has fewer tiles: the C sends only those).
    piece_a = plan_a.ldm_bytes
    piece_b = plan_b.ldm_bytes
    k_sent = np.where(mesh, k_tiles / chunks, 1.0)
    bus = np.maximum(piece_a, piece_b) * k_sent / target.share_bytes_per_cycle
    share_cost = np.where(mesh, k_sent * target.share_latency_cycles + np.maximum(0.0, bus - compute), 0.0)
    if target.sharing is Sharing.RLC:  # the CPEs issue it (tuner/space/compute.py, printer's sw_rlc_*)
        rlc_ops = (np.where(a_shared, mesh_rlc_ops(target, piece_a, pc, k_sent), 0.0)
                   + np.where(b_shared, mesh_rlc_ops(target, piece_b, pr, k_sent), 0.0))
        col = bcast_column_rlc(target, plan_b.requests / np.maximum(plan_b.loads, 1e-12),
                               plan_b.bytes / np.maximum(plan_b.requests, 1e-12), ds, pr)
        share_cost = share_cost + np.where(mesh, rlc_ops, 0.0) + np.where(
            b_shared & (share == Share.BCAST), col.cycles * fetches_b / np.maximum(steps, 1.0), 0.0)

    ldm_a = plan_a.ldm_bytes * np.where(db_a, 2, 1)
    ldm_b = plan_b.ldm_bytes * np.where(db_b, 2, 1)
    ldm_c = plan_c.ldm_bytes * np.where(db_c, 2, 1)
    ldm_total = ldm_a + ldm_b + ldm_c + ldm_pack
    ep = plan_epilogue(wl, plan_c, ds, v["put_lines"])  # None unless the workload has an epilogue
    if ep is not None:
        ldm_total = ldm_total + ep.ldm_bytes

    reason = np.zeros(n, dtype=np.int64)

    def fail(why: Reason, bad: np.ndarray) -> None:
        np.putmask(reason, (reason == Reason.OK) & bad, int(why))

    fail(Reason.LDM_OVERFLOW, ldm_total > target.ldm_budget_bytes)
    fail(Reason.SHARING_NEEDS_MESH_GRID, sharing & (~on_mesh | ((pr == 1) & (pc == 1))))
    fail(Reason.RLC_NEEDS_SQUARE_GRID, mesh & ((pr != pc) | (pr < 2)))
    fail(Reason.OPERAND_NOT_SHAREABLE, (mesh & ~(a_ok & b_ok)) | (sharing & ~a_shared & ~b_shared))
    fail(Reason.PUT_LINES_UNALIGNED, v["put_lines"].astype(bool) & ~lines_c)
    fail(Reason.DMA_DESCRIPTOR_LIMIT, ~(limit_a & limit_b & limit_c))
    # lanes along the reduction already keep acc in registers
    fail(Reason.ACC_REG_NEEDS_OUTPUT_INNER, acc_reg & reduction)
    fail(Reason.PACK_NEEDS_WHOLE_TILES, packed_b & ~b_whole)
    if ep is not None:
        fail(Reason.EPILOGUE_NEEDS_DENSE_ROWS, ep.invalid)
    for why in np.unique(chip.reason[chip.reason != Reason.OK]):
        fail(Reason(int(why)), chip.reason == why)

    macs_cpe = tiles_cpe * macs_tile
    flops_cpe = macs_cpe * geo.ops_per_point
    mem_bytes = plan_a.bytes + plan_b.bytes + plan_c.bytes
    return Analysis(
        valid=reason == Reason.OK, reason=reason,
        ldm_a=ldm_a, ldm_b=ldm_b, ldm_c=ldm_c, ldm_pack=ldm_pack, ldm_total=ldm_total,
        a=plan_a, b=plan_b, c=plan_c,
        pr=pr, pc=pc, active_cpes=active, tiles_per_cpe=tiles_cpe, steps_per_cpe=steps,
        chunks_per_tile=chunks, imbalance=imbalance, macs_per_cpe=macs_cpe, flops_per_cpe=flops_cpe,
        simd_width=w, simd_fraction=simd_fraction, kernel_efficiency=cp.efficiency, compute=cp,
        compute_cycles_per_step=compute, share_cycles_per_step=share_cost,
        double_buffer_a=db_a, double_buffer_b=db_b, share_mode=share, dma_mode=dma_mode,
        arithmetic_intensity=flops_cpe / np.maximum(mem_bytes, 1.0), double_buffer_c=db_c,
        host_pack_bytes=host_pack, epilogue=ep, chip=chip if "cgs" in v else None,
    )
