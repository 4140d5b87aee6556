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

Per iteration the slower pipe, or the accumulator chain latency, sets the cycles; counter, branch and
address updates take ``loop_overhead_ops`` P1 slots; a register block needing more than the target's
vector registers spills, each spilled register costing a store and a reload per iteration; a vector
operand load that starts off a vector boundary (a conv's taps along ``ow``) is two loads and a merge.
Each entry
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


class PipeBound(IntEnum):
    """What sets the cycles of an inner-loop iteration."""

    P0 = 0  # floating point / vector issue
    P1 = 1  # LDM load/store and integer issue
    LATENCY = 2  # the accumulator chain (FMA latency, + LDM latency when accumulators live in LDM)


@dataclass
class ComputePlan:
    """Per config: the inner loop's figures for one (tile, chunk) step of the busiest CPE."""

    cycles: np.ndarray  # whole step
    p0_cycles: np.ndarray  # FMA issue: the part of the step a perfect P0 would take
    loop_extra_cycles: np.ndarray  # iterations' cycles beyond P0 issue (P1 traffic or latency)
    overhead_cycles: np.ndarray  # register-block entry, lane reductions, accumulator flushes, packing
    p0_per_iter: np.ndarray
    p1_per_iter: np.ndarray
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
               red_innermost: np.ndarray, acc_strided: np.ndarray | None = None) -> ComputePlan:
    """Cycles of one step from the knobs (``w`` lanes, ``unroll``, ``acc``) and the tile geometry."""
    red = reduction.astype(bool)
    blocked = ~red & acc_reg.astype(bool)  # accumulators held across the reduction (acc = "reg")
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
    registers = u + rb_o + rb_i
    spilled = np.maximum(0.0, registers - target.vector_registers)

    # an unaligned vector load (simd_loadu) is two aligned loads and a merge on P0 [A]
    unaligned = rb_i * misaligned
    p0 = u + unaligned
    p1 = (rb_o + rb_i + unaligned + target.loop_overhead_ops + spilled * target.spill_ops_per_register
          + np.where(in_regs, 0.0, 2.0 * u * acc_moves))
    chain = np.where(in_regs, target.fp_latency_cycles,
                     target.fp_latency_cycles + target.ldm_latency_cycles + 1.0)
    per_iter = np.maximum(np.maximum(p0, p1), chain)
    bound = np.where(per_iter <= p0, PipeBound.P0, np.where(per_iter <= p1, PipeBound.P1, PipeBound.LATENCY))

    lane_cost = simd_fraction / np.maximum(w, 1) + (1.0 - simd_fraction)
    fma_ops = macs_step * lane_cost  # vector FMAs plus the scalar remainder
    iters = fma_ops / u
    # Entries into the innermost loop. Reduction innermost: one per run of a register block (u
    # outputs); output innermost, acc in LDM: rb_o rows share one; acc = "reg": the block's
    # reduction nest is entered once per block and outer reduction index (a conv's c, r: its
    # s loop runs S iterations per entry).
    blocks = out_mean / (u * w)
    red_len = macs_step / np.maximum(out_mean, 1e-12)  # reduction length per output and step
    runs = np.where(red, macs_step / (np.maximum(inner_ext, 1.0) * u),
                    np.where(blocked, blocks * red_len / np.maximum(red_innermost, 1.0),
                             macs_step / (np.maximum(inner_ext, 1.0) * rb_o)))
    # Accumulator flush per run (reduction innermost: zero, reduce lanes, add into LDM) or per block
    # (acc = "reg": load before, store after the reduction).
    log_w = np.log2(np.maximum(w, 1.0))
    flush = np.where(red, np.maximum(u * (2.0 + 2.0 * log_w), 2.0 * u) + target.fp_latency_cycles * (log_w + 1.0),
                     np.where(blocked, 2.0 * u * acc_moves + target.ldm_latency_cycles, 0.0))
    pack = pack_elems * PACK_OPS_PER_ELEM
    flushes = np.where(red, runs, np.where(blocked, blocks, 0.0))
    overhead = runs * target.block_overhead_cycles + flushes * flush + pack

    p0_cycles = iters * u
    loop = iters * per_iter
    cycles = loop + overhead
    return ComputePlan(
        cycles=cycles, p0_cycles=p0_cycles, loop_extra_cycles=loop - p0_cycles, overhead_cycles=overhead,
        p0_per_iter=p0 + 0.0 * w, p1_per_iter=p1, cycles_per_iter=per_iter, bound=bound.astype(np.int64),
        register_block=u, registers=registers, spilled=spilled, acc_in_registers=in_regs,
        efficiency=p0_cycles / np.maximum(cycles, 1e-12),
    )
