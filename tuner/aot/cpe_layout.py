"""Layout copies as CPE kernels: a conv input's zero padding, and stripping a kernel output's row pitch.

Padding (PadOp): blocks of padded rows, one get and one put each.

The padded tensor [N, C, H + 2ph, W + 2pw] is seen as ``N*C*(H + 2ph)`` rows of ``W + 2pw``
elements. A block is ``rows`` consecutive padded rows (it may run across planes). The interior rows
among them are consecutive rows of the unpadded input (the padding rows between planes hold no input),
so a block needs one contiguous DMA get of its interior input rows (none when it holds only padding
rows) and one contiguous put of the padded rows built in LDM. Each CPE takes blocks round-robin.

Unpitching (RowCopyOp): a kernel whose output rows are padded to whole DMA lines (``put_lines``)
leaves rows of ``pitch`` elements of which ``cols`` are the tensor's. A block of rows is either one
strided get (blocks of ``cols``, gaps of the pitch's rest) straight into a dense LDM buffer, or (short
rows, where strided blocks are slow) one contiguous get of the pitched rows compacted in LDM; then one
contiguous put. The time model picks the faster.

The MPE forms (tuner.aot.mpe: memset plus row copies, row memcpy) stream the tensors at the MPE's
copy rate; tuner.aot.cpe_ops.offload keeps whichever the time model says is faster.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.aot.cpe_blocks import RowBlocks
from tuner.ir.graph import slave_symbol
from tuner.targets import Target

CPES = 64


@dataclass
class PadOp(RowBlocks):
    """The padding kernel of one conv input (same interface as tuner.aot.cpe_ops.CpeOp for the host,
    the slave file, the report and the time model)."""

    planes: int  # N * C
    h: int
    w: int
    ph: int
    pw: int
    rows: int  # padded rows per block
    item: int  # bytes per element
    seconds: float = 0.0
    index: int = -1
    axis: int = 2  # (for the report: blocks run along the padded rows)

    @property
    def hp(self) -> int:
        return self.h + 2 * self.ph

    @property
    def wp(self) -> int:
        return self.w + 2 * self.pw

    @property
    def total_rows(self) -> int:
        return self.planes * self.hp

    @property
    def ldm_bytes(self) -> int:
        return self.rows * (self.w + self.wp) * self.item

    def interior_before(self, g: int) -> int:
        """Input rows that come before padded row ``g`` (in the flattened row order)."""
        plane, r = divmod(g, self.hp)
        return plane * self.h + min(max(r - self.ph, 0), self.h)

    def block_rows(self, blk: int) -> tuple[int, int, int]:
        """(first padded row, padded rows, interior input rows) of block ``blk``."""
        g0 = blk * self.rows
        n = min(self.rows, self.total_rows - g0)
        return g0, n, self.interior_before(g0 + n) - self.interior_before(g0)

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts)."""
        gets = puts = get_bytes = put_bytes = 0
        for blk in range(self.blocks):
            _, n, k = self.block_rows(blk)
            if k:
                gets += 1
                get_bytes += k * self.w * self.item
            puts += 1
            put_bytes += n * self.wp * self.item
        return {"get_reqs": gets, "get_bytes": get_bytes, "put_reqs": puts, "put_bytes": put_bytes}

    def slave_text(self, ty: str) -> str:
        """The CPE kernel as a generated slave file (merged by tuner.aot.kernels)."""
        hp, wp, w, h, ph, pw = self.hp, self.wp, self.w, self.h, self.ph, self.pw
        item = f"sizeof({ty})"

        def before(g: str) -> str:  # interior_before in C
            return (f"(({g}) / {hp}L * {h}L + ((({g}) % {hp}L) < {ph}L ? 0L : "
                    f"((({g}) % {hp}L) - {ph}L > {h}L ? {h}L : (({g}) % {hp}L) - {ph}L)))")

        return "\n".join([
            f"__thread_local {ty} X_ldm[{max(1, self.rows * w)}];",
            f"__thread_local {ty} Y_ldm[{self.rows * wp}];",
            "__thread_local volatile SW_REPLY_T g_reply[1];",
            "void swtune_kernel(swtune_args *_arg) {",
            "  int n_rep = 0;",
            "  g_reply[0] = 0;",
            f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
            f"    const long g0 = blk * {self.rows}L;",
            f"    const long n = {self.total_rows}L - g0 < {self.rows}L ? {self.total_rows}L - g0 : {self.rows}L;",
            f"    const long i0 = {before('g0')}, k = {before('g0 + n')} - i0;",
            "    if (k > 0) {",
            f"      SW_GET(_arg->p[0] + i0 * {w}L, X_ldm, k * {w}L * {item}, 0, 0, &g_reply[0]); n_rep++;",
            "      SW_WAIT(&g_reply[0], n_rep);",
            "    }",
            "    long src = 0;",
            "    for (long q = 0; q < n; q++) {",
            f"      const long r = (g0 + q) % {hp}L;",
            f"      {ty} *const y = Y_ldm + q * {wp}L;",
            f"      if (r < {ph}L || r >= {ph + h}L) {{ for (long c = 0; c < {wp}L; c++) y[c] = 0; continue; }}",
            f"      for (long c = 0; c < {pw}L; c++) {{ y[c] = 0; y[{pw + w}L + c] = 0; }}",
            f"      for (long c = 0; c < {w}L; c++) y[{pw}L + c] = X_ldm[src * {w}L + c];",
            "      src++;",
            "    }",
            f"    SW_PUT(Y_ldm, _arg->p[1] + g0 * {wp}L, n * {wp}L * {item}, 0, 0, &g_reply[0]); n_rep++;",
            "    SW_WAIT(&g_reply[0], n_rep);",
            "  }",
            "}",
        ]) + "\n"


