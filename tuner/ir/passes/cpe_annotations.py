"""Marks on a legalized operator's generic step that tell tuner.aot which CPE kernel runs it.

A region copy (concat, split, strided_slice, tile, slice_scatter) carries its static parameters as
``attrs["region"]`` (tuner.aot.cpe_region), an NCHW ``image.resize2d`` its as ``attrs["resize"]``
(tuner.aot.cpe_resize), a ``take`` along axis 0 (an embedding lookup) its out-of-range mode as
``attrs["gather"]`` (tuner.aot.cpe_gather), and a PrimFunc task extraction maps to an expression operator
(``Routing.MEMORY_BOUND``: GEMM-like stages, element-wise operators, single-input reductions) that
``expr_workload``: tuner.aot.kernels makes it a tuned kernel when the lookup has a config (for a
memory-bound one, when that is faster than its untuned lowering). Parameters that are not static leave
the step unmarked: it runs as its plain C.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.ir.graph import Node
from tuner.ir.passes.emit import expression_of, ints
from tuner.ir.passes.lowering_pass import LegalizedCall, LoweringPass

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader

# copies of rectangular regions between tensors (tuner.aot.cpe_region plans their CPE kernel)
REGION_OPS = ("concat", "split", "strided_slice", "tile", "slice_scatter")


def region_spec(op: str, call: Any, rank: int) -> tuple[Any, ...] | None:
    """The static parameters of a region-copy operator, as plain Python: ("concat", axis),
    ("split", axis), ("strided_slice", axes, begin, end, strides), ("tile",) (its repeats follow from
    the shapes), ("slice_scatter", axis, start, end, step); None when the Relax call is unknown or its
    parameters are not static integers."""
    if call is None or rank == 0:
        return None
    try:
        if op in ("concat", "split"):
            axis = call.attrs.axis
            return None if axis is None else (op, int(axis) % rank)
        if op == "strided_slice":
            axes, begin, end = (ints(call.args[i].fields) for i in (1, 2, 3))
            strides = ints(call.args[4].fields) if len(call.args) > 4 else (1,) * len(axes)
            return (op, tuple(a % rank for a in axes), begin, end, strides)
        if op == "tile":
            return (op,)
        if op == "slice_scatter":  # (input, src, start, end, step), the axis an attribute
            first, last, step = (int(call.args[i].value) for i in (2, 3, 4))
            return (op, int(call.attrs.axis) % rank, first, last, step)
    except (AttributeError, TypeError, ValueError):  # a symbolic begin/end/stride: the MPE copy runs
        return None
    return None


def resize_spec(call: Any, rank: int) -> tuple[str, str, str] | None:
    """The static parameters of an ``image.resize2d`` of NCHW data, as plain strings: (method,
    coordinate transformation mode, rounding method); None when the Relax call is unknown or the
    layout is not NCHW (tuner.aot.cpe_resize decides which of them it runs)."""
    if call is None or rank != 4:
        return None
    try:
        at = call.attrs
        if str(at.layout) != "NCHW":
            return None
        return (str(at.method), str(at.coordinate_transformation_mode), str(at.rounding_method))
    except AttributeError:
        return None


def gather_mode(call: Any) -> str | None:
    """A ``take`` along axis 0 (an embedding lookup): its out-of-range mode; None for another axis."""
    if call is None or getattr(call.attrs, "axis", None) is None or int(call.attrs.axis) != 0:
        return None
    return str(call.attrs.mode)


def annotate(r: RelaxReader, c: LegalizedCall, step: Node) -> None:
    """Set the attrs of ``step``, the generic node of ``c`` (its first output ``step.output``)."""
    if c.relax_op in REGION_OPS:
        spec = region_spec(c.relax_op, c.call, len(step.inputs[0].shape))
        if spec is not None:  # a region copy: a CPE layout kernel of its own (tuner.aot.cpe_region)
            step.attrs["region"] = spec
    if len(c.outs) != 1:  # the marks below are of single-output operators
        return
    if c.relax_op == "image.resize2d" and len(step.inputs) == 1:
        resize = resize_spec(c.call, len(step.inputs[0].shape))
        if resize is not None:  # an NCHW resize: a CPE kernel of its own (tuner.aot.cpe_resize)
            step.attrs["resize"] = resize
    if c.relax_op == "take" and len(step.inputs) == 2:
        mode = gather_mode(c.call)
        if mode is not None:  # a gather of table rows: a CPE kernel of its own (tuner.aot.cpe_gather)
            step.attrs["gather"] = mode
    wl = expression_of(r, c.func, c.fname)
    if wl is not None:  # compiled as a tuned kernel when the lookup has a config (tuner.aot.kernels)
        step.attrs["expr_workload"] = wl


PASS = LoweringPass("cpe_annotations", annotate=annotate)
