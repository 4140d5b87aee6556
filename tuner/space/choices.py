"""Named choices of the categorical knobs and the reasons a config is invalid: one home for both.

Each member is an ``IntEnum`` whose integer value is the code the vectorised analysis reads (a
categorical knob's code is the position of its choice) and whose ``label`` is the string stored in
configs, databases and on the wire. Members are declared in code order and labels are the lower-case
member names, so reordering or renaming a member changes stored configs: tests/tuner_tests/
test_choices.py pins both against the literal stored values.
"""

from __future__ import annotations

from enum import IntEnum
from typing import SupportsInt


class Labelled(IntEnum):
    """An enum whose members carry a stored string (``label``) next to their integer code."""

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

    NONE = 0
    BCAST = 1
    MESH = 2


class Dma(Labelled):
    """One strided descriptor per tile, or one request per row."""

    STRIDED = 0
    ROWS = 1


class Order(Labelled):
    """Traversal of a CPE's output tiles (row order keeps a fixed, column order keeps b)."""

    ROW = 0
    COL = 1


class Acc(Labelled):
    """Where accumulators live with an output axis innermost (tuner/space/compute.py)."""

    LDM = 0
    REG = 1


class Pack(Labelled):
    """B (weights) stored tile after tile (one contiguous DMA per tile), or as given."""

    NONE = 0
    B = 1


class CgSplit(Labelled):
    """What a kernel split over several core groups divides among them (tuner/space/chip.py): its row
    tiles (a conv's batch and output rows, a GEMM's M), its col tiles (output channels, N), or the
    reduction (K), each CG then holding partial sums that one more pass adds."""

    ROWS = 0
    COLS = 1
    REDUCTION = 2


class CgOperands(Labelled):
    """Where a split kernel's operand that every CG needs in full lives: a copy in each CG's memory
    (weights copied once at load; an activation copied before each call), or one copy the other CGs
    read across the chip."""

    REPLICATE = 0
    CROSS = 1


class Reason(Labelled):
    """Why a config is invalid, in the order the analysis checks them (the first that applies is reported)."""

    OK = 0
    LDM_OVERFLOW = 1
    SHARING_NEEDS_MESH_GRID = 2
    RLC_NEEDS_SQUARE_GRID = 3
    OPERAND_NOT_SHAREABLE = 4
    PUT_LINES_UNALIGNED = 5
    DMA_DESCRIPTOR_LIMIT = 6
    ACC_REG_NEEDS_OUTPUT_INNER = 7
    PACK_NEEDS_WHOLE_TILES = 8
    EPILOGUE_NEEDS_DENSE_ROWS = 9
    CG_SPLIT_FEWER_TILES_THAN_CGS = 10
    CG_KNOB_WITHOUT_EFFECT = 11
    CG_REDUCTION_WITH_EPILOGUE = 12


def reason_label(code: SupportsInt) -> str:
    """Stored string of a reason code as the analysis returns it (a numpy integer)."""
    return Reason(int(code)).label
