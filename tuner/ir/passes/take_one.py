"""A ``take`` of one constant index (attention's ``qkv[0]``) as the slice [i, i + 1) along its axis.

TVM's take reads an int64 index operand, which the CPE cutter does not slice; the slice is a region copy
on the CPEs (tuner.aot.cpe_region), viewed as the take's result.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from tuner.ir.graph import Node
from tuner.ir.passes.emit import flatten, legalized
from tuner.ir.passes.lowering_pass import LegalizedCall, LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def one_index(c: LegalizedCall) -> tuple[int, int] | None:
    """(axis, index) of a ``take`` of one constant index, else None."""
    if c.relax_op != "take" or c.call is None or len(c.args) != 2 or len(c.outs) != 1:
        return None
    x, idx = c.args
    if idx.kind != "const" or idx.data is None or idx.data.size != 1 or not x.shape:
        return None
    axis = int(c.call.attrs.axis) % len(x.shape) if c.call.attrs.axis is not None else None
    if axis is None or prod(c.outs[0][0]) * x.shape[axis] != prod(x.shape):
        return None
    return axis, int(idx.data.reshape(-1)[0]) % x.shape[axis]


def take_one(r: RelaxReader, c: LegalizedCall) -> Value | None:
    """The slice a take of one constant index reads, viewed as the take's result; None for another operator."""
    from tvm import relax

    one = one_index(c)
    if one is None:
        return None
    axis, i = one
    sliced = legalized(r, [c.args[0]], lambda vs: relax.op.strided_slice(vs[0], [axis], [i], [i + 1]), c.name,
                       "take", expression=False)
    step = r.steps[-1]
    if isinstance(step, Node) and step.op == "tir" and step.output is sliced:
        step.attrs["region"] = ("strided_slice", (axis,), (i,), (i + 1,), (1,))
    return r.view(flatten(sliced)[0], c.outs[0][0], c.name)


PASS = LoweringPass("take_one", legalized=take_one)
