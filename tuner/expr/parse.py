"""TVM side of the expression path: tensors or TVMScript -> PrimFunc -> :class:`~tuner.expr.expr.Expr`.

The only module of ``tuner.expr`` that imports tvm, and only inside functions. The geometry is read
from the PrimFunc (its single compute sblock's iteration variables and read regions), not from the
``te`` objects, so an expression rebuilt from its TVMScript text describes exactly as the original.
Index expressions are analysed with ``tvm.sym.detect_linear_equation``: every access dimension must be
an integer affine function of the axes (halos from region extents, strides and dilation from
coefficients); anything else is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.expr.expr import Access, Axis, AxisKind, DimAccess, Expr, Reducer

_ARITH = ("Add", "Sub", "Mul", "Div", "Max", "Min", "FloorDiv", "FloorMod")
_REDUCERS = {"Add": Reducer.SUM, "Max": Reducer.MAX, "Min": Reducer.MIN}


def prim_func_from_tensors(tensors: Sequence[Any]) -> Any:
    """PrimFunc of a user function's tensors (inputs first, the one compute output last)."""
    from tvm import te

    tensors = list(tensors)
    if len(tensors) < 2:
        raise InvalidWorkloadError("an operator needs at least one input tensor and one output tensor")
    if not all(isinstance(t, te.Tensor) for t in tensors):
        raise InvalidWorkloadError("the operator function must return a list of te tensors (inputs, then output)")
    if not isinstance(tensors[-1].op, te.ComputeOp):
        raise InvalidWorkloadError("the last tensor must be a te.compute output")
    return te.create_prim_func(tensors)


def prim_func_from_script(text: str) -> Any:
    """Rebuild a PrimFunc from its TVMScript text (what a worker receives)."""
    import tvm.script

    try:
        return tvm.script.from_source(text)
    except Exception as exc:  # noqa: BLE001 -- the TVMScript parser raises many types; all mean "invalid"
        raise InvalidWorkloadError(f"the expression's TVMScript does not parse: {exc}") from None


def script_text(func: Any) -> str:
    """The PrimFunc's TVMScript, without comment lines and trailing blanks (stable across prints)."""
    lines = [line.rstrip() for line in func.script().splitlines()]
    return "\n".join(line for line in lines if line.strip() and not line.lstrip().startswith("#")) + "\n"


def _compute_block(func: Any) -> Any:
    from tvm.s_tir.stmt import SBlock, SBlockRealize

    blocks: list[Any] = []

    def walk(stmt: Any) -> None:
        if isinstance(stmt, SBlockRealize):
            walk(stmt.block)
            return
        if isinstance(stmt, SBlock):
            if stmt.iter_vars:
                blocks.append(stmt)
            walk(stmt.body)
            return
        seq = getattr(stmt, "seq", None)
        if seq is not None:
            for s in seq:
                walk(s)
        elif hasattr(stmt, "body"):
            walk(stmt.body)

    walk(func.body)
    if len(blocks) != 1:
        raise InvalidWorkloadError(f"the expression must be one te.compute stage; found {len(blocks)} "
                                   "(write padding or dilation into the input, or split the operator)")
    return blocks[0]


def _int(value: Any, what: str) -> int:
    from tvm import tirx

    if not isinstance(value, tirx.IntImm):
        raise InvalidWorkloadError(f"{what} must be a constant integer, got {value}")
    return int(value.value)


def _dim_access(region: Any, variables: list[Any], names: list[str], tensor: str) -> DimAccess:
    from tvm import sym

    coefs = sym.detect_linear_equation(region.min, variables)
    if len(coefs) != len(variables) + 1:
        raise InvalidWorkloadError(f"an index of {tensor} is not affine in the axes: {region.min}")
    values = [_int(c, f"a coefficient in the index {region.min} of {tensor}") for c in coefs]
    pairs = tuple((n, c) for n, c in zip(names, values[:-1]) if c != 0)
    return DimAccess(coefs=pairs, offset=values[-1], span=_int(region.extent, f"the span of an index of {tensor}"))


def _count_ops(expr: Any) -> int:
    """Arithmetic operations in an expression tree (casts and loads are free)."""
    name = type(expr).__name__
    own = 1 if name in _ARITH else 0
    children = [getattr(expr, f) for f in ("a", "b", "value") if hasattr(expr, f) and name != "BufferLoad"]
    children += list(getattr(expr, "args", []) or [])
    if name == "Select":
        children = [expr.condition, expr.true_value, expr.false_value]
    return own + sum(_count_ops(c) for c in children if hasattr(c, "same_as"))


def describe(func: Any, name: str | None = None) -> Expr:
    """The geometry of a one-stage PrimFunc made by ``te.create_prim_func``."""
    block = _compute_block(func)
    variables = [iv.var for iv in block.iter_vars]
    names = [str(iv.var.name).removeprefix("v_") for iv in block.iter_vars]
    axes = []
    for iv, axis_name in zip(block.iter_vars, names):
        if _int(iv.dom.min, f"the start of axis {axis_name}") != 0:
            raise InvalidWorkloadError(f"axis {axis_name} must start at 0")
        kind = {0: AxisKind.SPATIAL, 2: AxisKind.REDUCE}.get(int(iv.iter_type))
        if kind is None:
            raise InvalidWorkloadError(f"axis {axis_name} is neither spatial nor a reduction")
        axes.append(Axis(axis_name, _int(iv.dom.extent, f"the extent of axis {axis_name}"), kind))
    if len(block.writes) != 1:
        raise InvalidWorkloadError("the expression must write exactly one output tensor")

    def access(region: Any) -> Access:
        buf = region.source
        shape = tuple(_int(s, f"the shape of {buf.name}") for s in buf.shape)
        dims = tuple(_dim_access(r, variables, names, str(buf.name)) for r in region.region)
        return Access(str(buf.name), shape, dims)

    output = access(block.writes[0])
    spatial = [a.name for a in axes if a.kind is AxisKind.SPATIAL]
    if not spatial:
        # output tiles are what the CPEs share out; a scalar result has none (reduce in two stages)
        raise InvalidWorkloadError("the output has no spatial axis to spread over the CPE mesh "
                                   "(a reduction to a scalar); keep at least one output axis")
    if [d.coefs for d in output.dims] != [((s, 1),) for s in spatial] or any(d.offset for d in output.dims):
        raise InvalidWorkloadError("the output must be indexed by its spatial axes in order")
    reads = [access(r) for r in block.reads if str(r.source.name) != output.tensor]
    params = [str(p.name) for p in func.params]
    order = {t: i for i, t in enumerate(params)}
    inputs = tuple(sorted(reads, key=lambda a: order.get(a.tensor, len(order))))
    if not inputs:
        raise InvalidWorkloadError("the expression reads no input tensor")
    dtypes = {str(p.dtype) for p in func.params}
    if len(dtypes) != 1:
        raise InvalidWorkloadError(f"every tensor must have one dtype; got {sorted(dtypes)}")
    value = block.body.value
    has_reduce = any(a.kind is AxisKind.REDUCE for a in axes)
    if has_reduce:
        reducer = _REDUCERS.get(type(value).__name__)
        if reducer is None:
            raise InvalidWorkloadError(f"unsupported reduction {type(value).__name__}: use te.sum, te.max or te.min")
    else:
        reducer = Reducer.NONE
    return Expr(name=name or str(block.name_hint), dtype=dtypes.pop(), axes=tuple(axes), inputs=inputs,
                output=output, reducer=reducer, ops_per_point=max(1, _count_ops(value)))
