"""Transposes: a constant's done at compile time, a runtime one a layout copy, one that undoes another elided.

``permute_dims`` and the transposes the kernel nodes need (a dense kernel reads its weight as [N, K])
go through ``transposed``: a constant is transposed here, once; a runtime tensor gets a ``transpose``
step, which carries the expression operator of its layout copy (as TVM's topi.transpose; tuned when the
lookup has a config); and a transpose of a transpose that restores the axes reads the first one's operand
(``x @ x^T``: Relax transposes b and the kernel wants it back), leaving the first one to dead code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tuner.errors import InvalidWorkloadError
from tuner.ir.graph import Node, Tensor, Where
from tuner.ir.passes.lowering_pass import LoweringPass, Value
from tuner.ir.relax_ops import transpose_expression

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def transposed(r: RelaxReader, t: Tensor, axes: tuple[int, ...], name: str, why: str) -> Tensor:
    """``t`` with its axes permuted to ``axes``: a constant, the operand of a transpose this one undoes,
    or a new ``transpose`` step (``why``: the Relax operator it is reported under)."""
    if t.kind == "const":
        assert t.data is not None
        return r.const(np.transpose(t.data, axes), f"{t.name}.T")
    # a runtime transpose undone here (x @ x^T: Relax transposes b, the kernel wants it back): use
    # the original; the first transpose is then unused and removed
    p = r.producer(t.root)
    if p is not None and p.op == "transpose" and t.shape == p.output.shape \
            and all(p.attrs["axes"][a] == i for i, a in enumerate(axes)):
        return p.inputs[0]
    shape = tuple(t.shape[a] for a in axes)
    out = r.node("transpose", [t], shape, name, why, axes=axes)
    step = r.steps[-1]
    assert isinstance(step, Node)
    key = f"transpose:{list(t.shape)}:{list(axes)}"
    if key not in r.expressions:  # a layout copy is an expression operator too (tuned when looked up)
        try:
            r.expressions[key] = transpose_expression(t.shape, axes, t.dtype)
        except InvalidWorkloadError:
            r.expressions[key] = None
    if r.expressions[key] is not None:
        step.attrs["expr_workload"] = r.expressions[key]
    return out


def untransposed(r: RelaxReader, b: Tensor, shape: tuple[int, ...]) -> Tensor | None:
    """When ``b`` is (a view of) a runtime transpose that only swaps its last two axes -- attention's
    ``k.transpose(-2, -1)`` --, the transpose's own operand viewed as ``shape`` = [B, N, K]: the kernel
    reads it as it is and the copy goes unused (removed as dead code)."""
    root = b.root
    p = r.producer(root)
    if p is None or p.op != "transpose" or root.shape[-2:] != b.shape[-2:]:
        return None
    axes = tuple(p.attrs["axes"])
    rank = len(axes)
    if rank < 2 or axes != (*range(rank - 2), rank - 1, rank - 2):
        return None
    src = p.inputs[0]
    return src if src.shape == shape else r.view(src, shape, f"{src.name}.bt")


def permute(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """``permute_dims`` (axes None: reversed)."""
    x = r.tensor(call.args[0], name)
    axes_attr = call.attrs.axes
    rank = len(x.shape)
    axes = tuple(reversed(range(rank))) if axes_attr is None else tuple(int(i) % rank for i in axes_attr)
    if x.kind == "const":
        r.note(name, op, Where.COMPILE_TIME, "constant transposed")
    return transposed(r, x, axes, name, op)


PASS = LoweringPass("transposes", rules={"permute_dims": permute})
