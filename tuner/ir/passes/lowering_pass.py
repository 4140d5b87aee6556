"""What a lowering pass of the Relax reader is: a name and the hooks the reader calls, each optional.

The reader (tuner.ir.relax_reader) walks the bindings of the main function once. ``rules`` lower the Relax
operators a pass reads itself (LegalizeOps skips them); ``legalized`` is tried on each legalized operator
(a ``call_tir``) in the pipeline's order, and the first that returns a value lowers it; ``annotate`` marks
the generic step made of a legalized operator no pass rewrote; ``steps`` rewrites the step list once the
walk is done. Like TVM's ``tvm.transform.Sequential``, the pipeline is a list of named passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.ir.graph import Node, Note, Tensor

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader

Value = Any  # what a binding evaluates to: Tensor | tuple[Value, ...] | int | float | a shape
Shape = tuple[int, ...]


@dataclass(frozen=True)
class LegalizedCall:
    """A legalized operator as the reader meets it: ``call_tir`` of ``func`` on tensor operands."""

    name: str  # the binding
    relax_op: str  # the Relax operator before legalization (or the PrimFunc's operator name)
    func: Any  # the PrimFunc
    fname: str  # its name in the legalized module
    args: tuple[Tensor, ...]
    outs: list[tuple[Shape, str]]  # shape and dtype of each output
    call: Any  # the Relax call before legalization, or None when the module had none (a PrimFunc called as is)


# (reader, Relax call, binding name, operator name without "relax.") -> the binding's value
Rule = Callable[["RelaxReader", Any, str, str], Value]
# (reader, legalized call) -> the binding's value, or None: not this pass's
LegalizedRule = Callable[["RelaxReader", LegalizedCall], Value | None]
# (reader, legalized call, the generic step made of it): sets the step's attrs
Annotate = Callable[["RelaxReader", LegalizedCall, Node], None]
# (the walk's steps, the model's outputs) -> the steps
StepsRule = Callable[[list[Node | Note], list[Tensor]], list[Node | Note]]


@dataclass(frozen=True)
class LoweringPass:
    """One named pass of the reader's pipeline (tuner.ir.relax_reader.PIPELINE)."""

    name: str
    rules: Mapping[str, Rule] = field(default_factory=dict)
    legalized: LegalizedRule | None = None
    annotate: Annotate | None = None
    steps: StepsRule | None = None