def _seconds(target: Target, op: PadOp) -> float:
    """Spawn/join, then the busiest CPE's blocks: get, building the rows (a store per padded element,
    a load per copied one, scalar), put; nothing overlaps (the kernel waits on each request)."""
    from tuner.measure.simulator import dma_time

    active = min(CPES, op.blocks)
    per_cpe = -(-op.blocks // CPES)
    step = (dma_time(target, "get", op.rows * op.w * op.item * op.h / op.hp, active_cpes=active)
            + dma_time(target, "put", op.rows * op.wp * op.item, active_cpes=active)
            + (op.rows * op.wp + op.rows * op.w * op.h / op.hp) / target.clock_hz)
    return target.spawn_join_s + per_cpe * step


def plan_pad(shape: tuple[int, ...], ph: int, pw: int, target: Target, item: int) -> PadOp | None:
    """The padding kernel of an NCHW input of ``shape``: the most rows per block that fit the LDM
    budget while still giving every CPE a block (when there are that many rows); None when not even
    one padded row fits."""
    if len(shape) != 4:
        return None
    n, c, h, w = shape
    op = PadOp(n * c, h, w, ph, pw, 1, item)
    per_row = (op.w + op.wp) * item
    fit = target.ldm_budget_bytes // per_row
    if fit < 1:
        return None
    op.rows = int(max(1, min(fit, -(-op.total_rows // CPES))))
    op.seconds = _seconds(target, op)
    return op


@dataclass
class RowCopyOp(RowBlocks):
    """Dense rows from pitched rows, on the CPEs (interface of tuner.aot.cpe_ops.CpeOp)."""

    total_rows: int
    cols: int
    pitch: int
    rows: int  # rows per block
    item: int
    compact: bool = False  # a contiguous get of whole pitched rows, compacted in LDM
    seconds: float = 0.0
    index: int = -1
    axis: int = 0

    @property
    def ldm_bytes(self) -> int:
        return self.rows * (self.cols + (self.pitch if self.compact else 0)) * self.item

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts)."""
        got = self.total_rows * (self.pitch if self.compact else self.cols) * self.item
        return {"get_reqs": self.blocks, "get_bytes": got,
                "put_reqs": self.blocks, "put_bytes": self.total_rows * self.cols * self.item}

    def slave_text(self, ty: str) -> str:
        item = f"sizeof({ty})"
        if self.compact:  # one contiguous get of whole pitched rows, compacted in LDM
            packed = [f"__thread_local {ty} P_ldm[{self.rows * self.pitch}];"]
            get = [f"    SW_GET(_arg->p[0] + r0 * {self.pitch}L, P_ldm, n * {self.pitch}L * {item}, 0, 0, "
                   "&g_reply[0]); n_rep++;",
                   "    SW_WAIT(&g_reply[0], n_rep);",
                   f"    for (long r = 0; r < n; r++) for (long c = 0; c < {self.cols}L; c++) "
                   f"X_ldm[r * {self.cols}L + c] = P_ldm[r * {self.pitch}L + c];"]
        else:  # one strided get that skips each row's pitch
            packed = []
            get = [f"    SW_GET(_arg->p[0] + r0 * {self.pitch}L, X_ldm, n * {self.cols}L * {item}, "
                   f"{self.cols}L * {item}, {self.pitch - self.cols}L * {item}, &g_reply[0]); n_rep++;",
                   "    SW_WAIT(&g_reply[0], n_rep);"]
        return "\n".join([
            f"__thread_local {ty} X_ldm[{self.rows * self.cols}];",
            *packed,
            "__thread_local volatile SW_REPLY_T g_reply[1];",
            "void swtune_kernel(swtune_args *_arg) {",
            "  int n_rep = 0;",
            "  g_reply[0] = 0;",
            f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
            f"    const long r0 = blk * {self.rows}L;",
            f"    const long n = {self.total_rows}L - r0 < {self.rows}L ? {self.total_rows}L - r0 : {self.rows}L;",
            *get,
            f"    SW_PUT(X_ldm, _arg->p[1] + r0 * {self.cols}L, n * {self.cols}L * {item}, 0, 0, &g_reply[0]); "
            "n_rep++;",
            "    SW_WAIT(&g_reply[0], n_rep);",
            "  }",
            "}",
        ]) + "\n"


def plan_rowcopy(rows: int, cols: int, pitch: int, target: Target, item: int,
                 forms: tuple[bool, ...] = (False, True)) -> RowCopyOp | None:
    """Unpitching ``rows`` rows: the most rows per block that fit while every CPE gets a block, in the
    faster of the ``forms`` (compact: False strided get, True contiguous get compacted in LDM)."""
    from tuner.measure.simulator import dma_time

    best: RowCopyOp | None = None
    for compact in forms:
        fit = target.ldm_budget_bytes // ((cols + (pitch if compact else 0)) * item)
        if fit < 1 or pitch <= cols:
            continue
        op = RowCopyOp(rows, cols, pitch, int(max(1, min(fit, -(-rows // CPES)))), item, compact)
        active = min(CPES, op.blocks)
        if compact:  # a contiguous get, then a load and a store per element kept
            get = (dma_time(target, "get", op.rows * pitch * item, active_cpes=active)
                   + 2.0 * op.rows * cols / target.clock_hz)
        else:
            get = dma_time(target, "get", cols * item, n_blocks=op.rows, gap_bytes=(pitch - cols) * item,
                           active_cpes=active)
        step = get + dma_time(target, "put", op.rows * cols * item, active_cpes=active)
        op.seconds = target.spawn_join_s + -(-op.blocks // CPES) * step
        if best is None or op.seconds < best.seconds:
            best = op
    return best


@dataclass
class TransposeOp:
    """A permutation of axes on the CPEs (interface of tuner.aot.cpe_ops.CpeOp).

    After dropping unit axes and merging output axes that stay adjacent in the input, the output is
    ``outer`` x [R, C]. "rows": its last axis is the input's contiguous one, so a block (one outer
    index, ``rows`` consecutive R) is one strided get (C elements every ``r_stride``) and one put.
    "tile": its last two axes are the input's last two swapped (a batched 2-D transpose, rows of the
    input possibly apart: a tile of a larger matrix); a block is ``rows`` x ``cols`` of the output
    (``cols`` 0: whole rows of C): one strided get of [cols x rows] (pieces of ``rows`` elements), a
    transpose in LDM, one put of [rows x cols] (pieces of ``cols``, contiguous when whole rows). Whole
    rows of a long C leave room for few rows, so short get pieces; square tiles keep both sides long.
    "vtile": [R, O, C] -> [O, R, C] (the attention head split and merge), ``batch`` times over
    consecutive [R, O, C] (a conv weight's runtime pack: [O/16][16][I][KH*KW] -> [O/16][I][16][KH*KW]);
    a block is ``rows`` values of R (``by_outer`` False: one contiguous get, a strided put of O pieces)
    or of O (True: a strided get of R pieces, one contiguous put) of one batch index, reordered in LDM:
    longer DMA blocks than "rows" gives.
    "otile": the same [R, O, C] -> [O, R, C] with the other axes anywhere around O (a GEMM's runtime pack
    of an NCHW activation: [N][C/t][t][H][W] -> [C/t][H][N][t][W]): each outer index (``outer_ext``, input
    strides ``outer_stride``, output strides ``outer_out``) reads one contiguous [R, O, C] block of the
    input; a block is ``rows`` values of R, one contiguous get, reordered in LDM, one put of O pieces
    ``o_out`` apart."""

    mode: str  # "rows" | "tile" | "vtile"
    outer_ext: tuple[int, ...]
    outer_stride: tuple[int, ...]  # input strides of the outer output axes
    r: int  # output rows per outer index
    c: int  # output row length
    r_stride: int  # input stride of the output's row axis ("rows" mode)
    rows: int  # output rows per block
    item: int
    by_outer: bool = False  # "vtile": blocks along O (else along R)
    c_stride: int = 0  # "tile": input stride of the output's last axis (the input's row length, or more)
    cols: int = 0  # "tile": output columns per block (0: all C)
    batch: int = 1  # "vtile": consecutive [R, O, C] inputs, each transposed alike
    o: int = 0  # "otile": the extent of O
    o_out: int = 0  # "otile": the output stride of O
    outer_out: tuple[int, ...] = ()  # "otile": the output strides of the outer axes
    seconds: float = 0.0
    index: int = -1
    axis: int = 0

    @property
    def outer(self) -> int:
        out = 1
        for e in self.outer_ext:
            out *= e
        return out

    @property
    def col_tile(self) -> int:
        return self.cols or self.c

    @property
    def per_outer(self) -> int:
        return -(-self.r // self.rows) * -(-self.c // self.col_tile)

    @property
    def blocks(self) -> int:
        if self.mode == "vtile":
            return self.batch * self.per_batch
        return self.outer * self.per_outer

    @property
    def per_batch(self) -> int:
        """"vtile": blocks of one batch index."""
        return -(-(self.outer if self.by_outer else self.r) // self.rows)

    @property
    def block(self) -> int:
        return self.rows

    @property
    def ldm_bytes(self) -> int:
        if self.mode == "otile":
            return 2 * self.rows * self.o * self.c * self.item
        if self.mode == "vtile":
            return 2 * self.rows * (self.r if self.by_outer else self.outer) * self.c * self.item
        return (2 * self.rows * self.col_tile if self.mode == "tile" else self.rows * self.c) * self.item

    @property
    def name(self) -> str:
        return slave_symbol(self.index)

    def dma_plan(self) -> dict[str, int]:
        nbytes = self.batch * self.outer * self.r * self.c * self.item * (self.o if self.mode == "otile" else 1)
        return {"get_reqs": self.blocks, "get_bytes": nbytes, "put_reqs": self.blocks, "put_bytes": nbytes}

    def _vtile_text(self, ty: str) -> str:
        item = f"sizeof({ty})"
        o_, r_, c_ = self.outer, self.r, self.c
        lines = [f"__thread_local {ty} X_ldm[{self.ldm_bytes // (2 * self.item)}];",
                 f"__thread_local {ty} Y_ldm[{self.ldm_bytes // (2 * self.item)}];",
                 "__thread_local volatile SW_REPLY_T g_reply[1];",
                 "void swtune_kernel(swtune_args *_arg) {",
                 "  int n_rep = 0;",
                 "  g_reply[0] = 0;",
                 f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                 f"    const long s0 = (blk % {self.per_batch}L) * {self.rows}L, lim = {o_ if self.by_outer else r_}L;",
                 f"    const long n = lim - s0 < {self.rows}L ? lim - s0 : {self.rows}L;",
                 f"    {ty} *const src = _arg->p[0] + (blk / {self.per_batch}L) * {o_ * r_ * c_}L;",
                 f"    {ty} *const dst = _arg->p[1] + (blk / {self.per_batch}L) * {o_ * r_ * c_}L;"]
        if self.by_outer:  # O values s0..s0+n of every R: [R][n][C] in, [n][R][C] out
            lines += [f"    SW_GET(src + s0 * {c_}L, X_ldm, {r_}L * n * {c_}L * {item}, n * {c_}L * {item}, "
                      f"({o_}L - n) * {c_}L * {item}, &g_reply[0]); n_rep++;",
                      "    SW_WAIT(&g_reply[0], n_rep);",
                      f"    for (long q = 0; q < n; q++) for (long r = 0; r < {r_}L; r++) "
                      f"for (long c = 0; c < {c_}L; c++) "
                      f"Y_ldm[(q * {r_}L + r) * {c_}L + c] = X_ldm[(r * n + q) * {c_}L + c];",
                      f"    SW_PUT(Y_ldm, dst + s0 * {r_ * c_}L, n * {r_ * c_}L * {item}, 0, 0, &g_reply[0]); "
                      "n_rep++;"]
        else:  # R values s0..s0+n: [n][O][C] in, [O][n][C] out
            lines += [f"    SW_GET(src + s0 * {o_ * c_}L, X_ldm, n * {o_ * c_}L * {item}, 0, 0, &g_reply[0]); "
                      "n_rep++;",
                      "    SW_WAIT(&g_reply[0], n_rep);",
                      f"    for (long o = 0; o < {o_}L; o++) for (long q = 0; q < n; q++) "
                      f"for (long c = 0; c < {c_}L; c++) "
                      f"Y_ldm[(o * n + q) * {c_}L + c] = X_ldm[(q * {o_}L + o) * {c_}L + c];",
                      f"    SW_PUT(Y_ldm, dst + s0 * {c_}L, {o_}L * n * {c_}L * {item}, n * {c_}L * {item}, "
                      f"({r_}L - n) * {c_}L * {item}, &g_reply[0]); n_rep++;"]
        lines += ["    SW_WAIT(&g_reply[0], n_rep);", "  }", "}"]
        return "\n".join(lines) + "\n"

    def _otile_text(self, ty: str) -> str:
        item = f"sizeof({ty})"
        o_, r_, c_ = self.o, self.r, self.c
        per = -(-r_ // self.rows)
        off = [f"    long q = blk / {per}L, ib = 0, ob = 0;"]
        for e, si, so in zip(reversed(self.outer_ext), reversed(self.outer_stride), reversed(self.outer_out)):
            off.append(f"    ib += (q % {e}L) * {si}L; ob += (q % {e}L) * {so}L; q /= {e}L;")
        lines = [f"__thread_local {ty} X_ldm[{self.rows * o_ * c_}];",
                 f"__thread_local {ty} Y_ldm[{self.rows * o_ * c_}];",
                 "__thread_local volatile SW_REPLY_T g_reply[1];",
                 "void swtune_kernel(swtune_args *_arg) {",
                 "  int n_rep = 0;",
                 "  g_reply[0] = 0;",
                 f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                 f"    const long s0 = (blk % {per}L) * {self.rows}L;",
                 f"    const long n = {r_}L - s0 < {self.rows}L ? {r_}L - s0 : {self.rows}L;",
                 *off,
                 # R values s0..s0+n of one outer index: [n][O][C] in, O pieces of [n][C] out
                 f"    SW_GET(_arg->p[0] + ib + s0 * {o_ * c_}L, X_ldm, n * {o_ * c_}L * {item}, 0, 0, &g_reply[0]); "
                 "n_rep++;",
                 "    SW_WAIT(&g_reply[0], n_rep);",
                 f"    for (long o = 0; o < {o_}L; o++) for (long x = 0; x < n; x++) for (long c = 0; c < {c_}L; c++) "
                 f"Y_ldm[(o * n + x) * {c_}L + c] = X_ldm[(x * {o_}L + o) * {c_}L + c];",
                 f"    SW_PUT(Y_ldm, _arg->p[1] + ob + s0 * {c_}L, {o_}L * n * {c_}L * {item}, n * {c_}L * {item}, "
                 f"({self.o_out}L - n * {c_}L) * {item}, &g_reply[0]); n_rep++;",
                 "    SW_WAIT(&g_reply[0], n_rep);", "  }", "}"]
        return "\n".join(lines) + "\n"

    def slave_text(self, ty: str) -> str:
        if self.mode == "otile":
            return self._otile_text(ty)
        if self.mode == "vtile":
            return self._vtile_text(ty)
        item = f"sizeof({ty})"
        off = [f"    long q = blk / {self.per_outer}L, base = 0;"]
        for e, s in zip(reversed(self.outer_ext), reversed(self.outer_stride)):
            off.append(f"    base += (q % {e}L) * {s}L; q /= {e}L;")
        lines = [f"__thread_local {ty} X_ldm[{self.rows * self.col_tile}];"]
        if self.mode == "tile":
            lines.append(f"__thread_local {ty} Y_ldm[{self.rows * self.col_tile}];")
        if self.cols:  # blocks of rows x cols: the row block varies fastest
            per_r = -(-self.r // self.rows)
            where = [f"    const long o = blk / {self.per_outer}L, rt = blk % {self.per_outer}L;",
                     f"    const long r0 = (rt % {per_r}L) * {self.rows}L, c0 = (rt / {per_r}L) * {self.cols}L;",
                     f"    const long m = {self.c}L - c0 < {self.cols}L ? {self.c}L - c0 : {self.cols}L;"]
        else:
            where = [f"    const long o = blk / {self.per_outer}L, r0 = (blk % {self.per_outer}L) * {self.rows}L;"]
        lines += ["__thread_local volatile SW_REPLY_T g_reply[1];",
                  "void swtune_kernel(swtune_args *_arg) {",
                  "  int n_rep = 0;",
                  "  g_reply[0] = 0;",
                  f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                  *where,
                  f"    const long n = {self.r}L - r0 < {self.rows}L ? {self.r}L - r0 : {self.rows}L;",
                  *off]
        dst = f"_arg->p[1] + (o * {self.r}L + r0) * {self.c}L"
        if self.mode == "rows":
            lines += [f"    SW_GET(_arg->p[0] + base + r0 * {self.r_stride}L, X_ldm, n * {self.c}L * {item}, "
                      f"{self.c}L * {item}, ({self.r_stride}L - {self.c}L) * {item}, &g_reply[0]); n_rep++;",
                      "    SW_WAIT(&g_reply[0], n_rep);",
                      f"    SW_PUT(X_ldm, {dst}, n * {self.c}L * {item}, 0, 0, &g_reply[0]); n_rep++;"]
        elif not self.cols:  # the input holds [C rows x R columns]: take columns r0..r0+n of every row
            lines += [f"    SW_GET(_arg->p[0] + base + r0, X_ldm, {self.c}L * n * {item}, n * {item}, "
                      f"({self.c_stride}L - n) * {item}, &g_reply[0]); n_rep++;",
                      "    SW_WAIT(&g_reply[0], n_rep);",
                      f"    for (long x = 0; x < n; x++) for (long y = 0; y < {self.c}L; y++) "
                      f"Y_ldm[x * {self.c}L + y] = X_ldm[y * n + x];",
                      f"    SW_PUT(Y_ldm, {dst}, n * {self.c}L * {item}, 0, 0, &g_reply[0]); n_rep++;"]
        else:  # a tile: columns r0..r0+n of input rows c0..c0+m, put as m of the output row's columns
            lines += [f"    SW_GET(_arg->p[0] + base + c0 * {self.c_stride}L + r0, X_ldm, m * n * {item}, n * {item}, "
                      f"({self.c_stride}L - n) * {item}, &g_reply[0]); n_rep++;",
                      "    SW_WAIT(&g_reply[0], n_rep);",
                      "    for (long x = 0; x < n; x++) for (long y = 0; y < m; y++) "
                      "Y_ldm[x * m + y] = X_ldm[y * n + x];",
                      f"    SW_PUT(Y_ldm, {dst} + c0, n * m * {item}, m * {item}, ({self.c}L - m) * {item}, "
                      "&g_reply[0]); n_rep++;"]
        lines += ["    SW_WAIT(&g_reply[0], n_rep);", "  }", "}"]
        return "\n".join(lines) + "\n"


def plan_transpose(shape: tuple[int, ...], axes: tuple[int, ...], target: Target, item: int) -> TransposeOp | None:
    """The CPE kernel of ``transpose(x: shape, axes)``, or None when it is neither form."""
    from tuner.measure.simulator import dma_time

    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    ext: list[int] = []
    st: list[int] = []
    for a in axes:  # output axes with their input strides: drop unit axes, merge adjacent ones
        if shape[a] == 1:
            continue
        if ext and st[-1] == strides[a] * shape[a]:
            ext[-1] *= shape[a]
            st[-1] = strides[a]
            continue
        ext.append(shape[a])
        st.append(strides[a])
    if len(ext) < 2:
        return None  # a copy: a view, not a transpose
    if st[-1] == 1:
        mode, r, c = "rows", ext[-2], ext[-1]
        fit = target.ldm_budget_bytes // (c * item)
    elif st[-2] == 1 and st[-1] >= ext[-2]:
        mode, r, c = "tile", ext[-2], ext[-1]
        fit = target.ldm_budget_bytes // (2 * c * item)
    else:
        return None
    if fit < 1:
        return None
    outer = 1
    for e in ext[:-2]:
        outer *= e
    # block sizes from one block per CPE up: longer blocks make longer DMA pieces ("tile" gets pieces of
    # ``rows`` elements) at the price of fewer active CPEs; "tile" also tries blocks of fewer columns
    # (square-ish tiles: long pieces both ways); the least simulated time wins
    first = int(min(fit, r, -(-r * outer // CPES)))
    shapes = [(rows, 0) for rows in sorted({min(first * 2 ** k, fit, r) for k in range(8)})]
    if mode == "tile":
        for cols in (16, 32, 64, 128, 256):
            tall = target.ldm_budget_bytes // (2 * cols * item)
            if cols < c and tall >= 1:
                shapes += [(rows, cols) for rows in sorted({min(16 * 2 ** k, tall, r) for k in range(6)})]
    op = None
    for rows, cols in shapes:
        cand = TransposeOp(mode, tuple(ext[:-2]), tuple(st[:-2]), r, c, st[-2], rows, item, c_stride=st[-1],
                           cols=cols)
        active = min(CPES, cand.blocks)
        width = cand.col_tile
        if mode == "rows":
            get = dma_time(target, "get", c * item, n_blocks=rows, gap_bytes=(cand.r_stride - c) * item,
                           active_cpes=active)
            work = 0.0
        else:
            get = dma_time(target, "get", rows * item, n_blocks=width, gap_bytes=(st[-1] - rows) * item,
                           active_cpes=active)
            work = 2.0 * rows * width / target.clock_hz  # a load and a store per element, scalar
        if cols:  # pieces of a row's columns
            put = dma_time(target, "put", width * item, n_blocks=rows, gap_bytes=(c - width) * item,
                           active_cpes=active)
        else:
            put = dma_time(target, "put", rows * c * item, active_cpes=active)
        cand.seconds = target.spawn_join_s + -(-cand.blocks // CPES) * (get + work + put)
        if op is None or cand.seconds < op.seconds:
            op = cand
    assert op is not None
    o, r, c = ext[-3:] if len(ext) >= 3 else (0, 0, 0)
    batch = ext[0] if len(ext) == 4 and st[0] == o * r * c else 1  # consecutive [R, O, C] inputs
    if len(ext) in (3, 4) and len(ext) - 3 == (batch > 1) and st[-1] == 1 and st[-3] == c and st[-2] == o * c:
        for alt in _vtiles(o, r, c, target, item, batch):  # [R, O, C] -> [O, R, C], batch times
            if alt.seconds < op.seconds:
                op = alt
    for alt in _otiles(ext, st, target, item):  # the same with outer axes around O
        if alt.seconds < op.seconds:
            op = alt
    return op


def _otiles(ext: list[int], st: list[int], target: Target, item: int) -> list[TransposeOp]:
    """The "otile" forms of an output ``ext`` (input strides ``st``) whose last three axes in the input
    are [R, O, C] contiguous -- C the output's last axis, R its second last, O any earlier one -- a few
    block sizes each; [] for any other permutation."""
    from tuner.measure.simulator import dma_time

    if len(ext) < 3 or st[-1] != 1:
        return []
    c, r = ext[-1], ext[-2]
    found = [j for j in range(len(ext) - 2) if st[j] == c and st[-2] == ext[j] * c]
    if not found:
        return []
    j = found[0]
    o = ext[j]
    out_strides = [1] * len(ext)
    for d in range(len(ext) - 2, -1, -1):
        out_strides[d] = out_strides[d + 1] * ext[d + 1]
    outer_axes = [d for d in range(len(ext) - 2) if d != j]
    outer = 1
    for d in outer_axes:
        outer *= ext[d]
    out = []
    first = min(r, -(-r * outer // CPES))  # one block per CPE, and up
    for rows in sorted({first, 2 * first, 4 * first, 8 * first, r}):
        if rows > r or 2 * rows * o * c * item > target.ldm_budget_bytes:
            continue
        op = TransposeOp("otile", tuple(ext[d] for d in outer_axes), tuple(st[d] for d in outer_axes), r, c, st[-2],
                         rows, item, o=o, o_out=out_strides[j], outer_out=tuple(out_strides[d] for d in outer_axes))
        active = min(CPES, op.blocks)
        get = dma_time(target, "get", rows * o * c * item, active_cpes=active)
        put = dma_time(target, "put", rows * c * item, n_blocks=o, gap_bytes=(out_strides[j] - rows * c) * item,
                       active_cpes=active)
        work = 2.0 * rows * o * c / target.clock_hz
        op.seconds = target.spawn_join_s + -(-op.blocks // CPES) * (get + work + put)
        out.append(op)
    return out


def _vtiles(o: int, r: int, c: int, target: Target, item: int, batch: int = 1) -> list[TransposeOp]:
    """The "vtile" forms of [R, O, C] -> [O, R, C] (``batch`` times): blocks along R or O, a few block
    sizes each."""
    from tuner.measure.simulator import dma_time

    out = []
    for by_outer, along, other in ((False, r, o), (True, o, r)):
        first = min(along, -(-along * batch // CPES))  # one block per CPE over every batch index, and up
        for rows in sorted({first, 2 * first, 4 * first, 8 * first}):
            if rows > along or 2 * rows * other * c * item > target.ldm_budget_bytes:
                continue
            op = TransposeOp("vtile", (o,), (c,), r, c, o * c, rows, item, by_outer, batch=batch)
            active = min(CPES, op.blocks)
            piece, gap = rows * c * item, (along - rows) * c * item
            if by_outer:
                get = dma_time(target, "get", piece, n_blocks=other, gap_bytes=gap, active_cpes=active)
                put = dma_time(target, "put", rows * other * c * item, active_cpes=active)
            else:
                get = dma_time(target, "get", rows * other * c * item, active_cpes=active)
                put = dma_time(target, "put", piece, n_blocks=other, gap_bytes=gap, active_cpes=active)
            work = 2.0 * rows * other * c / target.clock_hz
            op.seconds = target.spawn_join_s + -(-op.blocks // CPES) * (get + work + put)
            out.append(op)
    return out
