"""Lowering of a scheduled PrimFunc (front passes: compacted LDM buffers) and walks of TIR expressions:
the kind of a node, its free variables, the value of an integer expression (C printing: tuner.ir.cprint)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np


def lower(mod: Any, compact: bool = False) -> Any:
    """The front of TVM's lowering: init blocks lowered, blocks made opaque (and, with ``compact``,
    buffers compacted). The printer uses the uncompacted form: LDM indices stay in tensor
    coordinates and it subtracts the origin of the box the copy nest fetched, which holds however
    large TVM's compacted region would be."""
    import tvm
    from tvm.s_tir import transform as T

    passes = [T.LowerInitBlock(), T.PlanAndUpdateBufferAllocationLocation(), T.ConvertBlocksToOpaque()]
    if compact:
        passes.append(T.CompactBufferAllocation())
    seq = tvm.transform.Sequential(passes + [T.LowerOpaqueBlock()])
    return seq(mod)["main"]


def kind(node: Any) -> str:
    return type(node).__name__


def free_vars(e: Any, acc: set | None = None) -> set:
    """Names of the variables an expression uses."""
    acc = set() if acc is None else acc
    k = kind(e)
    if k == "Var":
        acc.add(e.name)
    elif k in _OPS:  # the binary operators
        free_vars(e.a, acc)
        free_vars(e.b, acc)
    elif k == "TensorLoad":
        for i in e.indices:
            free_vars(i, acc)
    elif k == "Cast":
        free_vars(e.value, acc)
    elif k == "Not":
        free_vars(e.a, acc)
    elif k == "Select":
        for x in (e.condition, e.true_value, e.false_value):
            free_vars(x, acc)
    return acc


def const_int(e: Any) -> int:
    if kind(e) != "IntImm":
        raise NotImplementedError(f"expected a constant, got {e}")
    return int(e.value)


# TIR's integer operators over ints or numpy arrays (element-wise; comparisons give bools).
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b, "Div": lambda a, b: a // b,
    "Mod": lambda a, b: a % b, "Min": np.minimum, "Max": np.maximum, "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "And": np.logical_and, "Or": np.logical_or}


def evaluate_array(e: Any, env: Mapping[str, Any]) -> Any:
    """Value of an integer TIR expression for every combination of loop-variable values at once: ``env``
    maps each variable to an int or a numpy array (arrays broadcast against each other)."""
    k = kind(e)
    if k == "Var":
        return env[e.name]
    if k == "IntImm":
        return int(e.value)
    if k in _OPS:
        return _OPS[k](evaluate_array(e.a, env), evaluate_array(e.b, env))
    if k == "Not":
        return np.logical_not(evaluate_array(e.a, env))
    if k == "Cast":
        return evaluate_array(e.value, env)
    if k == "Select":
        return np.where(evaluate_array(e.condition, env), evaluate_array(e.true_value, env),
                        evaluate_array(e.false_value, env))
    raise NotImplementedError(f"cannot evaluate {k}")


def evaluate(e: Any, env: dict[str, int]) -> int:
    """Value of an integer TIR expression for given loop-variable values."""
    return int(evaluate_array(e, env))
