"""TIR expressions -> C: one walk, two dialects.

``ExprPrinter`` prints what both kinds of C print alike (operators, min/max, not, casts, selects) and
leaves what differs to a dialect's hooks: variables, literals, floor division, buffer loads, calls.
``KernelExpr`` is a scheduled kernel's dialect (``cexpr``): variables renamed through an environment,
plain literals, floor division as C's (every index the schedules produce is non-negative),
``SW_MIN``/``SW_MAX``, the expression intrinsics (tuner.expr.intrinsics). The legalized operators'
dialect is their printer (tuner.ir.cprint.legalized).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from tuner.expr.intrinsics import INTRINSICS, c_function
from tuner.ir.cprint.dtypes import ctype, dtype_of
from tuner.ir.tir import kind

BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==",
          "NE": "!=", "And": "&&", "Or": "||", "Div": "/", "Mod": "%"}


class ExprPrinter(ABC):
    """The shared walk over a TIR expression; a dialect implements the hooks."""

    minmax = "SW_"  # prefix of the min/max macros
    cast_type: Callable[[str], str] = staticmethod(ctype)  # the C type a Cast names

    def expr(self, e: Any) -> str:
        k = kind(e)
        if k in ("Var", "IntImm", "FloatImm"):
            return self.leaf(e)
        if k in BINARY:
            return f"({self.expr(e.a)} {BINARY[k]} {self.expr(e.b)})"
        if k in ("FloorDiv", "FloorMod"):
            return self.floor_div(e)
        if k in ("Min", "Max"):
            return f"{self.minmax}{k.upper()}({self.expr(e.a)}, {self.expr(e.b)})"
        if k == "Not":
            return f"(!{self.expr(e.a)})"
        if k == "Cast":
            return f"(({self.cast_type(dtype_of(e))}){self.expr(e.value)})"
        if k == "Select":
            return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if k == "TensorLoad":
            return self.load(e)
        if k == "Call":
            return self.call(e)
        raise self.unsupported(e)

    # ---- the dialect's hooks ------------------------------------------------------------------
    @abstractmethod
    def leaf(self, e: Any) -> str:
        """A variable's C name or a literal."""

    @abstractmethod
    def floor_div(self, e: Any) -> str:
        """A FloorDiv or FloorMod."""

    @abstractmethod
    def load(self, e: Any) -> str:
        """An element a buffer load reads."""

    @abstractmethod
    def call(self, e: Any) -> str:
        """A call (math functions and the other intrinsics)."""

    def unsupported(self, e: Any) -> Exception:
        """The error for an expression the dialect cannot print."""
        return NotImplementedError(f"cannot print TIR expression {kind(e)}: {e}")


class KernelExpr(ExprPrinter):
    """A scheduled kernel's dialect: ``env`` renames variables, ``loader`` prints buffer loads."""

    def __init__(self, env: dict[str, str], loader: Callable[[Any], str] | None = None) -> None:
        self.env, self.loader = env, loader

    def leaf(self, e: Any) -> str:
        k = kind(e)
        if k == "Var":
            return self.env.get(e.name, e.name)
        return str(int(e.value)) if k == "IntImm" else repr(float(e.value))

    def floor_div(self, e: Any) -> str:
        # every index expression the schedules produce is non-negative: C's division is the floor
        op = "/" if kind(e) == "FloorDiv" else "%"
        return f"({self.expr(e.a)} {op} {self.expr(e.b)})"

    def load(self, e: Any) -> str:
        if self.loader is None:
            raise NotImplementedError("buffer load in an index expression")
        return self.loader(e)

    def call(self, e: Any) -> str:
        op = str(e.op.name)
        if op not in INTRINSICS:  # the math functions an expression may call (libm, as TVM's C codegen)
            raise self.unsupported(e)
        dtype = str(getattr(e, "dtype", None) or e.ty)  # a tirx Call types itself in ``ty``
        return f"{c_function(op, dtype)}({', '.join(self.expr(a) for a in e.args)})"


def cexpr(e: Any, env: dict[str, str], load: Callable[[Any], str] | None = None) -> str:
    """C text of a TIR expression in a kernel; ``env`` renames variables, ``load`` prints buffer loads."""
    return KernelExpr(env, load).expr(e)
