"""Region copies as CPE kernels: concat, split, strided_slice, tile and slice_scatter (RegionOp, InterleaveOp).

Each of these operators copies rectangular regions between row-major tensors: concat copies each
input into a box of the output (its slab along the axis), split copies a box of the input into each
output, strided_slice copies a strided box of the input into the output, tile copies the input
into each of the output's repeat boxes, and slice_scatter (a slice's gradient: the positions
start:end:step of one axis replaced by ``src``) copies ``src`` into its strided box of the output and
the input's complement into the rest -- the slabs before and after the slice and, for a step above
1, one strided box per offset between its positions. The regions of one operator never overlap (the
CPEs copy them in no set order). The static parameters come from the Relax call
(tuner.ir.relax_reader puts them on the node as ``attrs["region"]``).

Region form (RegionOp). A region is described per axis by (extent, input stride, output stride) in
elements plus an offset into each tensor; axes of extent 1 are dropped and axes that stay adjacent in
both tensors are merged. After that a region is ``outer`` x ``rows`` x ``run``: a run is the
innermost elements, contiguous in the output and contiguous in the input (or strided by ``ss`` <=
MAX_COMPACT_STRIDE, e.g. a stride-2 slice of the last axis; a larger stride makes runs of one
element), rows are evenly spaced in each tensor (pitches ``sp``, ``dp``), and the outer axes are
decomposed by div/mod. A block is ``n`` consecutive rows of one outer index (or, when a run is
longer than a block, a chunk of one run): one DMA get into LDM (strided -- blocks of a run, gaps of
the pitch's rest -- when the rows are not adjacent in the input; a strided run is got as its whole
span and compacted in LDM) and one DMA put (strided likewise in the output). Each CPE takes blocks
round-robin over all regions of the operator. Blocks hold about 1/64 of the copied elements (so
every CPE gets work), at most the LDM budget the other layout kernels use.

Whole-row form (InterleaveOp: concat, split, a tile along one axis, a strided_slice of one axis,
slice_scatter). Seen as [O, W] rows, a block is consecutive rows: a concat gets each input's piece of
them (contiguous) and interleaves them in LDM into one contiguous put, a split the reverse, a tile
gets once and puts the rows repeated, a strided_slice gets the input's rows and puts the positions
it keeps, a slice_scatter gets the input's rows and the source's, writes the source's into their
positions in LDM and puts the rows. It wins where the region form's DMA blocks are short or strided
(a concat, split, slice or slice_scatter of an inner axis).

The MPE form is the legalized PrimFunc run as plain C (tuner.ir.cprint.legalized); ``plan_copy`` keeps the
faster CPE form, and tuner.aot.cpe_ops.offload keeps it only when the time model says it beats the
MPE (``CpeMode.FASTER``). Not handled (the MPE copy runs): a reversed slice (negative stride), a tile
of more than MAX_REGIONS repeat boxes, and more than MAX_OPERANDS inputs plus outputs (the pointers
swtune_args carries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from math import prod
from typing import Any

import numpy as np

from tuner.aot.cpe_blocks import RowBlocks
from tuner.ir.graph import slave_symbol
from tuner.targets import Target

CPES = 64
MAX_REGIONS = 64  # a tile of more repeats stays on the MPE (one branch of slave code per region)
MAX_OPERANDS = 16  # swtune_args.p holds 16 pointers (inputs, then outputs)
MAX_COMPACT_STRIDE = 8  # a run strided by more in the input: one-element DMA blocks instead of compacting

Dim = tuple[int, int, int]  # (extent, input stride, output stride), in elements


def _strides(shape: tuple[int, ...]) -> list[int]:
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


@dataclass(frozen=True)
class Region:
    """One box copied from input ``src`` to output ``dst`` (indices into the node's operands):
    ``outer`` axes (decomposed by div/mod), then ``n_rows`` rows of ``run`` contiguous elements."""

    src: int
    dst: int
    src_off: int
    dst_off: int
    outer: tuple[Dim, ...]
    n_rows: int
    sp: int  # input pitch of the rows
    dp: int  # output pitch of the rows
    run: int
    ss: int = 1  # input stride of a run's elements (> 1: a strided run, got whole and compacted in LDM)

    @property
    def elems(self) -> int:
        return prod(e for e, _, _ in self.outer) * self.n_rows * self.run


def region(src: int, dst: int, src_off: int, dst_off: int, dims: list[Dim]) -> Region:
    """The canonical region of a box given per axis: unit axes dropped, adjacent axes merged, the
    innermost contiguous axis the run (else a run of one element), the next one the rows."""
    merged: list[Dim] = []
    for e, s, d in dims:
        if e == 1:
            continue
        if merged and merged[-1][1] == e * s and merged[-1][2] == e * d:
            merged[-1] = (merged[-1][0] * e, s, d)
            continue
        merged.append((e, s, d))
    run, ss = 1, 1
    if merged and merged[-1][2] == 1 and 1 <= merged[-1][1] <= MAX_COMPACT_STRIDE:
        run, ss, _ = merged.pop()
    n_rows, sp, dp = merged.pop() if merged else (1, run * ss, run)
    return Region(src, dst, src_off, dst_off, tuple(merged), n_rows, sp, dp, run, ss)


def regions_of(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]
               ) -> list[Region] | None:
    """The regions of a region-copy node (``spec`` from tuner.ir.relax_reader: ("concat", axis),
    ("split", axis), ("strided_slice", axes, begin, end, strides), ("tile",), ("slice_scatter", axis,
    start, end, step)), or None when the shapes do not fit the spec or there are too many regions."""
    op = spec[0]
    if op == "slice_scatter":
        return _scatter_regions(spec, ins, outs)
    if op == "concat":
        axis, out = spec[1], outs[0]
        ost, off, got = _strides(out), 0, []
        for k, shp in enumerate(ins):
            ist = _strides(shp)
            got.append(region(k, 0, 0, off * ost[axis], [(shp[d], ist[d], ost[d]) for d in range(len(out))]))
            off += shp[axis]
        return got if off == out[axis] else None
    if op == "split":
        axis, x = spec[1], ins[0]
        ist, off, got = _strides(x), 0, []
        for k, shp in enumerate(outs):
            ost = _strides(shp)
            got.append(region(0, k, off * ist[axis], 0, [(shp[d], ist[d], ost[d]) for d in range(len(x))]))
            off += shp[axis]
        return got if off == x[axis] else None
    if op == "strided_slice":
        _, axes, begin, end, strides = spec
        x, out = ins[0], outs[0]
        start, step = [0] * len(x), [1] * len(x)
        for a, b, e, s in zip(axes, begin, end, strides):
            if s <= 0:
                return None  # a reversed slice: the MPE copy
            r = range(*slice(b, e, s).indices(x[a]))
            if len(r) != out[a]:
                return None
            start[a], step[a] = r.start, s
        ist, ost = _strides(x), _strides(out)
        return [region(0, 0, sum(b * st for b, st in zip(start, ist)), 0,
                       [(out[d], ist[d] * step[d], ost[d]) for d in range(len(out))])]
    if op == "tile":
        out = outs[0]
        x = (1,) * (len(out) - len(ins[0])) + tuple(ins[0])
        if len(x) != len(out) or any(o % i for o, i in zip(out, x)):
            return None
        reps = [o // i for o, i in zip(out, x)]
        if prod(reps) > MAX_REGIONS:
            return None
        ist, ost = _strides(x), _strides(out)
        dims = [(x[d], ist[d], ost[d]) for d in range(len(out))]
        return [region(0, 0, 0, sum(k * x[d] * ost[d] for d, k in enumerate(ks)), dims)
                for ks in product(*(range(r) for r in reps))]
    return None


def _scatter_regions(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]
                     ) -> list[Region] | None:
    """slice_scatter(input, src, start, end, step, axis): ``src`` (operand 1) into the positions
    start, start + step, ... (below ``end``) along ``axis`` of the output, and the input (operand 0)
    at every other position: the slab before the first, the slab after the last and, for a step above
    1, for each offset 1 .. step - 1 the strided box of the positions that far past one of them. None
    when the shapes or bounds are not those of a slice (TOPI's form takes them as given: a negative
    start or a step below 1 stays on the MPE)."""
    _, axis, start, end, step = spec
    if len(ins) != 2 or len(outs) != 1:
        return None
    x, src, out = tuple(ins[0]), tuple(ins[1]), tuple(outs[0])
    if x != out or len(src) != len(out) or step < 1 or start < 0 or \
            any(src[d] != out[d] for d in range(len(out)) if d != axis):
        return None
    pos = range(start, min(end, out[axis]), step)
    if len(pos) != src[axis]:
        return None
    ost, sst = _strides(out), _strides(src)
    got = [region(1, 0, 0, start * ost[axis],
                  [(src[d], sst[d], ost[d] * (step if d == axis else 1)) for d in range(len(out))])]
    # the input's positions along the axis, as (first, count, stride): no position of src among them
    rest = [(0, out[axis], 1)] if not pos else \
        [(0, start, 1), (pos[-1] + 1, out[axis] - pos[-1] - 1, 1),
         *((start + t, len(pos) - 1, step) for t in range(1, step))]
    for first, count, stride in rest:
        if count > 0:
            got.append(region(0, 0, first * ost[axis], first * ost[axis],
                              [(count, ost[d] * stride, ost[d] * stride) if d == axis else (out[d], ost[d], ost[d])
                               for d in range(len(out))]))
    return got if len(got) <= MAX_REGIONS else None


@dataclass
class _Plan:
    """How one region is cut into blocks: ``n`` rows per block, runs in chunks of ``chunk``."""

    n: int
    chunk: int
    outer: int
    row_blocks: int  # per outer index
    chunks: int  # per row

    @property
    def blocks(self) -> int:
        return self.outer * self.row_blocks * self.chunks


@dataclass
class RegionOp:
    """Region copies on the CPEs (interface of tuner.aot.cpe_ops.CpeOp for the host, the slave file,
    the report and the time model)."""

    regions: list[Region]
    n_inputs: int
    q: int  # elements per block aimed at
    item: int
    fit: int = 1 << 30  # LDM budget in elements (a compacted block holds its span and its result)
    axis: int = 0  # (for the report: the concat/split axis)
    seconds: float = 0.0
    index: int = -1
    plans: list[_Plan] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.plans = []
        for g in self.regions:
            outer = prod(e for e, _, _ in g.outer)
            q = self.q if g.ss == 1 else max(1, min(self.q, self.fit // (1 + g.ss)))
            if g.run >= q:
                chunk, n = q, 1
            else:
                chunk, n = g.run, max(1, min(g.n_rows, q // g.run))
            self.plans.append(_Plan(n, chunk, outer, -(-g.n_rows // n), -(-g.run // chunk)))

    @property
    def blocks(self) -> int:
        return sum(p.blocks for p in self.plans)

    @property
    def block(self) -> int:
        return self.q

    @property
    def ldm_elems(self) -> int:
        return max(max(1, p.n * p.chunk) for p in self.plans)

    @property
    def span_elems(self) -> int:
        """The LDM buffer of a compacted region's block: its rows' strided runs as got."""
        return max([1] + [p.n * ((p.chunk - 1) * g.ss + 1) for g, p in zip(self.regions, self.plans) if g.ss > 1])

    @property
    def compacts(self) -> bool:
        return any(g.ss > 1 for g in self.regions)

    @property
    def ldm_bytes(self) -> int:
        return (self.ldm_elems + (self.span_elems if self.compacts else 0)) * self.item

    @property
    def name(self) -> str:
        return slave_symbol(self.index)

    def block_shapes(self, k: int) -> list[tuple[int, int]]:
        """(rows, elements per row) of the blocks of one outer index of region ``k``, in block order
        (each outer index repeats them)."""
        g, p = self.regions[k], self.plans[k]
        rows = [min(p.n, g.n_rows - rb * p.n) for rb in range(p.row_blocks)]
        lens = [min(p.chunk, g.run - c * p.chunk) for c in range(p.chunks)]
        return [(n, ln) for n in rows for ln in lens]

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts): a get and a put per block; a
        compacted block gets its runs' whole spans."""
        got = sum(p.outer * sum(n * ((ln - 1) * g.ss + 1) for n, ln in self.block_shapes(k))
                  for k, (g, p) in enumerate(zip(self.regions, self.plans)))
        nbytes = sum(g.elems for g in self.regions) * self.item
        return {"get_reqs": self.blocks, "get_bytes": got * self.item, "put_reqs": self.blocks, "put_bytes": nbytes}

    def slave_text(self, ty: str) -> str:
        """The CPE kernel as a generated slave file (merged by tuner.aot.kernels)."""
        item = f"sizeof({ty})"
        lines = [f"__thread_local {ty} X_ldm[{self.ldm_elems}];",
                 *([f"__thread_local {ty} P_ldm[{self.span_elems}];"] if self.compacts else []),
                 "__thread_local volatile SW_REPLY_T g_reply[1];",
                 "void swtune_kernel(swtune_args *_arg) {",
                 "  int n_rep = 0;",
                 "  g_reply[0] = 0;",
                 f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                 "    long n = 0, len = 0, sp = 0, dp = 0, ss = 1;",
                 f"    {ty} *src = 0, *dst = 0;"]
        start = 0
        for k, (g, p) in enumerate(zip(self.regions, self.plans)):
            per = p.row_blocks * p.chunks
            lines += [f"    {'if' if k == 0 else '} else if'} (blk < {start + p.blocks}L) {{",
                      f"      const long b = blk - {start}L, rem = b % {per}L;  /* region {k} */",
                      f"      long o = b / {per}L;",
                      f"      const long r0 = rem / {p.chunks}L * {p.n}L, c0 = rem % {p.chunks}L * {p.chunk}L;",
                      f"      long so = {g.src_off}L + r0 * {g.sp}L + c0 * {g.ss}L;",
                      f"      long dof = {g.dst_off}L + r0 * {g.dp}L + c0;"]
            for e, s, d in reversed(g.outer):
                lines.append(f"      so += (o % {e}L) * {s}L; dof += (o % {e}L) * {d}L; o /= {e}L;")
            lines += [f"      n = {g.n_rows}L - r0 < {p.n}L ? {g.n_rows}L - r0 : {p.n}L;",
                      f"      len = {g.run}L - c0 < {p.chunk}L ? {g.run}L - c0 : {p.chunk}L;",
                      f"      sp = {g.sp}L; dp = {g.dp}L; ss = {g.ss}L;",
                      f"      src = _arg->p[{g.src}] + so; dst = _arg->p[{self.n_inputs + g.dst}] + dof;"]
            start += p.blocks
        lines += ["    }"]
        if self.compacts:
            lines += ["    if (ss > 1) {  /* a strided run: get each row's span, keep every ss-th element */",
                      "      const long span = (len - 1) * ss + 1;",
                      "      if (n > 1 && sp != span) {",
                      f"        SW_GET(src, P_ldm, n * span * {item}, span * {item}, (sp - span) * {item}, "
                      "&g_reply[0]);",
                      "      } else {",
                      f"        SW_GET(src, P_ldm, n * span * {item}, 0, 0, &g_reply[0]);",
                      "      }",
                      "      n_rep++;",
                      "      SW_WAIT(&g_reply[0], n_rep);",
                      "      for (long r = 0; r < n; r++) for (long c = 0; c < len; c++) "
                      "X_ldm[r * len + c] = P_ldm[r * span + c * ss];",
                      "    } else {"]
        lines += ["    if (n > 1 && sp != len) {",
                  f"      SW_GET(src, X_ldm, n * len * {item}, len * {item}, (sp - len) * {item}, &g_reply[0]);",
                  "    } else {",
                  f"      SW_GET(src, X_ldm, n * len * {item}, 0, 0, &g_reply[0]);",
                  "    }",
                  "    n_rep++;",
                  "    SW_WAIT(&g_reply[0], n_rep);",
                  *(["    }"] if self.compacts else []),
                  "    if (n > 1 && dp != len) {",
                  f"      SW_PUT(X_ldm, dst, n * len * {item}, len * {item}, (dp - len) * {item}, &g_reply[0]);",
                  "    } else {",
                  f"      SW_PUT(X_ldm, dst, n * len * {item}, 0, 0, &g_reply[0]);",
                  "    }",
                  "    n_rep++;",
                  "    SW_WAIT(&g_reply[0], n_rep);",
                  "  }",
                  "}"]
        return "\n".join(lines) + "\n"


def _seconds(target: Target, op: RegionOp) -> float:
    """Spawn/join, then the busiest CPE's blocks (round-robin): each a get and a put, strided where
    the rows are not adjacent; nothing overlaps (the kernel waits on each request)."""
    from tuner.measure.simulator import dma_time

    active = min(CPES, op.blocks)
    cost: dict[tuple[int, int, int], float] = {}

    def step(k: int, n: int, ln: int) -> float:
        if (k, n, ln) not in cost:
            g, t = op.regions[k], 0.0
            span = (ln - 1) * g.ss + 1
            if g.ss > 1:  # a load and a store per element kept, scalar
                t += 2.0 * n * ln / target.clock_hz
            for kind, pitch, got in (("get", g.sp, span), ("put", g.dp, ln)):
                if n > 1 and pitch != got:
                    t += dma_time(target, kind, got * op.item, n_blocks=n, gap_bytes=(pitch - got) * op.item,
                                  active_cpes=active)
                else:
                    t += dma_time(target, kind, n * got * op.item, active_cpes=active)
            cost[(k, n, ln)] = t
        return cost[(k, n, ln)]

    per_block = np.concatenate([np.tile([step(k, n, ln) for n, ln in op.block_shapes(k)], p.outer)
                                for k, p in enumerate(op.plans)])
    busy = np.bincount(np.arange(per_block.size) % CPES, weights=per_block, minlength=CPES)
    return target.spawn_join_s + float(busy.max())


def plan_region(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], target: Target,
                item: int) -> RegionOp | None:
    """The region-copy kernel of a concat / split / strided_slice / tile node, or None (it stays on
    the MPE): shapes the spec does not describe, too many regions or operands, or nothing to copy."""
    if len(ins) + len(outs) > MAX_OPERANDS:
        return None
    regions = regions_of(spec, ins, outs)
    if not regions:
        return None
    regions = [g for g in regions if g.elems > 0]
    total = sum(g.elems for g in regions)
    fit = target.ldm_budget_bytes // item
    if not total or fit < 1:
        return None
    q = int(max(1, min(fit, -(-total // CPES))))
    axis = spec[1] if spec[0] in ("concat", "split", "slice_scatter") else 0
    op = RegionOp(regions, len(ins), q, item, fit, axis)
    op.seconds = _seconds(target, op)
    return op


@dataclass
class InterleaveOp(RowBlocks):
    """concat / split / a tile along one axis / slice_scatter as whole rows (interface of
    tuner.aot.cpe_ops.CpeOp).

    Seen as [O, W] (O the product of the axes before the concat axis, W the output's row), each input
    of a concat is [O, w_k] (its slab of every row), a split's outputs likewise, and a tile's input
    is [O, w] repeated W / w times. A block is ``rows`` consecutive rows: a concat gets each input's
    rows (contiguous), interleaves them in LDM and puts one contiguous block; a split gets one block
    and puts each output's rows; a tile gets its input's rows once and puts them repeated; a
    slice_scatter gets the input's rows [O, W] and the source's [O, w] (``widths`` = (W - w, w)) and
    writes each of the source's ``w / inner`` slices of ``inner`` elements at position ``start + j *
    step`` of the row before the put; a strided_slice of one axis gets the input's rows [O, W] and
    puts [O, w], those positions' elements (``widths`` likewise). Longer DMA blocks than the region
    form's strided ones when the pieces of a row are short (the last axis)."""

    kind: str  # "concat" | "split" | "tile" | "slice_scatter" | "strided_slice"
    o: int
    widths: tuple[int, ...]  # the pieces of a row (a tile: the one input's row, repeated)
    rows: int
    item: int
    axis: int = 0
    seconds: float = 0.0
    index: int = -1
    start: int = 0  # a slice_scatter's first position along its axis, its step, and the elements
    step: int = 1  # of one position (the axes after it)
    inner: int = 1

    @property
    def total_rows(self) -> int:
        return self.o

    @property
    def width(self) -> int:
        return sum(self.widths)

    @property
    def ldm_bytes(self) -> int:
        return self.rows * (self.width + max(self.widths)) * self.item

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts)."""
        whole = self.o * self.width * self.item
        pieces = self.blocks * len(self.widths)
        if self.kind == "concat":
            return {"get_reqs": pieces, "get_bytes": whole, "put_reqs": self.blocks, "put_bytes": whole}
        if self.kind == "split":
            return {"get_reqs": self.blocks, "get_bytes": whole, "put_reqs": pieces, "put_bytes": whole}
        if self.kind == "slice_scatter":
            return {"get_reqs": 2 * self.blocks, "get_bytes": whole + self.o * self.widths[1] * self.item,
                    "put_reqs": self.blocks, "put_bytes": whole}
        if self.kind == "strided_slice":
            return {"get_reqs": self.blocks, "get_bytes": whole, "put_reqs": self.blocks,
                    "put_bytes": self.o * self.widths[1] * self.item}
        return {"get_reqs": self.blocks, "get_bytes": self.o * self.widths[0] * self.item, "put_reqs": self.blocks,
                "put_bytes": whole}

    def _positions(self, big: int, w: int, assign: str) -> str:
        """The C loop over the ``start:...:step`` positions of a block's rows: ``assign`` names the row's
        element at a position (``{whole}``, in Y_ldm) and the source's (``{picked}``, in S_ldm)."""
        inner = self.inner
        whole = f"Y_ldm[r * {big}L + ({self.start}L + j * {self.step}L) * {inner}L + c]"
        picked = f"S_ldm[r * {w}L + j * {inner}L + c]"
        return (f"    for (long r = 0; r < n; r++) for (long j = 0; j < {w // inner}L; j++) "
                f"for (long c = 0; c < {inner}L; c++) " + assign.format(whole=whole, picked=picked))

    def slave_text(self, ty: str) -> str:
        """The CPE kernel as a generated slave file (merged by tuner.aot.kernels)."""
        item, big = f"sizeof({ty})", self.width
        lines = [f"__thread_local {ty} Y_ldm[{self.rows * big}];",
                 f"__thread_local {ty} S_ldm[{self.rows * max(self.widths)}];",
                 "__thread_local volatile SW_REPLY_T g_reply[1];",
                 "void swtune_kernel(swtune_args *_arg) {",
                 "  int n_rep = 0;",
                 "  g_reply[0] = 0;",
                 f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                 f"    const long o0 = blk * {self.rows}L;",
                 f"    const long n = {self.o}L - o0 < {self.rows}L ? {self.o}L - o0 : {self.rows}L;"]

        def get(mem: str, buf: str, elems: str) -> list[str]:
            return [f"    SW_GET({mem}, {buf}, {elems} * {item}, 0, 0, &g_reply[0]); n_rep++;",
                    "    SW_WAIT(&g_reply[0], n_rep);"]

        def put(buf: str, mem: str, elems: str) -> list[str]:
            return [f"    SW_PUT({buf}, {mem}, {elems} * {item}, 0, 0, &g_reply[0]); n_rep++;",
                    "    SW_WAIT(&g_reply[0], n_rep);"]

        def copy(dst: str, src: str, w: int) -> str:
            return f"    for (long r = 0; r < n; r++) for (long c = 0; c < {w}L; c++) {dst} = {src};"

        off = 0
        if self.kind == "concat":
            for k, w in enumerate(self.widths):
                lines += get(f"_arg->p[{k}] + o0 * {w}L", "S_ldm", f"n * {w}L")
                lines.append(copy(f"Y_ldm[r * {big}L + {off}L + c]", f"S_ldm[r * {w}L + c]", w))
                off += w
            lines += put("Y_ldm", f"_arg->p[{len(self.widths)}] + o0 * {big}L", f"n * {big}L")
        elif self.kind == "slice_scatter":
            w = self.widths[1]
            lines += get(f"_arg->p[0] + o0 * {big}L", "Y_ldm", f"n * {big}L")
            lines += get(f"_arg->p[1] + o0 * {w}L", "S_ldm", f"n * {w}L")
            lines.append(self._positions(big, w, "{whole} = {picked};"))
            lines += put("Y_ldm", f"_arg->p[2] + o0 * {big}L", f"n * {big}L")
        elif self.kind == "strided_slice":
            w = self.widths[1]
            lines += get(f"_arg->p[0] + o0 * {big}L", "Y_ldm", f"n * {big}L")
            lines.append(self._positions(big, w, "{picked} = {whole};"))
            lines += put("S_ldm", f"_arg->p[1] + o0 * {w}L", f"n * {w}L")
        elif self.kind == "split":
            lines += get(f"_arg->p[0] + o0 * {big}L", "Y_ldm", f"n * {big}L")
            for k, w in enumerate(self.widths):
                lines.append(copy(f"S_ldm[r * {w}L + c]", f"Y_ldm[r * {big}L + {off}L + c]", w))
                lines += put("S_ldm", f"_arg->p[{1 + k}] + o0 * {w}L", f"n * {w}L")
                off += w
        else:
            w = self.widths[0]
            lines += get(f"_arg->p[0] + o0 * {w}L", "S_ldm", f"n * {w}L")
            for _ in self.widths:
                lines.append(copy(f"Y_ldm[r * {big}L + {off}L + c]", f"S_ldm[r * {w}L + c]", w))
                off += w
            lines += put("Y_ldm", f"_arg->p[1] + o0 * {big}L", f"n * {big}L")
        lines += ["  }", "}"]
        return "\n".join(lines) + "\n"


def plan_interleave(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], target: Target,
                    item: int) -> InterleaveOp | None:
    """The whole-row form of a concat, a split, a tile along one axis or a slice_scatter, or None
    (another operator, a tile along several axes, or a row that does not fit the LDM budget)."""
    from tuner.measure.simulator import dma_time

    op = spec[0]
    if op == "slice_scatter":
        return _plan_scatter_rows(spec, ins, outs, target, item)
    if op == "strided_slice":
        return _plan_slice_rows(spec, ins, outs, target, item)
    if op == "concat":
        axis, full = spec[1], outs[0]
        parts = ins
    elif op == "split":
        axis, full = spec[1], ins[0]
        parts = outs
    elif op == "tile":
        full = outs[0]
        x = (1,) * (len(full) - len(ins[0])) + tuple(ins[0])
        reps = [o // i for o, i in zip(full, x)]
        if len(x) != len(full) or any(o % i for o, i in zip(full, x)):
            return None
        axes = [d for d, r in enumerate(reps) if r > 1]
        if len(axes) != 1:
            return None
        axis = axes[0]
        parts = [x] * reps[axis]
    else:
        return None
    if len(parts) + 1 > MAX_OPERANDS:
        return None
    o = prod(full[:axis])
    widths = tuple(prod(p[axis:]) for p in parts)
    if sum(widths) != prod(full[axis:]) or min(widths) < 1:
        return None
    fit = target.ldm_budget_bytes // ((sum(widths) + max(widths)) * item)
    if fit < 1:
        return None
    rows = int(max(1, min(fit, -(-o // CPES))))
    kop = InterleaveOp(op, o, widths, rows, item, axis)
    active = min(CPES, kop.blocks)
    pieces = sum(dma_time(target, "get" if op == "concat" else "put", rows * w * item, active_cpes=active)
                 for w in (widths[:1] if op == "tile" else widths))
    whole = dma_time(target, "put" if op != "split" else "get", rows * kop.width * item, active_cpes=active)
    work = 2.0 * rows * kop.width / target.clock_hz  # a load and a store per element, scalar
    kop.seconds = target.spawn_join_s + -(-kop.blocks // CPES) * (pieces + whole + work)
    return kop


def _plan_scatter_rows(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]],
                       target: Target, item: int) -> InterleaveOp | None:
    """A slice_scatter as whole rows (the shapes and bounds checked by ``_scatter_regions``): rows of
    the input and the source got, the source's written into the input's in LDM, the rows put."""
    if _scatter_regions(spec, ins, outs) is None:
        return None
    _, axis, start, _, step = spec
    return _axis_rows("slice_scatter", outs[0], axis, start, step, ins[1][axis], target, item)


def _plan_slice_rows(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]],
                     target: Target, item: int) -> InterleaveOp | None:
    """A strided_slice of one axis (every other axis whole) as whole rows: the input's rows got, the
    positions kept put."""
    if regions_of(spec, ins, outs) is None:
        return None
    _, axes, begin, end, strides = spec
    x = ins[0]
    cut = [(a, range(*slice(b, e, s).indices(x[a]))) for a, b, e, s in zip(axes, begin, end, strides)]
    cut = [(a, r) for a, r in cut if r != range(x[a])]
    if len({a for a, _ in cut}) != 1 or len(cut) != 1:
        return None
    ((axis, kept),) = cut
    return _axis_rows("strided_slice", x, axis, kept.start, kept.step, len(kept), target, item)


def _axis_rows(kind: str, full: tuple[int, ...], axis: int, start: int, step: int, count: int, target: Target,
               item: int) -> InterleaveOp | None:
    """The whole-row kernel of the positions start, start + step, ... (``count`` of them) along ``axis``
    of ``full``: rows [O, W] of ``full`` in LDM, those positions' elements [O, w] beside them."""
    from tuner.measure.simulator import dma_time

    o, inner = prod(full[:axis]), prod(full[axis + 1:])
    big, w = full[axis] * inner, count * inner
    if w < 1:
        return None
    fit = target.ldm_budget_bytes // ((big + max(big - w, w)) * item)
    if fit < 1:
        return None
    rows = int(max(1, min(fit, -(-o // CPES))))
    kop = InterleaveOp(kind, o, (big - w, w), rows, item, axis, start=start, step=step, inner=inner)
    active = min(CPES, kop.blocks)
    if kind == "slice_scatter":  # the input's rows and the source's got, the rows put
        moves = [("get", big), ("get", w), ("put", big)]
    else:  # the input's rows got, the positions kept put
        moves = [("get", big), ("put", w)]
    dma = sum(dma_time(target, d, rows * n * item, active_cpes=active) for d, n in moves)
    work = 2.0 * rows * w / target.clock_hz  # a load and a store per element moved in LDM, scalar
    kop.seconds = target.spawn_join_s + -(-kop.blocks // CPES) * (dma + work)
    return kop


def plan_copy(spec: tuple[Any, ...], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], target: Target,
              item: int, forms: tuple[str, ...] = ("regions", "rows")) -> RegionOp | InterleaveOp | None:
    """The faster of the region form (``plan_region``) and the whole-row form (``plan_interleave``),
    among ``forms``; None when neither applies."""
    got: list[RegionOp | InterleaveOp | None] = []
    if "regions" in forms:
        got.append(plan_region(spec, ins, outs, target, item))
    if "rows" in forms:
        got.append(plan_interleave(spec, ins, outs, target, item))
    found = [op for op in got if op is not None]
    return min(found, key=lambda op: op.seconds) if found else None
