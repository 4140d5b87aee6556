"""Image resizing as a CPE kernel: Relax ``image.resize2d`` of NCHW tensors, nearest and bilinear (ResizeOp).

What torch's nn.Upsample / F.interpolate import as (nearest: ``half_pixel`` coordinates rounded; bilinear:
``half_pixel``, or ``align_corners``). tuner.ir.relax_reader puts the static parameters on the node as
``attrs["resize"]`` = (method, coordinate transformation mode, rounding method).

Source coordinates, exactly. Along an axis of ``I`` input and ``O`` output elements, output index ``o``
reads the input at the rational ``(a * o + b) / d`` (``Axis``: half_pixel ``((2o + 1) I - O) / 2O``,
align_corners ``o (I - 1) / (O - 1)``, asymmetric ``o I / O``, ...), in integers: its floor and
remainder. Nearest rounds it (``Rounding``: half to even like TVM's ``round``, which prints as C
``rint``; floor; ceil; ...) and clamps to the input. Bilinear takes the floor ``i0`` and the next
index ``i1`` (clamped), with weight ``remainder / d`` for ``i1``, one correctly rounded division; a
coordinate below 0 or at the last index reads that edge with weight 0 (as torch: ``src = max(src, 0)``),
and the value is torch's ``h0 (w0 x00 + w1 x01) + h1 (w0 x10 + w1 x11)``. So a float64 model
matches torch to rounding (TVM's legalized form, which the MPE runs, computes the coordinates in
float32 and returns float64 values rounded through float32), and nearest at an integer scale copies
exactly. Not mirrored: TVM's epsilon in floor/ceil rounding (it differs only when a coordinate is
within 1e-5 below an integer, i.e. d above 1e5), and coordinates that float32 rounding moves across
an exact tie (e.g. tf_half_pixel_for_nn with round_prefer_floor, 7 -> 13: TVM reads 4 where the tie
3.5 rounds to 3).

The kernel. The output is seen as ``N*C*OH`` rows of ``OW`` elements. A block is ``rows`` consecutive
output rows (it may run across planes); the input rows they read are a contiguous range of the
input's ``N*C*IH`` rows (rows are monotone in the output row), got with one DMA get; the block's
rows are computed into LDM and put with one contiguous DMA put. Each CPE first computes the column
table (source columns and weights of every output column) into LDM, then takes blocks round-robin.
``plan_resize`` tries a few block sizes that fit the LDM budget and keeps the fastest by the time
model (the busiest CPE's gets, arithmetic and puts, plus spawn/join); tuner.aot.cpe_ops.offload keeps
it when it beats the other implementations (the generic sliced kernel, the MPE).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from tuner.aot.cpe_blocks import RowBlocks
from tuner.targets import Target

CPES = 64


class Method(str, Enum):
    """How an output element is made from the input (Relax's ``method``)."""

    NEAREST = "nearest_neighbor"
    LINEAR = "linear"


class Coord(str, Enum):
    """Where an output index reads the input (Relax's ``coordinate_transformation_mode``)."""

    HALF_PIXEL = "half_pixel"
    PYTORCH_HALF_PIXEL = "pytorch_half_pixel"
    ALIGN_CORNERS = "align_corners"
    ASYMMETRIC = "asymmetric"
    TF_HALF_PIXEL_FOR_NN = "tf_half_pixel_for_nn"


class Rounding(str, Enum):
    """How nearest rounds a source coordinate (Relax's ``rounding_method``)."""

    ROUND = "round"  # half to even (TVM's round: C rint)
    ROUND_PREFER_FLOOR = "round_prefer_floor"
    ROUND_PREFER_CEIL = "round_prefer_ceil"
    FLOOR = "floor"
    CEIL = "ceil"


# scalar CPE operations per output element (an assumption, as the other layout kernels' counts): nearest
# loads its column, loads and stores; bilinear loads two columns and two weights, four pixels, six
# multiplies, three adds, a store
OPS_PER_ELEMENT = {Method.NEAREST: 3, Method.LINEAR: 17}
OPS_PER_INDEX = 12  # one output row's or column's source index (and weight): integer divide, compares
BLOCK_SIZES = 6  # block sizes tried: the one that gives every CPE a block, and halvings of it


@dataclass(frozen=True)
class Spec:
    """A resize's static parameters."""

    method: Method
    coord: Coord
    rounding: Rounding


def spec_of(raw: tuple[Any, ...]) -> Spec | None:
    """The Spec of tuner.ir.relax_reader's ``attrs["resize"]`` (method, coordinate mode, rounding), or
    None when one of them is not handled here (cubic, tf_crop_and_resize, ...: the MPE runs it)."""
    try:
        method, coord, rounding = (str(v) for v in raw)
        if not rounding:  # TVM's default: round for align_corners, else floor
            rounding = Rounding.ROUND.value if coord == Coord.ALIGN_CORNERS.value else Rounding.FLOOR.value
        return Spec(Method(method), Coord(coord), Rounding(rounding))
    except ValueError:
        return None


@dataclass(frozen=True)
class Axis:
    """One resized axis: output index ``o`` reads the input at ``(a * o + b) / d``."""

    size_in: int
    size_out: int
    a: int
    b: int
    d: int

    @staticmethod
    def of(coord: Coord, size_in: int, size_out: int) -> Axis:
        i, o = size_in, size_out
        if coord == Coord.ALIGN_CORNERS:
            return Axis(i, o, i - 1, 0, o - 1) if o > 1 else Axis(i, o, 0, 0, 1)
        if coord == Coord.ASYMMETRIC:
            return Axis(i, o, i, 0, o)
        if coord == Coord.TF_HALF_PIXEL_FOR_NN:
            return Axis(i, o, 2 * i, i, 2 * o)
        if coord == Coord.PYTORCH_HALF_PIXEL and o == 1:
            return Axis(i, o, 0, 0, 1)
        return Axis(i, o, 2 * i, i - o, 2 * o)  # half_pixel

    def floor(self, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(floor, remainder) of the source coordinates of output indices ``o``."""
        q, r = np.divmod(self.a * np.asarray(o, dtype=np.int64) + self.b, self.d)
        return q, r

    def nearest(self, o: np.ndarray, rounding: Rounding) -> np.ndarray:
        """The input index output indices ``o`` read (nearest)."""
        q, r = self.floor(o)
        up = {Rounding.ROUND: (2 * r > self.d) | ((2 * r == self.d) & (q % 2 == 1)),
              Rounding.ROUND_PREFER_FLOOR: 2 * r > self.d, Rounding.ROUND_PREFER_CEIL: 2 * r >= self.d,
              Rounding.FLOOR: np.zeros_like(r, dtype=bool), Rounding.CEIL: r > 0}[rounding]
        return np.clip(q + up, 0, self.size_in - 1)

    def linear(self, o: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(i0, i1, weight of i1) of output indices ``o`` (bilinear), the weight in float64."""
        q, r = self.floor(o)
        edge = (q < 0) | (q >= self.size_in - 1)
        i0 = np.clip(q, 0, self.size_in - 1)
        w = np.where(edge, 0.0, r / self.d)
        return i0, np.minimum(i0 + 1, self.size_in - 1), w

    def rows(self, o: np.ndarray, method: Method, rounding: Rounding) -> tuple[np.ndarray, np.ndarray]:
        """(first, last) input index output indices ``o`` read."""
        if method == Method.NEAREST:
            k = self.nearest(o, rounding)
            return k, k
        i0, i1, _ = self.linear(o)
        return i0, i1

    def c_index(self, o: str, method: Method, rounding: Rounding, i0: str, i1: str = "", w: str = "",
                ty: str = "double") -> list[str]:
        """C statements setting ``i0`` (and for bilinear ``i1``, ``w``) from output index ``o``, as
        ``nearest`` / ``linear`` compute them."""
        d, last = self.d, self.size_in - 1
        lines = ["{",
                 f"  const long num_ = {self.a}L * ({o}) + {self.b}L;",
                 f"  long q_ = num_ / {d}L;",
                 f"  if (num_ % {d}L != 0 && num_ < 0) q_--;",
                 f"  const long r_ = num_ - q_ * {d}L;"]
        if method == Method.NEAREST:
            up = {Rounding.ROUND: f"(2 * r_ > {d}L || (2 * r_ == {d}L && (q_ & 1)))",
                  Rounding.ROUND_PREFER_FLOOR: f"(2 * r_ > {d}L)", Rounding.ROUND_PREFER_CEIL: f"(2 * r_ >= {d}L)",
                  Rounding.FLOOR: "0", Rounding.CEIL: "(r_ > 0)"}[rounding]
            lines += [f"  long k_ = q_ + {up};",
                      f"  {i0} = k_ < 0 ? 0 : (k_ > {last}L ? {last}L : k_);"]
        else:
            lines += [f"  if (q_ < 0) {{ {i0} = 0; {w} = ({ty})0; }}",
                      f"  else if (q_ >= {last}L) {{ {i0} = {last}L; {w} = ({ty})0; }}",
                      f"  else {{ {i0} = q_; {w} = ({ty})r_ / ({ty}){d}L; }}",
                      f"  {i1} = {i0} + 1 > {last}L ? {last}L : {i0} + 1;"]
        return lines + ["}"]


def reference(x: np.ndarray, spec: Spec, out_hw: tuple[int, int]) -> np.ndarray:
    """The resize of NCHW ``x`` as the kernel computes it (numpy, in ``x``'s dtype): for tests."""
    _, _, ih, iw = x.shape
    ay, ax = Axis.of(spec.coord, ih, out_hw[0]), Axis.of(spec.coord, iw, out_hw[1])
    oy, ox = np.arange(out_hw[0]), np.arange(out_hw[1])
    if spec.method == Method.NEAREST:
        return x[:, :, ay.nearest(oy, spec.rounding)][:, :, :, ax.nearest(ox, spec.rounding)]
    y0, y1, wy = ay.linear(oy)
    x0, x1, wx = ax.linear(ox)
    t = x.dtype.type
    h1, w1 = wy.astype(x.dtype)[:, None], wx.astype(x.dtype)[None, :]
    h0, w0 = t(1) - h1, t(1) - w1

    def at(ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        return x[:, :, ys][:, :, :, xs]

    return h0 * (w0 * at(y0, x0) + w1 * at(y0, x1)) + h1 * (w0 * at(y1, x0) + w1 * at(y1, x1))


@dataclass
class ResizeOp(RowBlocks):
    """image.resize2d on the CPEs (interface of tuner.aot.cpe_ops.CpeOp for the host, the slave file,
    the report and the time model)."""

    spec: Spec
    planes: int  # N * C
    ih: int
    iw: int
    oh: int
    ow: int
    rows: int  # output rows per block
    item: int
    seconds: float = 0.0
    index: int = -1
    axis: int = 2  # (for the report: blocks run along the output rows)

    @property
    def total_rows(self) -> int:
        return self.planes * self.oh

    @property
    def axes(self) -> tuple[Axis, Axis]:
        return Axis.of(self.spec.coord, self.ih, self.oh), Axis.of(self.spec.coord, self.iw, self.ow)

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(first input row, input rows got) of every block, in the flattened N*C*IH rows."""
        ay, _ = self.axes
        q0 = np.arange(self.blocks, dtype=np.int64) * self.rows
        q1 = np.minimum(q0 + self.rows, self.total_rows) - 1
        first, _ = ay.rows(q0 % self.oh, self.spec.method, self.spec.rounding)
        _, last = ay.rows(q1 % self.oh, self.spec.method, self.spec.rounding)
        lo = q0 // self.oh * self.ih + first
        return lo, q1 // self.oh * self.ih + last - lo + 1

    @property
    def span_rows(self) -> int:
        return int(self.spans()[1].max())

    @property
    def table_bytes(self) -> int:
        """The column table: source columns (int), and for bilinear the second column and two weights."""
        return self.ow * (4 if self.spec.method == Method.NEAREST else 8 + 2 * self.item)

    @property
    def ldm_bytes(self) -> int:
        return (self.span_rows * self.iw + self.rows * self.ow) * self.item + self.table_bytes

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts): a get and a put per block."""
        got = int(self.spans()[1].sum()) * self.iw * self.item
        return {"get_reqs": self.blocks, "get_bytes": got, "put_reqs": self.blocks,
                "put_bytes": self.total_rows * self.ow * self.item}

    def slave_text(self, ty: str) -> str:
        """The CPE kernel as a generated slave file (merged by tuner.aot.kernels)."""
        ay, ax = self.axes
        m, rnd = self.spec.method, self.spec.rounding
        lin = m == Method.LINEAR
        item, iw, ow, ih, oh, total = f"sizeof({ty})", self.iw, self.ow, self.ih, self.oh, self.total_rows

        def ind(lines: list[str], pad: str) -> list[str]:
            return [pad + ln for ln in lines]

        lines = [f"__thread_local {ty} X_ldm[{self.span_rows * iw}];",
                 f"__thread_local {ty} Y_ldm[{self.rows * ow}];",
                 f"__thread_local int C0_ldm[{ow}];"]
        if lin:
            lines += [f"__thread_local int C1_ldm[{ow}];", f"__thread_local {ty} W0_ldm[{ow}];",
                      f"__thread_local {ty} W1_ldm[{ow}];"]
        lines += ["__thread_local volatile SW_REPLY_T g_reply[1];",
                  "void swtune_kernel(swtune_args *_arg) {",
                  "  int n_rep = 0;",
                  f"  if (_MYID >= {self.blocks}L) return;  /* no block for this CPE */",
                  "  g_reply[0] = 0;",
                  f"  for (long c = 0; c < {ow}L; c++) {{  /* the column table */",
                  f"    long x0 = 0, x1 = 0; {ty} w = 0;",
                  *ind(ax.c_index("c", m, rnd, "x0", "x1", "w", ty), "    "),
                  "    C0_ldm[c] = (int)x0;"]
        if lin:
            lines += ["    C1_ldm[c] = (int)x1; W1_ldm[c] = w; W0_ldm[c] = 1 - w;"]
        lines += ["    (void)x1; (void)w;",
                  "  }",
                  f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
                  f"    const long q0 = blk * {self.rows}L;",
                  f"    const long n = {total}L - q0 < {self.rows}L ? {total}L - q0 : {self.rows}L;",
                  f"    long lo = 0, hi = 0, t_ = 0; {ty} tw_ = 0;",
                  *ind(ay.c_index(f"q0 % {oh}L", m, rnd, "lo", "t_", "tw_", ty), "    "),
                  *ind(ay.c_index(f"(q0 + n - 1) % {oh}L", m, rnd, "hi", "t_", "tw_", ty), "    ")]
        if lin:
            lines.append("    hi = t_;  /* the last row's second input row */")
        lines += [f"    lo += q0 / {oh}L * {ih}L; hi += (q0 + n - 1) / {oh}L * {ih}L;",
                  f"    SW_GET(_arg->p[0] + lo * {iw}L, X_ldm, (hi - lo + 1) * {iw}L * {item}, 0, 0, &g_reply[0]); "
                  "n_rep++;",
                  "    SW_WAIT(&g_reply[0], n_rep);",
                  "    for (long q = 0; q < n; q++) {",
                  f"      const long row = (q0 + q) % {oh}L, base = (q0 + q) / {oh}L * {ih}L - lo;",
                  f"      long y0 = 0, y1 = 0; {ty} h1 = 0;",
                  *ind(ay.c_index("row", m, rnd, "y0", "y1", "h1", ty), "      "),
                  f"      const {ty} *const a = X_ldm + (base + y0) * {iw}L;",
                  f"      {ty} *const y = Y_ldm + q * {ow}L;"]
        if lin:
            lines += [f"      const {ty} *const b = X_ldm + (base + y1) * {iw}L;",
                      f"      const {ty} h0 = 1 - h1;",
                      f"      for (long c = 0; c < {ow}L; c++) {{",
                      "        const int x0 = C0_ldm[c], x1 = C1_ldm[c];",
                      f"        const {ty} w0 = W0_ldm[c], w1 = W1_ldm[c];",
                      "        y[c] = h0 * (w0 * a[x0] + w1 * a[x1]) + h1 * (w0 * b[x0] + w1 * b[x1]);",
                      "      }"]
        else:
            lines += [f"      for (long c = 0; c < {ow}L; c++) y[c] = a[C0_ldm[c]];",
                      "      (void)y1; (void)h1;"]
        lines += ["    }",
                  f"    SW_PUT(Y_ldm, _arg->p[1] + q0 * {ow}L, n * {ow}L * {item}, 0, 0, &g_reply[0]); n_rep++;",
                  "    SW_WAIT(&g_reply[0], n_rep);",
                  "  }",
                  "}"]
        return "\n".join(lines) + "\n"


def _seconds(target: Target, op: ResizeOp) -> float:
    """Spawn/join, the column table, then the busiest CPE's blocks (round-robin): each a get of its
    input rows, its rows' indices and elements, and a put; nothing overlaps (the kernel waits on each
    request)."""
    from tuner.measure.simulator import dma_time

    active = min(CPES, op.blocks)
    _, got = op.spans()
    n = np.minimum(op.rows, op.total_rows - np.arange(op.blocks) * op.rows)
    cost: dict[tuple[int, int], float] = {}
    per_block = np.empty(op.blocks)
    for k, (g, r) in enumerate(zip(got.tolist(), n.tolist())):
        if (g, r) not in cost:
            ops = r * (OPS_PER_INDEX + op.ow * OPS_PER_ELEMENT[op.spec.method])
            cost[(g, r)] = (dma_time(target, "get", g * op.iw * op.item, active_cpes=active) + ops / target.clock_hz
                            + dma_time(target, "put", r * op.ow * op.item, active_cpes=active))
        per_block[k] = cost[(g, r)]
    busy = np.bincount(np.arange(op.blocks) % CPES, weights=per_block, minlength=CPES)
    return target.spawn_join_s + op.ow * OPS_PER_INDEX / target.clock_hz + float(busy.max())


def plan_resize(raw: tuple[Any, ...], shape_in: tuple[int, ...], shape_out: tuple[int, ...], target: Target,
                item: int) -> ResizeOp | None:
    """The resize kernel of an NCHW ``image.resize2d`` node (``raw``: its ``attrs["resize"]``): of the
    block sizes that fit the LDM budget, the fastest by the time model; None (it stays on the MPE)
    when the parameters are not handled, the shapes are not NCHW of the same N and C, or not even one
    output row fits."""
    spec = spec_of(raw)
    if spec is None or len(shape_in) != 4 or len(shape_out) != 4 or tuple(shape_in[:2]) != tuple(shape_out[:2]):
        return None
    n, c, ih, iw = shape_in
    oh, ow = shape_out[2], shape_out[3]
    if min(n, c, ih, iw, oh, ow) < 1:
        return None
    total = n * c * oh
    first = -(-total // CPES)
    best: ResizeOp | None = None
    for rows in sorted({max(1, first >> k) for k in range(BLOCK_SIZES)}, reverse=True):
        op = ResizeOp(spec, n * c, ih, iw, oh, ow, rows, item)
        if op.ldm_bytes > target.ldm_budget_bytes:
            continue
        op.seconds = _seconds(target, op)
        if best is None or op.seconds < best.seconds:
            best = op
    return best
