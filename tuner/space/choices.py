"""Named choices of the categorical knobs and the reasons a config is invalid: one home for both.

Each member is an ``IntEnum`` whose integer value is the code the vectorised analysis reads (a
categorical knob's code is the position of its choice) and whose ``label`` is the string stored in
configs, databases and on the wire. Members are declared in code order and labels are the lower-case
member names, so reordering or renaming a member changes stored configs: tests/tuner_tests/
test_choices.py pins both against the literal stored values.
"""

from __future__ import annotations

from enum import IntEnum, auto
from typing import Any, SupportsInt


class Labelled(IntEnum):
    """An enum whose members carry a stored string (``label``) next to their integer code."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[Any]) -> int:
        return count  # auto(): a member's code is its position, from 0 (module docstring)

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def labels(cls) -> tuple[str, ...]:
        """Stored strings of all members, in code order (the knob's choices)."""
        return tuple(m.label for m in cls)

    @classmethod
    def of(cls, label: str) -> Labelled:
        """The member stored as ``label``."""
        for m in cls:
            if m.label == label:
                return m
        raise ValueError(f"{label!r} is not one of {cls.__name__} {list(cls.labels())}")


class Share(Labelled):
    """Tile sharing across the mesh; MESH = register communication (SW26010) / RMA (Pro)."""

    NONE = auto()
    BCAST = auto()
    MESH = auto()


class Dma(Labelled):
    """One strided descriptor per tile, or one request per row."""

    STRIDED = auto()
    ROWS = auto()


class Order(Labelled):
    """Traversal of a CPE's output tiles (row order keeps a fixed, column order keeps b)."""

    ROW = auto()
    COL = auto()


class Acc(Labelled):
    """Where accumulators live with an output axis innermost (tuner/space/compute.py)."""

    LDM = auto()
    REG = auto()


class Pack(Labelled):
    """B (weights) stored tile after tile (one contiguous DMA per tile), or as given."""

    NONE = auto()
    B = auto()


class CgSplit(Labelled):
    """What a kernel split over several core groups divides among them (tuner/space/chip.py): its row
    tiles (a conv's batch and output rows, a GEMM's M), its col tiles (output channels, N), or the
    reduction (K), each CG then holding partial sums that one more pass adds."""

    ROWS = auto()
    COLS = auto()
    REDUCTION = auto()


class CgOperands(Labelled):
    """Where a split kernel's operand that every CG needs in full lives: a copy in each CG's memory
    (weights copied once at load; an activation copied before each call), or one copy the other CGs
    read across the chip."""

    REPLICATE = auto()
    CROSS = auto()


class Reason(Labelled):
    """Why a config is invalid, in the order the analysis checks them (the first that applies is reported)."""

    OK = auto()
    LDM_OVERFLOW = auto()
    SHARING_NEEDS_MESH_GRID = auto()
    RLC_NEEDS_SQUARE_GRID = auto()
    OPERAND_NOT_SHAREABLE = auto()
    PUT_LINES_UNALIGNED = auto()
    DMA_DESCRIPTOR_LIMIT = auto()
    ACC_REG_NEEDS_OUTPUT_INNER = auto()
    PACK_NEEDS_WHOLE_TILES = auto()
    EPILOGUE_NEEDS_DENSE_ROWS = auto()
    CG_SPLIT_FEWER_TILES_THAN_CGS = auto()
    CG_KNOB_WITHOUT_EFFECT = auto()
    CG_REDUCTION_WITH_EPILOGUE = auto()
    CG_REDUCTION_WITH_MESH = auto()


def reason_label(code: SupportsInt) -> str:
    """Stored string of a reason code as the analysis returns it (a numpy integer)."""
    return Reason(int(code)).label
