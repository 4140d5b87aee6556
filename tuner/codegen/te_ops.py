"""Every operator as a TVM PrimFunc plus the roles of its operands: a built-in op (conv2d, dense,
batch_matmul) from the expression its spec module writes (tuner/space/gemm.py, conv2d.py), an
expression operator (tuner/expr) from its own TVMScript.

A built-in op's spec expression is one multiply-add per point; :func:`spec_compute` writes it as a
``te.compute`` whose loops carry the axes' names, with the indices the expression cannot say (conv2d's
group index ``k // (K/G)``) taken from the spec. The conv kernel reads the input the host padded once
before the spawn (tuner/codegen/host.py), viewed as ``[N, G, C/G, Hp, Wp]``: the box the analysis
describes.

An operand's *role* names its LDM buffer, DMA state and kernel argument in the generated C: its
sharing group (``a``: shared along a mesh row, ``b``: along a column; tuner/space/expr_geometry.py) followed
by its index within the group after the first (``a``, ``a1``, ``b``, ``b1``...). The output is ``c``.
The built-in ops have one operand per group, so their roles are ``a`` and ``b``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.expr.expr import Access, Expr, Reducer
from tuner.task_kind import kind_of
from tuner.workloads import Workload


@dataclass(frozen=True)
class OpDef:
    """A kernel PrimFunc, its input tensors (parameter order) with their roles, and its output."""

    func: Any  # tvm.tirx.PrimFunc
    block: str  # name of the compute block
    inputs: tuple[str, ...]  # input tensor names, in parameter order
    roles: tuple[str, ...]  # role of each input (see the module docstring)
    c: str


def operand_roles(groups: Sequence[str]) -> tuple[str, ...]:
    """Roles of operands in groups ``a``/``b``: the group letter, then an index after the first."""
    seen: dict[str, int] = {}
    out = []
    for g in groups:
        n = seen.get(g, 0)
        seen[g] = n + 1
        out.append(g if n == 0 else f"{g}{n}")
    return tuple(out)


def role_group(role: str) -> str:
    """The sharing group (a | b | c) of a role."""
    return role[0]


def spec_compute(expr: Expr, index_div: Mapping[tuple[str, int], tuple[str, int]]) -> Any:
    """The PrimFunc of a built-in op's spec expression (tuner/space/gemm.py, conv2d.py): one
    multiply-add per point, ``out[spatial] = sum_reduce prod(inputs[affine indices])``; ``index_div``
    holds the indices the expression cannot say, ``(tensor, dim) -> (axis, divisor)`` for
    ``axis // divisor`` (conv2d's group index). Loops and block iterators carry the axes' names:
    spatial in the output's order, then the reductions in the expression's."""
    from tvm import te

    assert expr.reducer is Reducer.SUM and expr.instructions_per_point == 1, expr.name
    inputs = [te.placeholder(acc.shape, expr.dtype, name=acc.tensor) for acc in expr.inputs]
    reduce = {a.name: te.reduce_axis((0, a.extent), a.name) for a in expr.reduce}
    out_axes = [d.coefs[0][0] for d in expr.output.dims]

    def index(acc: Access, var: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for i, d in enumerate(acc.dims):
            if (acc.tensor, i) in index_div:
                axis, divisor = index_div[acc.tensor, i]
                out.append(var[axis] // divisor)
                continue
            terms = [var[a] if c == 1 else var[a] * c for a, c in d.coefs] + ([d.offset] if d.offset else [])
            e = terms[0] if terms else 0
            for t in terms[1:]:
                e = e + t
            out.append(e)
        return out

    def body(*idx: Any) -> Any:
        var = {**dict(zip(out_axes, idx)), **reduce}
        prod_ = None
        for t, acc in zip(inputs, expr.inputs):
            x = t[tuple(index(acc, var))]
            prod_ = x if prod_ is None else prod_ * x
        return te.sum(prod_, axis=list(reduce.values()))

    out = te.compute(expr.output.shape, body, name=expr.output.tensor, varargs_names=out_axes)
    return te.create_prim_func([*inputs, out])


def builtin_op(w: Workload) -> OpDef:
    """A built-in op from its spec module: the te compute of the expression its geometry is."""
    from tuner.space.ops import geometry_for

    geo: Any = geometry_for(w)
    func = spec_compute(geo.expr, geo.index_div)
    return _op(func, geo)


def _op(func: Any, geo: Any) -> OpDef:
    """The OpDef of ``func`` whose operands are the geometry's: roles from their sharing groups."""
    from tuner.expr.parse import compute_block

    group = {op.access.tensor: op.group for op in geo.operands}
    names = [str(p.name) for p in func.params]
    inputs = tuple(n for n in names if n in group)
    return OpDef(func, str(compute_block(func).name_hint), inputs, operand_roles([group[n] for n in inputs]),
                 geo.expr.output.tensor)


def expr_op(w: Workload) -> OpDef:
    """An expression operator: its PrimFunc rebuilt from the workload's TVMScript, roles from its geometry."""
    from tuner.expr.parse import prim_func_from_script
    from tuner.expr.workload import ExprWorkload
    from tuner.space.expr_geometry import ExprGeometry

    assert isinstance(w, ExprWorkload)
    return _op(prim_func_from_script(w.script), ExprGeometry(w.expr))


def op_def(w: Workload) -> OpDef:
    """The kernel PrimFunc of any workload, as its kind writes it."""
    op: OpDef = kind_of(w).tensor_program(w)
    return op
