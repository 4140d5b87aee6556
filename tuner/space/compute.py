"""The CPE's inner loop on its two pipelines, vectorised over configs: cycles per step and what binds.

A CPE issues in order, two instructions a cycle: P0 takes floating point and vector arithmetic, P1
LDM loads/stores and integer work (FACTS §1a). The register block is ``unroll`` = u accumulator
vectors, rb_o x rb_i (rb_i vectors along the inner axis, as many as the inner tile holds up to
sqrt(u); rb_o = u / rb_i rows along the other output axes): one iteration issues u FMAs on P0 and
rb_o + rb_i operand loads on P1. Where the
accumulators live is set by ``inner`` and the ``acc`` knob:

* ``inner`` is the reduction axis: lanes run along the reduction, the accumulators stay in
  registers for one run of the innermost loop, then each is reduced across its lanes (log2(w)
  shuffle+add pairs) and added into the LDM output tile (the generated C sums lanes per run).
* ``inner`` is an output axis, ``acc = "ldm"``: the reduction loop is outside the inner axis, so
  every accumulator is loaded from and stored to the LDM output tile at every reduction index (2 P1
  ops per FMA vector) and each accumulator chain carries LDM + FMA latency per step. When the output
  tile is strided along the inner axis (a conv's output channels, a GEMM's m) a vector of
  accumulators is w scalar loads and w scalar stores (the generated C moves it lane by lane).
* ``inner`` is an output axis, ``acc = "reg"``: the register block is outside the chunk's
  reduction loop (swGEMM's 4x4 doublev4 micro-kernel): accumulators are loaded once per block and
  chunk, stay in registers across the reduction, and are stored back at its end.

The block of ``acc = "reg"`` is the one the generated C holds (tuner/codegen/schedule.py
register_block, printed by tuner/ir/cprint/register_block.py microkernel) when the analysis passes its
:class:`BlockShape`: rb_i*w elements of the inner tile cut down to a divisor of it (whole vectors,
then scalar lanes), rb_o rows of the largest other output tile cut down to a divisor of it, each
operand loaded once per row it moves with and once per vector (or scalar lane) it moves with; an op
with no other output axis has no block and keeps its accumulators in LDM. A lane operand that cannot
be repacked into a unit-stride copy (a conv's data along ``ow`` at a stride) is gathered lane by
lane: w scalar loads per vector, in every vector loop. Every block of a full tile runs, a ragged tile's edge
blocks included (they store under the predicate), so the block's work follows the full tile.

Per iteration the slower pipe, or the accumulator chain latency, sets the cycles; counter, branch and
address updates take ``loop_overhead_ops`` P1 slots; a register block needing more than the target's
vector registers spills, each spilled register costing a store and a reload per iteration; a vector
operand load that starts off a vector boundary (a conv's taps along ``ow``) is two loads and a merge.
An expression body other than ``c += a*b`` (tuner/ir/cprint/expr_vector.py, one vector of points per
trip, no register block) is charged its own reads instead (:class:`BodyReads`): per trip, one load per
operand read that is a broadcast or a unit-stride vector, two loads and a merge for such a vector that
starts off a vector boundary, w scalar loads for one gathered lane by lane; and its output's traffic
per trip (a load where the body reads it, a store; lane by lane when strided) instead of a load and a
store per FMA. Each entry
into the innermost loop costs ``block_overhead_cycles``. Packing a strided operand into a unit-stride
copy is a scalar load + store per element on P1. Left out: instruction-cache misses and the
scheduling quality of a given compiler (hand-written assembly such as swGEMM's 16-cycle 4x4 loop
issues as modelled; compiled C may not).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tuner.targets import Target

PACK_OPS_PER_ELEM = 2.0  # a scalar load and a store on P1 per packed element
RAGGED_GUARD_OPS = 2.0  # a compare and a branch on P1 per reduction step under a ragged tile's bound [A]


class PipeBound(IntEnum):
    """What sets the cycles of an inner-loop iteration."""

    P0 = 0  # floating point / vector issue
    P1 = 1  # LDM load/store and integer issue
    LATENCY = 2  # the accumulator chain (FMA latency, + LDM latency when accumulators live in LDM)


@dataclass(frozen=True)
class BlockShape:
    """Per config: what the generated register block is made of (see the module docstring)."""

    rows_ext: np.ndarray  # full tile of the output axis the rows run along (largest other one); 0: none
    lanes_dep: tuple[np.ndarray, ...]  # per operand: it moves with the inner axis
    rows_dep: tuple[np.ndarray, ...]  # per operand: it moves with the rows axis
    # per operand: a vector of it is gathered lane by lane (w scalar loads): strided along the lanes
    # and not repackable into a unit-stride copy (tuner/ir/cprint/lanes.py gathered_dims)
    gathered: tuple[np.ndarray, ...]
    # the reduction tile is ragged: every reduction step of the block runs under its bound
    # (a compare and a branch on P1 [A])
    red_ragged: np.ndarray


@dataclass(frozen=True)
class BodyReads:
    """Per config: the operand loads of one trip of an expression body's vector loop (w points).

    ``loads`` counts every LDM load (a broadcast or a unit-stride vector: 1, a gathered vector: w, an
    unaligned vector: 1 here plus 1 in ``unaligned``); ``instructions`` is the trip's P0 issue (the
    body's instructions per point), what converts a trip into the model's iterations of u P0 slots;
    ``out_ops`` the output's P1 ops per trip when the lanes run along an output axis.
    """

    loads: np.ndarray
    unaligned: np.ndarray
    instructions: np.ndarray
    out_ops: np.ndarray


def block_shape(inner_code: np.ndarray, inner_axes: tuple[str, ...], out_axes: list[str],
                full: dict[str, np.ndarray], operand_axes: list[set[str]],
                gathered: list[np.ndarray] | None = None, red_ragged: np.ndarray | None = None) -> BlockShape:
    """The rows axis of each config's block, as tuner/codegen/schedule.py register_block picks it.

    Among the output axes other than the inner one (``out_axes`` order: row axes, then col axes),
    preferably one that no operand moving with the lanes moves with (so each row is one broadcast,
    swGEMM's outer product) and whose tile is at least 2; else any. The first with the largest tile.
    """
    n = len(inner_code)
    rows_ext = np.zeros(n)
    lanes = [np.zeros(n, dtype=bool) for _ in operand_axes]
    rows = [np.zeros(n, dtype=bool) for _ in operand_axes]
    for code, inner in enumerate(inner_axes):
        sel = inner_code == code
        if not sel.any():
            continue
        name, ext = rows_axis(inner, out_axes, full, operand_axes)
        rows_ext = np.where(sel, ext, rows_ext)
        for j, used in enumerate(operand_axes):
            lanes[j] = np.where(sel, inner in used, lanes[j])
            on_rows = np.zeros(n, dtype=bool)
            for i, axis in enumerate(out_axes):
                if axis in used:
                    on_rows |= name == i
            rows[j] = np.where(sel, on_rows, rows[j])
    gath = tuple(gathered) if gathered is not None else tuple(np.zeros(n, dtype=bool) for _ in operand_axes)
    ragged = red_ragged if red_ragged is not None else np.zeros(n, dtype=bool)
    return BlockShape(rows_ext, tuple(lanes), tuple(rows), gath, ragged)


def rows_axis(inner: str, out_axes: list[str], full: dict[str, np.ndarray],
              operand_axes: list[set[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``out_axes`` or -1, its full tile or 0) of the block's rows axis (see block_shape)."""
    lanes_axes = set().union(*(u for u in operand_axes if inner in u)) if operand_axes else set()
    shape = np.shape(next(iter(full.values())))

    def first_max(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        best, axis = np.zeros(shape), np.full(shape, -1)
        for i, axis_name in enumerate(out_axes):
            if axis_name in names:
                better = full[axis_name] > best
                best = np.where(better, full[axis_name], best)
                axis = np.where(better, i, axis)
        return axis, best

    others = [a for a in out_axes if a != inner]
    clean_axis, clean_ext = first_max([a for a in others if a not in lanes_axes])
    any_axis, any_ext = first_max(others)
    use_clean = clean_ext >= 2
    return np.where(use_clean, clean_axis, any_axis), np.where(use_clean, clean_ext, any_ext)


def _divisor_at_most(ext: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """The largest divisor of each ``ext`` that is at most ``limit`` (both whole numbers >= 1)."""
    limit = np.floor(np.maximum(1.0, np.minimum(limit, ext)))
    out = limit.copy()
    ragged = np.mod(ext, limit) != 0  # most tiles and blocks are powers of two: the limit divides
    if ragged.any():
        e, lim = ext[ragged], limit[ragged]
        best = np.ones_like(e)
        for d in range(2, int(lim.max()) + 1):
            best = np.where((d <= lim) & (np.mod(e, d) == 0), float(d), best)
        out[ragged] = best
    return out


@dataclass
class ComputePlan:
    """Per config: the inner loop's figures for one (tile, chunk) step of the busiest CPE."""

    cycles: np.ndarray  # whole step
    p0_cycles: np.ndarray  # FMA issue: the part of the step a perfect P0 would take
    loop_extra_cycles: np.ndarray  # iterations' cycles beyond P0 issue (P1 traffic or latency)
    overhead_cycles: np.ndarray  # register-block entry, lane reductions, accumulator flushes, packing
    p0_per_iter: np.ndarray
    p1_per_iter: np.ndarray
    operand_loads: np.ndarray  # LDM operand loads per iteration (an unaligned one counts once)
    cycles_per_iter: np.ndarray
    bound: np.ndarray  # PipeBound per config
    register_block: np.ndarray  # accumulator vectors (u)
    registers: np.ndarray  # vector registers the block needs
    spilled: np.ndarray  # registers beyond the file
    acc_in_registers: np.ndarray  # accumulators stay in registers across the chunk's reduction
    efficiency: np.ndarray  # p0_cycles / cycles: 1 = one FMA issued every cycle


def inner_loop(target: Target, w: np.ndarray, unroll: np.ndarray, reduction: np.ndarray, acc_reg: np.ndarray,
               inner_ext: np.ndarray, out_tile_full: np.ndarray, out_mean: np.ndarray, macs_step: np.ndarray,
               simd_fraction: np.ndarray, pack_elems: np.ndarray, misaligned: np.ndarray,
               red_innermost: np.ndarray, acc_strided: np.ndarray | None = None,
               block: BlockShape | None = None, body: BodyReads | None = None) -> ComputePlan:
    """Cycles of one step from the knobs (``w`` lanes, ``unroll``, ``acc``) and the tile geometry."""
    red = reduction.astype(bool)
    blocked = ~red & acc_reg.astype(bool)  # accumulators held across the reduction (acc = "reg")
    if block is not None:  # no other output axis: the generated C has no block, accumulators in LDM
        blocked = blocked & (block.rows_ext > 0)
    in_regs = red | blocked
    # an accumulator vector of an output tile strided along the inner axis is w scalar loads (stores)
    acc_moves = np.where(acc_strided, w, 1.0) if acc_strided is not None else np.ones_like(w)
    lanes_out = np.where(red, 1.0, w)  # output elements one accumulator holds
    u = np.minimum(unroll, np.maximum(1.0, np.floor(out_tile_full / lanes_out)))
    # The block is as square as the tile allows: rb_i vectors along the inner axis (at most the
    # vectors the inner tile holds, when the inner axis is an output axis), rb_o = u / rb_i rows
    # along the other output axes, one operand load each.
    along_inner = np.where(red, np.inf, np.maximum(1.0, np.floor(inner_ext / np.maximum(w, 1.0))))
    rb_i = np.minimum(2.0 ** np.ceil(np.log2(u) / 2), 2.0 ** np.floor(np.log2(np.minimum(along_inner, u))))
    rb_o = u / rb_i
    loads = rb_o + rb_i
    unaligned = rb_i * misaligned  # an unaligned vector load (simd_loadu): two loads and a merge [A]
    lane_cost = simd_fraction / np.maximum(w, 1) + (1.0 - simd_fraction)
    macs_iter = u * np.where(red, w, lanes_out)  # MACs one iteration covers (per FMA: its lanes)
    fma_iter = u.copy()
    acc_vecs, acc_scalars = u.copy(), np.zeros_like(u)
    guard_ops = np.zeros_like(u)
    if block is not None:
        # a vector loop whose lane operand is gathered lane by lane loads w scalars per vector
        lane_gathered = np.zeros(len(u), dtype=bool)
        for lanes_dep, g in zip(block.lanes_dep, block.gathered):
            lane_gathered |= lanes_dep & g
        loads = loads + np.where(lane_gathered & (w > 1), rb_i * (w - 1.0), 0.0)
        # the generated block: the inner part cut to a divisor of the inner tile (nv vectors, rem
        # scalar lanes), the rows to a divisor of the rows axis' tile; loads per operand
        vec = w > 1
        ii = _divisor_at_most(inner_ext, rb_i * w)
        nv = np.where(vec, np.floor(ii / np.maximum(w, 1.0)), 0.0)
        rem = ii - nv * np.where(vec, w, 1.0)
        rows = _divisor_at_most(np.maximum(block.rows_ext, 1.0), np.floor(u / rb_i))
        b_loads = np.zeros_like(u)
        b_vec_loads = np.zeros_like(u)
        for lanes_dep, rows_dep, g in zip(block.lanes_dep, block.rows_dep, block.gathered):
            per = np.where(rows_dep, rows, 1.0)
            vec_loads = np.where(g, nv * w, nv)  # a gathered vector: w scalar loads
            b_loads = b_loads + per * np.where(lanes_dep, vec_loads + rem, (nv > 0).astype(float) + (rem > 0))
            b_vec_loads = b_vec_loads + np.where(lanes_dep & ~g, per * nv, 0.0)
        # a packed operand is padded to whole vectors: its loads are aligned unless scalar lanes follow
        b_unaligned = b_vec_loads * np.where(rem > 0, 1.0, misaligned)
        b_fma = rows * (nv + rem)
        loads = np.where(blocked, b_loads, loads)
        guard_ops = np.where(blocked & block.red_ragged, RAGGED_GUARD_OPS, 0.0)
        unaligned = np.where(blocked, b_unaligned, unaligned)
        fma_iter = np.where(blocked, b_fma, fma_iter)
        macs_iter = np.where(blocked, rows * ii, macs_iter)
        acc_vecs = np.where(blocked, rows * nv, acc_vecs)
        acc_scalars = np.where(blocked, rows * rem, acc_scalars)
        u = np.where(blocked, b_fma, u)
    acc_ops = 2.0 * u * acc_moves  # accumulators in LDM: a load and a store per FMA vector
    if body is not None:  # an expression body's own reads, per trip of ``instructions`` P0 slots
        trips = u / np.maximum(body.instructions, 1.0)
        loads = np.where(blocked, loads, trips * body.loads)
        unaligned = np.where(blocked, unaligned, trips * body.unaligned)
        acc_ops = trips * body.out_ops
    registers = np.where(red | ~blocked | (block is None), u + rb_o + rb_i, fma_iter + loads)
    spilled = np.maximum(0.0, registers - target.vector_registers)

    p0 = fma_iter * target.p0_cycles_per_fma + unaligned  # the profile's issue rate (1: one FMA a cycle)
    p1 = (loads + unaligned + guard_ops + target.loop_overhead_ops + spilled * target.spill_ops_per_register
          + np.where(in_regs, 0.0, acc_ops))
    chain = np.where(in_regs, target.fp_latency_cycles,
                     target.fp_latency_cycles + target.ldm_latency_cycles + 1.0)
    per_iter = np.maximum(np.maximum(p0, p1), chain)
    bound = np.where(per_iter <= p0, PipeBound.P0, np.where(per_iter <= p1, PipeBound.P1, PipeBound.LATENCY))

    fma_ops = macs_step * lane_cost  # vector FMAs plus the scalar remainder
    red_len = macs_step / np.maximum(out_mean, 1e-12)  # reduction length per output and step
    # The generated block covers rows*ii MACs an iteration with rows*(nv+rem) FMA instructions, and
    # every block of the full tile runs (a ragged tile's edge blocks run whole, storing under the
    # predicate), so its work follows the full tile, not the outputs the tile holds.
    gen_block = blocked & (block is not None)
    iters = np.where(gen_block, out_tile_full * red_len / np.maximum(macs_iter, 1e-12), fma_ops / u)
    # Entries into the innermost loop. Reduction innermost: one per run of a register block (u
    # outputs); output innermost, acc in LDM: rb_o rows share one; acc = "reg": the block's
    # reduction nest is entered once per block and outer reduction index (a conv's c, r: its
    # s loop runs S iterations per entry).
    blocks = np.where(gen_block, out_tile_full / np.maximum(macs_iter, 1e-12), out_mean / (u * w))
    runs = np.where(red, macs_step / (np.maximum(inner_ext, 1.0) * u),
                    np.where(blocked, blocks * red_len / np.maximum(red_innermost, 1.0),
                             macs_step / (np.maximum(inner_ext, 1.0) * rb_o)))
    # Accumulator flush per run (reduction innermost: zero, reduce lanes, add into LDM) or per block
    # (acc = "reg": load before, store after the reduction).
    log_w = np.log2(np.maximum(w, 1.0))
    flush = np.where(red, np.maximum(u * (2.0 + 2.0 * log_w), 2.0 * u) + target.fp_latency_cycles * (log_w + 1.0),
                     np.where(blocked, 2.0 * (acc_vecs * acc_moves + acc_scalars) + target.ldm_latency_cycles, 0.0))
    pack = pack_elems * PACK_OPS_PER_ELEM
    flushes = np.where(red, runs, np.where(blocked, blocks, 0.0))
    overhead = runs * target.block_overhead_cycles + flushes * flush + pack

    p0_cycles = iters * fma_iter * target.p0_cycles_per_fma
    loop = iters * per_iter
    cycles = loop + overhead
    return ComputePlan(
        cycles=cycles, p0_cycles=p0_cycles, loop_extra_cycles=loop - p0_cycles, overhead_cycles=overhead,
        p0_per_iter=p0 + 0.0 * w, p1_per_iter=p1, operand_loads=loads, cycles_per_iter=per_iter,
        bound=bound.astype(np.int64),
        register_block=u, registers=registers, spilled=spilled, acc_in_registers=in_regs,
        efficiency=p0_cycles / np.maximum(cycles, 1e-12),
    )


# Register communication on SW26010, as the generated C issues it (tuner/codegen/printer.py,
# SW_RLC_HELPER). Each 32-B message is P1 work in its own loop before the step's compute (no FMA to
# pair with), one cycle per op.
UNALIGNED_LOAD_EXTRA_OPS = 1.0  # simd_loadu: two loads and a merge, as inner_loop charges it [A]
UNALIGNED_STORE_EXTRA_OPS = 1.0  # simd_storeu: a low and a high partial store (vstd_ul/_uh) [A]
# the tail (< 32 B) of a request goes through memcpy into / out of the message register: a scalar
# load and store per element, and the register itself through LDM once (memcpy takes its address) [A]
TAIL_REGISTER_OPS = 1.0


@dataclass(frozen=True)
class ColumnRlc:
    """Per config, for one fetch of a bcast-shared b tile on SW26010 (``sw_rlc_col_span``): the busiest
    CPE of a column's register communication."""

    puts: np.ndarray  # putc the busiest CPE issues (a whole column of 8: one broadcast per message)
    gets: np.ndarray  # getc it issues
    cycles: np.ndarray  # its P1 ops (load/store forms, sends, receives, tail copies) + the column syncs


def mesh_rlc_ops(target: Target, piece: np.ndarray, p: np.ndarray, k_sent: np.ndarray) -> np.ndarray:
    """P1 ops per step of the busiest CPE for one mesh-shared group (``sw_rlc_row`` / ``sw_rlc_col``).

    ``piece`` bytes per k tile (an LDM copy padded to whole aligned messages), ``p`` CPEs on the row
    (column), ``k_sent`` k tiles the step's chunk holds (fewer than p when the reduction has fewer
    tiles: the C sends only those that exist). Per message the owner issues an aligned load and a
    send -- one broadcast over a whole row of 8 at the latency of a point-to-point message (FACTS §1a),
    one per other CPE over a partial one -- and every
    receiver a get and an aligned store. CPE 0 owns a tile in every chunk, so it is the busiest: one
    send and k_sent - 1 receives per step.
    """
    send = np.where(p >= target.mesh_cols, 2.0, p)
    return piece / (target.vector_bits / 8) * (send + 2.0 * (k_sent - 1.0))


def bcast_column_rlc(target: Target, requests: np.ndarray, request_bytes: np.ndarray, dtype_bytes: int,
                     p: np.ndarray) -> ColumnRlc:
    """What ``sw_rlc_col_span`` issues for one b tile of ``requests`` DMA requests of ``request_bytes``.

    Request r is fetched by CPE r % p of the column, which then sends its region over the column
    (one owner round per CPE, each closed by a column sync): floor(bytes/32) whole messages by an
    unaligned load and a send (a broadcast over 8 CPEs, p - 1 sends otherwise), every other CPE a get
    and an unaligned store; a ragged tail is one more message copied element by element. CPE 0 owns
    ceil(requests / p) of them, the most; sending costs at least what receiving does, so it is the
    busiest.
    """
    vec = target.vector_bits / 8
    whole = np.floor(request_bytes / vec + 1e-9)
    tail_elems = np.round(request_bytes / dtype_bytes - whole * vec / dtype_bytes)
    tail = (tail_elems > 0).astype(float)
    msgs = whole + tail  # ceil(bytes / 32)
    sends = np.where(p >= target.mesh_rows, 1.0, p - 1.0)
    copy = tail * (PACK_OPS_PER_ELEM * tail_elems + TAIL_REGISTER_OPS)
    send_ops = whole * (1.0 + UNALIGNED_LOAD_EXTRA_OPS + sends) + copy + tail * sends
    recv_ops = whole * (1.0 + 1.0 + UNALIGNED_STORE_EXTRA_OPS) + copy + tail
    own = np.ceil(requests / np.maximum(p, 1.0) - 1e-9)
    recv = requests - own
    return ColumnRlc(puts=own * msgs * sends, gets=recv * msgs,
                     cycles=own * send_ops + recv * recv_ops + p * target.share_latency_cycles)
