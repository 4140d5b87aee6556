"""The named knob choices and failure reasons keep the strings and codes configs were stored with.

A stored config holds the labels below and the vectorised analysis reads the codes: reordering or
renaming an enum member must fail here instead of silently changing what stored configs mean.
"""

from pathlib import Path

import numpy as np
import pytest

from tuner.space import REASONS, ScheduleSpace
from tuner.space.choices import Acc, CgOperands, CgSplit, Dma, Order, Pack, Reason, Share
from tuner.space.expr_space import ExprSpace
from tuner.workloads import Dense

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"

# The literal stored choices of each categorical knob, in code order (as of issue #9).
STORED = {
    "share": (Share, ("none", "bcast", "mesh")),
    "dma": (Dma, ("strided", "rows")),
    "tile_order": (Order, ("row", "col")),
    "acc": (Acc, ("ldm", "reg")),
    "pack": (Pack, ("none", "b")),
    "cg_split": (CgSplit, ("rows", "cols", "reduction")),  # issue #43: on targets of several core groups
    "cg_operands": (CgOperands, ("replicate", "cross")),
}
STORED_REASONS = ("ok", "ldm_overflow", "sharing_needs_mesh_grid", "rlc_needs_square_grid", "operand_not_shareable",
                  "put_lines_unaligned", "dma_descriptor_limit", "acc_reg_needs_output_inner",
                  "pack_needs_whole_tiles", "epilogue_needs_dense_rows", "cg_split_fewer_tiles_than_cgs",
                  "cg_knob_without_effect", "cg_reduction_with_epilogue", "cg_reduction_with_mesh")


@pytest.mark.parametrize("knob", sorted(STORED))
def test_enum_labels_and_codes_are_the_stored_ones(knob: str) -> None:
    enum, stored = STORED[knob]
    assert enum.labels() == stored
    assert [int(m) for m in enum] == list(range(len(stored)))
    for code, label in enumerate(stored):
        assert enum.of(label) == code and enum(code).label == label


@pytest.mark.parametrize("knob", sorted(STORED))
def test_spaces_use_the_enum_choices_and_codes(knob: str) -> None:
    enum, stored = STORED[knob]
    space = ScheduleSpace(Dense(64, 64, 64), "sw26010-4cg")
    k = space.knobs[space.knob_index[knob]]
    assert k.choices == stored
    np.testing.assert_array_equal(k.codes, [float(m) for m in enum])


def test_restricted_knob_keeps_the_enum_codes() -> None:
    space = ScheduleSpace(Dense(64, 64, 64), "sw26010", restrict={"share": ["mesh"], "pack": ["b"]})
    assert list(space.knobs[space.knob_index["share"]].codes) == [float(Share.MESH)]
    assert list(space.knobs[space.knob_index["pack"]].codes) == [float(Pack.B)]


def test_reasons_are_the_stored_strings_in_check_order() -> None:
    assert REASONS == STORED_REASONS == Reason.labels()
    assert [int(r) for r in Reason] == list(range(len(STORED_REASONS)))
    with pytest.raises(ValueError):
        Reason.of("no_such_reason")


def test_expr_space_shares_the_choices_and_codes() -> None:
    pytest.importorskip("tvm")
    from tuner.expr.workload import workload_from_op

    wl = workload_from_op(f"{EXAMPLES}/linalg.py:weighted_gemm", {"m": 24, "n": 20, "k": 36})
    space = ExprSpace(wl, "sw26010-4cg")
    for knob, (enum, stored) in STORED.items():
        k = space.knobs[space.knob_index[knob]]
        assert k.choices == stored[:len(k.choices)] or set(k.choices) <= set(stored)
        np.testing.assert_array_equal(k.codes, [float(enum.of(c)) for c in k.choices])
