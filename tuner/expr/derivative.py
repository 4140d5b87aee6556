"""Scalar calculus on TVM expressions (PrimExpr): rebuild with substitutions, differentiate, print.

The adjoint construction (tuner/expr/autodiff.py) differentiates an operator's body with respect to
one group of tensor loads, then re-indexes the result. Here live the three walks it needs over a
body: ``rebuild`` (a copy with variables and tensor loads replaced), ``derivative`` (the standard
rules of calculus: sums, products, quotients, max/min and selects by their branch, and the math
calls an expression may use) and ``show`` (the body as a user writes it, ``A[i, k] * exp(B[k, j])``).
Imports tvm inside functions only, like tuner/expr/parse.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tuner.errors import InvalidWorkloadError

Load = Callable[[Any, list[Any]], Any]  # (tensor, indices) -> the expression that replaces the load

_BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min", "FloorDiv", "FloorMod", "EQ", "NE", "LT", "LE", "GT",
           "GE", "And", "Or")
_SYMBOL = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "FloorDiv": "//", "FloorMod": "%", "EQ": "==",
           "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "And": "and", "Or": "or"}
_TENSOR_LOAD = "te.tensor_load"
_IF_THEN_ELSE = "prim.if_then_else"


class NotDifferentiableError(InvalidWorkloadError):
    """The body uses something without a derivative rule here (named in the message)."""


def dtype_of(expr: Any) -> str:
    """The scalar type of an expression ("float64", "int32", "bool")."""
    return str(expr.ty)


def kind(expr: Any) -> str:
    return type(expr).__name__


def is_load(expr: Any) -> bool:
    return kind(expr) == "Call" and str(expr.op.name) == _TENSOR_LOAD


def load_parts(expr: Any) -> tuple[Any, list[Any]]:
    """(tensor, indices) of a te tensor load."""
    return expr.args[0], list(expr.args[1:])


def loads(expr: Any) -> list[Any]:
    """Every te tensor load in ``expr``, in order (a load's indices hold none)."""
    found: list[Any] = []

    def walk(e: Any) -> None:
        if is_load(e):
            found.append(e)
            return
        for child in _children(e):
            walk(child)

    walk(expr)
    return found


def nodes(expr: Any) -> list[Any]:
    """Every sub-expression of ``expr``, load indices included, parents first."""
    found: list[Any] = []

    def walk(e: Any) -> None:
        found.append(e)
        children = load_parts(e)[1] if is_load(e) else _children(e)
        for child in children:
            walk(child)

    walk(expr)
    return found


def _children(expr: Any) -> list[Any]:
    name = kind(expr)
    if name in _BINARY:
        return [expr.a, expr.b]
    if name in ("Not", "Cast"):
        return [expr.a if name == "Not" else expr.value]
    if name == "Select":
        return [expr.condition, expr.true_value, expr.false_value]
    if name == "Call":
        return list(expr.args)
    return []


def rebuild(expr: Any, variables: dict[Any, Any], load: Load, dtype: str | None = None) -> Any:
    """A copy of ``expr`` with each variable in ``variables`` replaced and each tensor load replaced by
    ``load(tensor, rebuilt indices)``; with ``dtype``, every float constant, cast and call moves to it."""
    from tvm import tirx

    def floats(e: Any) -> str:
        own = dtype_of(e)
        return dtype if dtype is not None and own.startswith("float") else own

    def go(e: Any) -> Any:
        name = kind(e)
        if name == "Var":
            return variables.get(e, e)
        if name == "FloatImm" and dtype is not None:
            return tirx.FloatImm(dtype, float(e.value))
        if name in ("IntImm", "FloatImm", "StringImm"):
            return e
        if name in _BINARY:
            return getattr(tirx, name)(go(e.a), go(e.b))
        if name == "Not":
            return tirx.Not(go(e.a))
        if name == "Cast":
            return tirx.Cast(floats(e), go(e.value))
        if name == "Select":
            return tirx.Select(go(e.condition), go(e.true_value), go(e.false_value))
        if is_load(e):
            tensor, indices = load_parts(e)
            return load(tensor, [go(i) for i in indices])
        if name == "Call":
            return tirx.call_intrin(floats(e), str(e.op.name), *[go(a) for a in e.args])
        raise NotDifferentiableError(f"unsupported {name} in the expression body")

    return go(expr)


# --- derivatives ------------------------------------------------------------------------------
# None stands for an exact zero, so that products with it vanish without a simplifier.
def _const(value: float, dtype: str) -> Any:
    from tvm import tirx

    return tirx.FloatImm(dtype, value)


def _add(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _mul(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return a * b


def _neg(a: Any) -> Any:
    return None if a is None else _const(0.0, dtype_of(a)) - a


def _pick(cond: Any, a: Any, b: Any, dtype: str) -> Any:
    from tvm import tirx

    if a is None and b is None:
        return None
    zero = _const(0.0, dtype)
    return tirx.Select(cond, zero if a is None else a, zero if b is None else b)


def _call(op: str, dtype: str, *args: Any) -> Any:
    from tvm import tirx

    return tirx.call_intrin(dtype, op, *args)


def _call_derivative(expr: Any, d: Any) -> Any:
    """d/dx of a math call f(a) given da = ``d`` (not None)."""
    op, dtype = str(expr.op.name), dtype_of(expr)
    a = expr.args[0]
    one = _const(1.0, dtype)
    rules: dict[str, Callable[[], Any]] = {
        "tirx.exp": lambda: expr * d,
        "tirx.exp2": lambda: expr * _const(math.log(2.0), dtype) * d,
        "tirx.log": lambda: d / a,
        "tirx.log2": lambda: d / (a * _const(math.log(2.0), dtype)),
        "tirx.log10": lambda: d / (a * _const(math.log(10.0), dtype)),
        "tirx.sqrt": lambda: d / (_const(2.0, dtype) * expr),
        "tirx.tanh": lambda: (one - expr * expr) * d,
        # 2/sqrt(pi) exp(-a^2): erf's derivative, written with exp (a call every expression may use)
        "tirx.erf": lambda: (_const(2.0 / math.sqrt(math.pi), dtype)
                             * _call("tirx.exp", dtype, _const(0.0, dtype) - a * a) * d),
        "tirx.sin": lambda: _call("tirx.cos", dtype, a) * d,
        "tirx.cos": lambda: _const(0.0, dtype) - _call("tirx.sin", dtype, a) * d,
        "tirx.fabs": lambda: _pick(a >= _const(0.0, dtype), d, _neg(d), dtype),
    }
    if op == "tirx.sigmoid":  # s (1 - s), with s = 1 / (1 + exp(-a)): sigmoid is no C intrinsic here
        s = one / (one + _call("tirx.exp", dtype, _const(0.0, dtype) - a))
        return s * (one - s) * d
    if op in ("tirx.floor", "tirx.ceil", "tirx.trunc", "tirx.round", "tirx.nearbyint"):
        return None
    if op not in rules:
        raise NotDifferentiableError(f"no derivative rule for {op.removeprefix('tirx.')} in the expression body")
    return rules[op]()


def derivative(expr: Any, wrt: Callable[[Any], bool]) -> Any:
    """d expr / d x, where x is every tensor load for which ``wrt(load)`` holds (one value: a group of
    loads of the same element). None when the derivative is exactly zero."""

    def go(e: Any) -> Any:
        name = kind(e)
        if not dtype_of(e).startswith("float"):
            return None  # indices, conditions and integer casts carry no gradient
        if is_load(e):
            return _const(1.0, dtype_of(e)) if wrt(e) else None
        if name in ("Var", "FloatImm", "IntImm"):
            return None
        if name in ("Add", "Sub"):
            da, db = go(e.a), go(e.b)
            return _add(da, db) if name == "Add" else _add(da, _neg(db))
        if name == "Mul":
            return _add(_mul(go(e.a), e.b), _mul(e.a, go(e.b)))
        if name == "Div":
            da, db = go(e.a), go(e.b)
            return _add(None if da is None else da / e.b, None if db is None else _neg(e.a * db / (e.b * e.b)))
        if name in ("Max", "Min"):
            return _pick(e.a >= e.b if name == "Max" else e.a <= e.b, go(e.a), go(e.b), dtype_of(e))
        if name == "Select":
            return _pick(e.condition, go(e.true_value), go(e.false_value), dtype_of(e))
        if name == "Cast":
            d = go(e.value)
            return None if d is None else _cast(dtype_of(e), d)
        if name == "Call" and str(e.op.name) == _IF_THEN_ELSE:
            return _pick(e.args[0], go(e.args[1]), go(e.args[2]), dtype_of(e))
        if name == "Call" and str(e.op.name) in ("tirx.pow", "tirx.power"):
            base, exponent = e.args
            db, de = go(base), go(exponent)
            one = _const(1.0, dtype_of(e))
            by_base = _mul(_mul(exponent, _call(str(e.op.name), dtype_of(e), base, exponent - one)), db)
            by_exponent = _mul(_mul(e, _call("tirx.log", dtype_of(e), base)), de)
            return _add(by_base, by_exponent)
        if name == "Call":
            if len(e.args) != 1:
                raise NotDifferentiableError(f"no derivative rule for {e.op.name} in the expression body")
            d = go(e.args[0])
            return None if d is None else _call_derivative(e, d)
        raise NotDifferentiableError(f"no derivative rule for {name} in the expression body")

    return go(expr)


def _cast(dtype: str, value: Any) -> Any:
    from tvm import tirx

    return tirx.Cast(dtype, value)


# --- printing ---------------------------------------------------------------------------------
def show(expr: Any) -> str:
    """``expr`` as a user writes it: loads as ``name[i, j]``, calls by their math name."""
    name = kind(expr)
    if name == "Var":
        return str(expr.name)
    if name == "IntImm":
        return str(int(expr.value))
    if name == "FloatImm":
        return f"{float(expr.value):g}"
    if is_load(expr):
        tensor, indices = load_parts(expr)
        return f"{tensor.op.name}[{', '.join(show(i) for i in indices)}]"
    if name in ("Max", "Min"):
        return f"{name.lower()}({show(expr.a)}, {show(expr.b)})"
    if name in _SYMBOL:
        return f"({show(expr.a)} {_SYMBOL[name]} {show(expr.b)})"
    if name == "Not":
        return f"not {show(expr.a)}"
    if name == "Cast":
        return show(expr.value)
    if name == "Select":
        return f"select({show(expr.condition)}, {show(expr.true_value)}, {show(expr.false_value)})"
    if name == "Call":
        op = str(expr.op.name).removeprefix("tirx.").removeprefix("prim.")
        return f"{op}({', '.join(show(a) for a in expr.args)})"
    return str(expr)


def show_indices(indices: Sequence[Any]) -> str:
    return ", ".join(show(i).removeprefix("(").removesuffix(")") for i in indices)
