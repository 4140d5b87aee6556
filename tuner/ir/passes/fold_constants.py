"""Constant folding: a legalized operator whose operands are all constants is run once at compile time.

Its PrimFunc runs on this host through TVM's llvm build (tuner.ir.llvm) and its results become constants
of the graph, so no step of the program computes what the weights alone determine (an ONNX model's shape
arithmetic, a weight's reshaping or scaling). The binding is reported as done at compile time. Views and
transposes of a constant are folded where they are read (tuner.ir.relax_reader.RelaxReader.view,
tuner.ir.passes.transposes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuner.ir import llvm
from tuner.ir.graph import Where
from tuner.ir.passes.lowering_pass import LegalizedCall, LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def fold(r: RelaxReader, c: LegalizedCall) -> Value | None:
    """The constants a legalized operator on constant operands computes, or None when an operand is not one."""
    if not all(a.kind == "const" for a in c.args):
        return None
    r.note(c.name, c.relax_op, Where.COMPILE_TIME, "constant operands folded")
    values = llvm.run(c.func, [np.asarray(a.data) for a in c.args], c.outs)
    consts = [r.const(v, c.name if len(values) == 1 else f"{c.name}.{i}") for i, v in enumerate(values)]
    return consts[0] if len(consts) == 1 else tuple(consts)


PASS = LoweringPass("fold_constants", legalized=fold)
