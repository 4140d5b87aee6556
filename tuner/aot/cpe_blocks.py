"""What every memory-bound CPE kernel that runs its rows in blocks shares: its block count, its block
size and its slave function's name (interface of tuner.aot.cpe_ops.CpeOp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.ir.graph import slave_symbol


class RowBlocks:
    """Mixin of a CPE op dataclass with ``total_rows``, ``rows`` (rows per block) and ``index``."""

    rows: int
    index: int
    if TYPE_CHECKING:  # a field of some ops, a property of others

        @property
        def total_rows(self) -> int: ...

    @property
    def blocks(self) -> int:
        return -(-self.total_rows // self.rows)

    @property
    def block(self) -> int:
        return self.rows

    @property
    def name(self) -> str:
        return slave_symbol(self.index)
