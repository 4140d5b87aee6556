"""The C math functions of TIR calls: libm names (``f`` suffix for float32) and the forms of rsqrt
and sigmoid, which libm lacks."""

from __future__ import annotations

from typing import Any

# math intrinsics: TVM name -> C name (the float32 variant adds "f")
MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p",
        "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
        "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
        "atanh": "atanh", "erf": "erf", "fabs": "fabs", "floor": "floor", "ceil": "ceil", "round": "rint",
        "nearbyint": "nearbyint", "trunc": "trunc", "pow": "pow", "atan2": "atan2", "fmod": "fmod",
        "expm1": "expm1", "hypot": "hypot", "copysign": "copysign"}
# calls printed from libm functions (MATH and the two composed forms): many cycles each
_COMPOSED = ("rsqrt", "sigmoid")


def op_name(call: Any) -> str:
    """A TIR call's operator without its namespace (``tirx.exp`` -> ``exp``)."""
    return str(call.op.name).removeprefix("tirx.").removeprefix("tir.").removeprefix("prim.")


def is_math(op: str) -> bool:
    """Whether ``op`` (op_name) prints as math_call."""
    return op in MATH or op in _COMPOSED


def math_call(op: str, args: list[str], dtype: str) -> str:
    """C text of math call ``op`` on ``args`` of ``dtype`` (float32: the ``f`` functions)."""
    sfx = "f" if dtype == "float32" else ""
    one = "1.0f" if dtype == "float32" else "1.0"
    if op == "rsqrt":
        return f"({one} / sqrt{sfx}({args[0]}))"
    if op == "sigmoid":
        return f"({one} / ({one} + exp{sfx}(-({args[0]}))))"
    return f"{MATH[op]}{sfx}({', '.join(args)})"
