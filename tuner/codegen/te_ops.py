"""The operators as TVM tensor expressions: conv2d (groups, padding), dense, batch_matmul, and any
operator written as an expression (tuner/expr) -> PrimFunc plus the roles of its operands.

Each builder returns the PrimFunc of the *kernel* the CPEs run plus, for conv2d, the padding stage the
host runs once before the spawn (swDNN style). The conv kernel reads the padded input viewed as
``[N, G, C/G, Hp, Wp]`` so a tile of it is the box the analysis (tuner/space/conv2d.py) describes.

An operand's *role* names its LDM buffer, DMA state and kernel argument in the generated C: its
sharing group (``a``: shared along a mesh row, ``b``: along a column; tuner/expr/geometry.py) followed
by its index within the group after the first (``a``, ``a1``, ``b``, ``b1``...). The output is ``c``.
The built-in ops have one operand per group, so their roles are ``a`` and ``b``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.workloads import EXPR_OP, BatchMatmul, Conv2d, Dense, Workload


@dataclass(frozen=True)
class OpDef:
    """A kernel PrimFunc, its input tensors (parameter order) with their roles, and its output."""

    func: Any  # tvm.tirx.PrimFunc
    block: str  # name of the compute block
    inputs: tuple[str, ...]  # input tensor names, in parameter order
    roles: tuple[str, ...]  # role of each input (see the module docstring)
    c: str
    pad: Any = None  # conv2d only: PrimFunc of the host-side padding stage (NCHW -> padded)


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


def conv2d_padding(w: Conv2d) -> Any:
    """Host stage: NCHW input -> zero-padded [N, G, C/G, Hp, Wp]."""
    from tvm import te, tirx

    g, cpg = w.groups, w.c // w.groups
    hp, wp = w.h + 2 * w.pad_h, w.w + 2 * w.pad_w
    data = te.placeholder((w.n, w.c, w.h, w.w), w.dtype, name="data")

    def body(n, gi, c, y, x):
        inside = tirx.all(y >= w.pad_h, y < w.h + w.pad_h, x >= w.pad_w, x < w.w + w.pad_w)
        return tirx.if_then_else(inside, data[n, gi * cpg + c, y - w.pad_h, x - w.pad_w],
                                 tirx.const(0, w.dtype))

    padded = te.compute((w.n, g, cpg, hp, wp), body, name="data_pad")
    return te.create_prim_func([data, padded])


def conv2d(w: Conv2d) -> OpDef:
    from tvm import te

    g, cpg, kpg = w.groups, w.c // w.groups, w.k // w.groups
    hp, wp = w.h + 2 * w.pad_h, w.w + 2 * w.pad_w
    a = te.placeholder((w.n, g, cpg, hp, wp), w.dtype, name="A")
    b = te.placeholder((w.k, cpg, w.r, w.s), w.dtype, name="B")
    rc = te.reduce_axis((0, cpg), "rc")
    rr = te.reduce_axis((0, w.r), "rr")
    rs = te.reduce_axis((0, w.s), "rs")
    # groups == 1: the group index is the constant 0, so an ``a`` tile does not depend on the k tile
    group = (lambda k: k // kpg) if g > 1 else (lambda k: 0)
    c = te.compute(
        (w.n, w.k, w.oh, w.ow),
        lambda n, k, y, x: te.sum(
            a[n, group(k), rc, y * w.stride_h + rr * w.dil_h, x * w.stride_w + rs * w.dil_w] * b[k, rc, rr, rs],
            axis=[rc, rr, rs]),
        name="C")
    return OpDef(te.create_prim_func([a, b, c]), "C", ("A", "B"), ("a", "b"), "C", pad=conv2d_padding(w))


def dense(w: Dense) -> OpDef:
    from tvm import te

    a = te.placeholder((w.m, w.k), w.dtype, name="A")
    b = te.placeholder((w.n, w.k), w.dtype, name="B")
    k = te.reduce_axis((0, w.k), "k")
    c = te.compute((w.m, w.n), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
    return OpDef(te.create_prim_func([a, b, c]), "C", ("A", "B"), ("a", "b"), "C")


def batch_matmul(w: BatchMatmul) -> OpDef:
    from tvm import te

    a = te.placeholder((w.b, w.m, w.k), w.dtype, name="A")
    b = te.placeholder((w.b, w.n, w.k), w.dtype, name="B")
    k = te.reduce_axis((0, w.k), "k")
    c = te.compute((w.b, w.m, w.n), lambda q, i, j: te.sum(a[q, i, k] * b[q, j, k], axis=k), name="C")
    return OpDef(te.create_prim_func([a, b, c]), "C", ("A", "B"), ("a", "b"), "C")


def expr_op(w: Workload) -> OpDef:
    """An expression operator: its PrimFunc rebuilt from the workload's TVMScript, roles from its geometry."""
    from tuner.expr.geometry import ExprGeometry
    from tuner.expr.parse import _compute_block, prim_func_from_script
    from tuner.expr.workload import ExprWorkload

    assert isinstance(w, ExprWorkload)
    func = prim_func_from_script(w.script)
    geo = ExprGeometry(w.expr)
    group = {op.access.tensor: op.group for op in geo.operands}
    names = [str(p.name) for p in func.params]
    inputs = tuple(n for n in names if n in group)
    return OpDef(func, str(_compute_block(func).name_hint), inputs, operand_roles([group[n] for n in inputs]),
                 w.expr.output.tensor)


def op_def(w: Workload) -> OpDef:
    if w.op == EXPR_OP:
        return expr_op(w)
    if isinstance(w, Conv2d):
        return conv2d(w)
    if isinstance(w, BatchMatmul):
        return batch_matmul(w)
    if isinstance(w, Dense):
        return dense(w)
    raise TypeError(f"no TE definition for {type(w).__name__}")
