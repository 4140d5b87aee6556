"""A gather of table rows as a CPE kernel: Relax ``take`` along axis 0 (an embedding lookup) (GatherOp).

``take(table, ids, axis=0)`` with ``table`` [V, ...] and ids of any shape: seen as a [V, W] table and
M ids, the output is [M, W], row ``m`` being table row ``ids[m]``. The sliced kernels of
tuner.space.cpe cannot cut it: a block would need the whole table in LDM (a vocabulary's table is
hundreds of MB), and the ids align with the output's leading axes, not its trailing ones. Here a block
is ``rows`` consecutive ids: one DMA get of the ids (kept in the model's dtype, like every tensor:
tuner.ir.cprint.legalized), then one get per id of its table row straight from main memory into LDM (all issued,
then waited for together), and one contiguous put of the block. An id outside [0, V) is clamped, as
TVM's ``clip`` mode does (``fast`` leaves it undefined), or wrapped in ``wrap`` mode. tuner.aot.cpe_ops
keeps the kernel when it beats the other implementations (the MPE's legalized loop).

A layout kernel, not a tuning task: its time is one DMA get per row, whatever the schedule; the one
choice, the block size, is fixed so that every CPE has blocks and a block fits LDM.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from math import prod

from tuner.aot.cpe_blocks import RowBlocks
from tuner.space.cpe.schedule import CPES
from tuner.targets import Target


class OutOfRange(str, Enum):
    """What an id outside the table does (Relax ``take``'s ``mode``)."""

    FAST = "fast"  # undefined in TVM: clamped here
    CLIP = "clip"
    WRAP = "wrap"


@dataclass
class GatherOp(RowBlocks):
    """Rows of a [V, W] table by M ids, in blocks of ``rows`` ids (interface of tuner.aot.cpe_ops.CpeOp)."""

    v: int  # table rows
    w: int  # elements per row
    m: int  # ids (output rows)
    rows: int
    item: int
    mode: OutOfRange = OutOfRange.FAST
    axis: int = 0  # blocks run along the output's rows (the ids)
    seconds: float = 0.0
    index: int = -1

    @property
    def total_rows(self) -> int:
        return self.m

    @property
    def ldm_bytes(self) -> int:
        return self.rows * (self.w + 1) * self.item

    def dma_plan(self) -> dict[str, int]:
        """DMA requests and bytes of one run (what the emulator counts)."""
        out = self.m * self.w * self.item
        return {"get_reqs": self.blocks + self.m, "get_bytes": self.m * self.item + out,
                "put_reqs": self.blocks, "put_bytes": out}

    def slave_text(self, ty: str) -> str:
        """The CPE kernel as a generated slave file (merged by tuner.aot.kernels): p[0] the table,
        p[1] the ids, p[2] the output."""
        item = f"sizeof({ty})"
        row = (f"((id % {self.v}L) + {self.v}L) % {self.v}L" if self.mode == OutOfRange.WRAP
               else f"id < 0 ? 0 : id >= {self.v}L ? {self.v - 1}L : id")
        return "\n".join([
            f"__thread_local {ty} I_ldm[{self.rows}];",
            f"__thread_local {ty} Y_ldm[{self.rows * self.w}];",
            "__thread_local volatile SW_REPLY_T g_reply[1];",
            "void swtune_kernel(swtune_args *_arg) {",
            "  int n_rep = 0;",
            "  g_reply[0] = 0;",
            f"  for (long blk = _MYID; blk < {self.blocks}L; blk += {CPES}) {{",
            f"    const long m0 = blk * {self.rows}L;",
            f"    const long n = {self.m}L - m0 < {self.rows}L ? {self.m}L - m0 : {self.rows}L;",
            f"    SW_GET(_arg->p[1] + m0, I_ldm, n * {item}, 0, 0, &g_reply[0]); n_rep++;",
            "    SW_WAIT(&g_reply[0], n_rep);",
            "    for (long r = 0; r < n; r++) {  /* every row's get in flight at once */",
            "      const long id = (long)I_ldm[r];",
            f"      SW_GET(_arg->p[0] + ({row}) * {self.w}L, &Y_ldm[r * {self.w}L], {self.w}L * {item}, 0, 0, "
            "&g_reply[0]); n_rep++;",
            "    }",
            "    SW_WAIT(&g_reply[0], n_rep);",
            f"    SW_PUT(Y_ldm, _arg->p[2] + m0 * {self.w}L, n * {self.w}L * {item}, 0, 0, &g_reply[0]); n_rep++;",
            "    SW_WAIT(&g_reply[0], n_rep);",
            "  }",
            "}"]) + "\n"


def _seconds(target: Target, op: GatherOp) -> float:
    """Spawn/join, then the busiest CPE's blocks (round-robin): each the ids' get, one get per row
    (counted one after another: no credit for the overlap) and the put."""
    from tuner.measure.simulator import dma_time

    active = min(CPES, op.blocks)
    full = op.m // op.rows
    sizes = [op.rows] * full + ([op.m - full * op.rows] if op.m % op.rows else [])

    def block(n: int) -> float:
        return (dma_time(target, "get", n * op.item, active_cpes=active)
                + n * dma_time(target, "get", op.w * op.item, active_cpes=active)
                + dma_time(target, "put", n * op.w * op.item, active_cpes=active))

    busy = [0.0] * active
    for k, n in enumerate(sizes):
        busy[k % active] += block(n)
    return target.spawn_join_s + max(busy)


def plan_gather(mode: str, table: tuple[int, ...], ids: tuple[int, ...], target: Target,
                item: int) -> GatherOp | None:
    """The gather kernel of a ``take`` along axis 0 of ``table`` by ``ids``, or None (it stays on the
    MPE): an unknown mode, an empty table, or a row that does not fit LDM."""
    try:
        how = OutOfRange(mode)
    except ValueError:
        return None
    v, w, m = (table[0] if table else 0), prod(table[1:]), prod(ids)
    fit = target.ldm_budget_bytes // ((w + 1) * item)
    if v < 1 or w < 1 or m < 1 or fit < 1:
        return None
    op = GatherOp(v, w, m, int(min(fit, -(-m // CPES))), item, how)
    op.seconds = _seconds(target, op)
    return op
