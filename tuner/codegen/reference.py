"""The reference result of an operator: its unscheduled PrimFunc built by TVM for llvm.

What a generated kernel is checked against (the emulator backend, ``swtune check-op``): the PrimFunc
the kernel is scheduled from (tuner/codegen/te_ops.py: an expression's own TVMScript, a built-in op's
spec expression), so the reference and the kernel cannot describe different operators. The inputs
are the ones the host program reads: an input the spec pads before the spawn (PadPrepass) is padded
here the same way. The built-in specs themselves are checked against independent numpy loops
(tests/codegen_tests/test_codegen.py). Built once per operator and process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tuner.ir import llvm
from tuner.space.ops import PadPrepass, geometry_for

_BUILT: dict[str, tuple[Any, list[str], PadPrepass | None]] = {}


def _built(workload: Any) -> tuple[Any, list[str], PadPrepass | None]:
    """(PrimFunc, input parameter names, the prepass) of ``workload``, cached by its key (tuner.ir.llvm
    keeps the PrimFunc's build)."""
    if workload.key not in _BUILT:

        from tuner.codegen.te_ops import op_def

        op = op_def(workload)
        _BUILT[workload.key] = op.func, list(op.inputs), geometry_for(workload).prepass
        if len(_BUILT) > 32:  # a long session checks many operators: keep the recent ones
            del _BUILT[next(iter(_BUILT))]
    return _BUILT[workload.key]


def input_shapes(workload: Any) -> list[tuple[int, ...]]:
    """Shapes of the operator's inputs in parameter order, as the host program reads them."""
    _, names, pre = _built(workload)
    shape = {acc.tensor: acc.shape for acc in geometry_for(workload).expr.inputs}
    return [pre.shape if pre is not None and n == pre.tensor else shape[n] for n in names]


def reference(workload: Any, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """Output of ``workload`` on ``inputs`` (parameter order, as the host program reads them)."""
    func, names, pre = _built(workload)
    expr = geometry_for(workload).expr
    shape = {acc.tensor: acc.shape for acc in expr.inputs}
    args = []
    for name, x in zip(names, inputs, strict=True):
        if pre is not None and name == pre.tensor:
            x = np.pad(x, [(p, p) for p in pre.pad]).reshape(shape[name])
        args.append(x)
    (out,) = llvm.run(func, args, [(expr.output.shape, workload.dtype)])
    return out
