"""Lowering of a scheduled PrimFunc (front passes: compacted LDM buffers) and TIR -> C expressions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

_BIN = {"Add": "+", "Sub": "-", "Mul": "*", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==",
        "NE": "!=", "And": "&&", "Or": "||"}
# floordiv/floormod: every index expression the schedules produce is non-negative
_DIV = {"FloorDiv": "/", "Div": "/", "FloorMod": "%", "Mod": "%"}


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
    elif k in _BIN or k in _DIV or k in ("Min", "Max"):
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


def cexpr(e: Any, env: dict[str, str], load: Callable[[Any], str] | None = None) -> str:
    """C text of a TIR expression; ``env`` renames variables, ``load`` prints buffer loads."""
    k = kind(e)
    if k == "Var":
        return env.get(e.name, e.name)
    if k == "IntImm":
        return str(int(e.value))
    if k == "FloatImm":
        return repr(float(e.value))
    if k in _BIN:
        return f"({cexpr(e.a, env, load)} {_BIN[k]} {cexpr(e.b, env, load)})"
    if k in _DIV:
        return f"({cexpr(e.a, env, load)} {_DIV[k]} {cexpr(e.b, env, load)})"
    if k in ("Min", "Max"):
        return f"SW_{k.upper()}({cexpr(e.a, env, load)}, {cexpr(e.b, env, load)})"
    if k == "Not":
        return f"(!{cexpr(e.a, env, load)})"
    if k == "Cast":
        return f"(({ctype(str(e.ty))}){cexpr(e.value, env, load)})"  # tirx.Cast is typed in ``ty``
    if k == "Select":
        return (f"({cexpr(e.condition, env, load)} ? {cexpr(e.true_value, env, load)} : "
                f"{cexpr(e.false_value, env, load)})")
    if k == "TensorLoad":
        if load is None:
            raise NotImplementedError("buffer load in an index expression")
        return load(e)
    if k == "Call":
        from tuner.expr.intrinsics import INTRINSICS, c_function

        op = str(e.op.name)
        if op in INTRINSICS:  # the math functions an expression may call (libm, as TVM's C codegen)
            dtype = str(getattr(e, "dtype", None) or e.ty)  # a tirx Call types itself in ``ty``
            return f"{c_function(op, dtype)}({', '.join(cexpr(a, env, load) for a in e.args)})"
    raise NotImplementedError(f"cannot print TIR expression {k}: {e}")


def ctype(dtype: str) -> str:
    return {"float32": "float", "float64": "double", "int32": "int", "int64": "long", "bool": "int"}[dtype]


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
