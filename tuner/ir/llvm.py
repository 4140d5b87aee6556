"""Run a PrimFunc on this host with TVM's llvm build: the one home of compile-time evaluation (the Relax
reader folding constants), of the CPE cut plans' checks, of the tile check and of the reference results
the emulator's outputs are compared with.

Builds are memoized on the PrimFunc's structure (its structural hash, confirmed by structural equality,
so two functions that differ only in names share one build). An llvm build costs tens to hundreds of
milliseconds, and one model compile checks the same element-wise operator at several shapes and block
sizes, many of them alike; the most recent builds are kept. A caller that runs small inputs once (the
cut checks) asks for ``opt_level=0``: the build is ~40% cheaper, and without fast-math LLVM's
optimisations do not change a float result, only how fast it comes.

    from tuner.ir import llvm
    (out,) = llvm.run(func, [x, y], [((4, 8), "float32")])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

KEEP = 256  # builds kept (each is a small shared object in memory)
_BUILDS: OrderedDict[tuple[int, int], list[tuple[Any, Any]]] = OrderedDict()


def fingerprint(func: Any) -> int:
    """The function's structural hash (two functions that differ only in names share it), the key of its
    builds here; stable across processes, so it can key a result stored on disk."""
    import tvm_ffi

    return int(tvm_ffi.structural_hash(func))


def compiled(func: Any, opt_level: int = 3) -> Any:
    """The llvm executable of ``func`` (built once per structure and optimisation level); call it as
    ``exe["main"](*tensors)``."""
    import tvm
    import tvm_ffi

    key = (fingerprint(func), opt_level)
    same_hash = _BUILDS.get(key, [])
    for known, exe in same_hash:
        if tvm_ffi.structural_equal(known, func):
            _BUILDS.move_to_end(key)
            return exe
    target = tvm.target.Target({"kind": "llvm", "opt-level": opt_level})
    exe = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
    _BUILDS[key] = [*same_hash, (func, exe)]
    _BUILDS.move_to_end(key)
    while len(_BUILDS) > KEEP:
        _BUILDS.popitem(last=False)
    return exe


def run(func: Any, inputs: Sequence[np.ndarray], outs: Sequence[tuple[tuple[int, ...], str]],
        opt_level: int = 3) -> list[np.ndarray]:
    """``func``'s outputs (``outs``: each one's shape and dtype) on ``inputs``, each reshaped to its
    parameter's own shape (a scalar is [1] in a Relax graph and 0-d in the PrimFunc)."""
    import tvm

    shapes = [tuple(int(d) for d in p.shape) for p in func.params[:len(inputs)]]
    args = [tvm.runtime.tensor(np.ascontiguousarray(x).reshape(s)) for x, s in zip(inputs, shapes)]
    res = [tvm.runtime.tensor(np.zeros(shape, dtype=dtype)) for shape, dtype in outs]
    compiled(func, opt_level)["main"](*args, *res)
    return [r.numpy() for r in res]
