"""TVM side of the expression path: tensors or TVMScript -> PrimFunc -> :class:`~tuner.expr.expr.Expr`.

It imports tvm inside functions only (as do derivative.py and autodiff.py, the differentiation). The geometry is read
from the PrimFunc (its single compute sblock's iteration variables and read regions), not from the
``te`` objects, so an expression rebuilt from its TVMScript text describes exactly as the original.
Index expressions are analysed with ``tvm.sym.detect_linear_equation``: every access dimension must be
an integer affine function of the axes (halos from region extents, strides and dilation from
coefficients); anything else is refused with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.expr.expr import Access, Axis, AxisKind, DimAccess, Expr, Reducer
from tuner.expr.intrinsics import INTRINSICS, supported_names

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


@functools.lru_cache(maxsize=1024)
def prim_func_from_script(text: str) -> Any:
    """Rebuild a PrimFunc from its TVMScript text (what a worker receives). Memoized on the text: TVM's
    parser costs tens of milliseconds a call (it inspects the caller's stack), one model compile parses
    each operator's script several times, and a PrimFunc is immutable, so callers can share it."""
    import tvm.script

    try:
        # in a thread of its own: TVM's prim_func decorator reads every frame of the calling stack
        # (inspect.stack), which under a deep caller (a test runner, a web server) costs as much as the
        # parse itself; a fresh thread's stack is a few frames deep
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tvmscript") as pool:
            return pool.submit(tvm.script.from_source, text).result()
    except Exception as exc:  # noqa: BLE001 -- the TVMScript parser raises many types; all mean "invalid"
        raise InvalidWorkloadError(f"the expression's TVMScript does not parse: {exc}") from None


def script_text(func: Any) -> str:
    """The PrimFunc's TVMScript, without comment lines and trailing blanks (stable across prints)."""
    lines = [line.rstrip() for line in func.script().splitlines()]
    return "\n".join(line for line in lines if line.strip() and not line.lstrip().startswith("#")) + "\n"


def compute_block(func: Any) -> Any:
    """The one compute block (an SBlock with iteration variables) of ``func``; InvalidWorkloadError
    when it has none or several."""
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


def _body_reads(value: Any, output: str, variables: list[Any], names: list[str]) -> tuple[Access, ...]:
    """Every load of an input in the body, in order, duplicates kept (each index with span 1)."""
    from tvm import sym

    found: list[Access] = []

    def index(i: Any, tensor: str) -> DimAccess:
        coefs = sym.detect_linear_equation(i, variables)
        if len(coefs) != len(variables) + 1:
            raise InvalidWorkloadError(f"an index of {tensor} is not affine in the axes: {i}")
        values = [_int(c, f"a coefficient in the index {i} of {tensor}") for c in coefs]
        return DimAccess(coefs=tuple((n, c) for n, c in zip(names, values[:-1]) if c != 0), offset=values[-1])

    def walk(e: Any) -> None:
        name = type(e).__name__
        if name in _LOADS:
            buf = e.source
            if str(buf.name) != output:
                shape = tuple(_int(s, f"the shape of {buf.name}") for s in buf.shape)
                dims = tuple(index(i, str(buf.name)) for i in e.indices)
                found.append(Access(str(buf.name), shape, dims))
            return
        kids = [getattr(e, f) for f in ("a", "b", "value") if hasattr(e, f)] + list(getattr(e, "args", []) or [])
        if name == "Select":
            kids = [e.condition, e.true_value, e.false_value]
        for k in kids:
            if hasattr(k, "same_as"):
                walk(k)

    walk(value)
    return tuple(found)


def _count_ops(expr: Any) -> int:
    """Arithmetic operations in an expression tree (casts and loads are free)."""
    name = type(expr).__name__
    own = 1 if name in _ARITH else 0
    children = [getattr(expr, f) for f in ("a", "b", "value") if hasattr(expr, f) and name != "BufferLoad"]
    children += list(getattr(expr, "args", []) or [])
    if name == "Select":
        children = [expr.condition, expr.true_value, expr.false_value]
    return own + sum(_count_ops(c) for c in children if hasattr(c, "same_as"))


_LOADS = ("BufferLoad", "TensorLoad")
_MUL = ("Mul",)


def _profile(expr: Any, dtype: str) -> tuple[int, str]:
    """(CPE instructions, why it prints scalar or "") of a body expression, as the generated C issues
    it (tuner/ir/cprint/expr_vector.py): an add or subtract with a multiply operand is one FMA, max/min a
    compare and a select, a math call its table cost. A call outside tuner/expr/intrinsics.py is
    refused here, by name, rather than failing later to compile."""
    name = type(expr).__name__
    if name in _LOADS or name in ("FloatImm", "IntImm"):
        return 0, ""
    if name == "Cast":
        cost, why = _profile(expr.value, dtype)
        to = str(expr.ty)  # this TVM's tirx.Cast types itself in ``ty`` (no .dtype)
        if to == dtype or type(expr.value).__name__ in ("FloatImm", "IntImm"):
            return cost, why
        return cost + 1, why or f"a cast to {to}"
    if name == "Call":
        op = str(expr.op.name)
        if op not in INTRINSICS:
            raise InvalidWorkloadError(f"unsupported call {op.removeprefix('tirx.')} in the expression body; "
                                       f"the math functions codegen prints are: {supported_names()}")
        parts = [_profile(a, dtype) for a in expr.args]
        why = next((w for _, w in parts if w), "")
        if INTRINSICS[op].vector is None and not why:
            why = f"{op.removeprefix('tirx.')} has no vector instruction on the CPE"
        return INTRINSICS[op].cost + sum(c for c, _ in parts), why
    if name in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        (ca, wa), (cb, wb) = _profile(expr.a, dtype), _profile(expr.b, dtype)
        own = {"Max": 2, "Min": 2}.get(name, 1)
        if name in ("Add", "Sub") and (type(expr.a).__name__ in _MUL or type(expr.b).__name__ in _MUL):
            own = 0  # fused with its multiply operand into one FMA
        return own + ca + cb, wa or wb
    if name == "Select":
        parts = [_profile(x, dtype) for x in (expr.true_value, expr.false_value)]
        return 2 + sum(c for c, _ in parts), "a conditional (select) in the body"
    raise InvalidWorkloadError(f"unsupported {name} in the expression body: use arithmetic (+ - * /), "
                               f"max/min and the math functions {supported_names()}")


def _block_reason(value: Any, output: str) -> str:
    """Why the register-block micro-kernel (tuner/ir/cprint/register_block.py, acc = "reg") cannot print the body:
    it prints exactly ``c = c + x * y`` with x and y loads."""
    kinds = lambda e: type(e).__name__  # noqa: E731
    if (kinds(value) == "Add" and kinds(value.a) in _LOADS and str(value.a.source.name) == output
            and kinds(value.b) in _MUL and kinds(value.b.a) in _LOADS and kinds(value.b.b) in _LOADS):
        return ""
    return "the register-block micro-kernel prints only c += a * b (two operand loads)"


def describe(func: Any, name: str | None = None) -> Expr:
    """The geometry of a one-stage PrimFunc made by ``te.create_prim_func``."""
    block = compute_block(func)
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
    dtype = dtypes.pop()
    instructions, scalar = _profile(value, dtype)
    return Expr(name=name or str(block.name_hint), dtype=dtype, axes=tuple(axes), inputs=inputs,
                output=output, reducer=reducer, ops_per_point=max(1, _count_ops(value)),
                instructions_per_point=max(1, instructions), scalar_reason=scalar,
                block_reason=_block_reason(value, output.tensor),
                reads=_body_reads(value, output.tensor, variables, names))
