"""The reference result of an expression operator: its unscheduled PrimFunc built by TVM for llvm.

What a generated kernel of the operator is checked against (the emulator backend, ``swtune
check-op``): the same TVMScript the workload carries, so the reference and the kernel cannot describe
different operators. Built once per operator and process.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np


@lru_cache(maxsize=32)
def _built(script: str) -> tuple[Any, list[str]]:
    import tvm

    from tuner.expr.parse import prim_func_from_script

    func = prim_func_from_script(script)
    exe = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target="llvm")
    return exe, [str(p.name) for p in func.params]


def expr_reference(workload: Any, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """Output of the expression ``workload`` (an ExprWorkload) on ``inputs`` (parameter order)."""
    import tvm

    exe, _ = _built(workload.script)
    out = tvm.runtime.tensor(np.zeros(workload.expr.output.shape, dtype=workload.dtype))
    exe["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs], out)
    return out.numpy()


def expr_input_shapes(workload: Any) -> list[tuple[int, ...]]:
    """Shapes of the operator's inputs in parameter order (the order the host program reads them)."""
    _, names = _built(workload.script)
    shape = {acc.tensor: acc.shape for acc in workload.expr.inputs}
    return [shape[n] for n in names if n in shape]
