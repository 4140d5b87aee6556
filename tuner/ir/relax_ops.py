"""Readers of single Relax operators into workloads, shared by task extraction (tuner.bridge.extract)
and the compiler's front end (tuner.ir.relax_reader), so both give a layer the same workload key.

conv2d, conv1d (a conv2d of height 1) and matmul become built-in workloads (``READERS``): a matmul of
any rank is dense or batch_matmul where a reshape is free (``matmul_geometry``), else it is legalized like the rest; any
other operator's legalized PrimFunc that is one compute stage becomes an expression operator
(``expression_workload``), as ``Routing`` allows; a transpose becomes the expression of TVM's
topi.transpose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from math import prod
from typing import Any

import numpy as np

from tuner.errors import InvalidWorkloadError
from tuner.expr.workload import ExprWorkload
from tuner.workloads import BatchMatmul, Conv2d, Dense


def _shape(expr: Any) -> tuple[list[int], str]:
    info = expr.ty  # the struct info of a Relax expression (R.Tensor(shape, dtype))
    return [int(d) for d in info.shape], str(info.dtype)


def conv_workload(call: Any) -> Conv2d:
    attrs = call.attrs
    if str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "OIHW":
        raise InvalidWorkloadError(f"conv2d layout {attrs.data_layout}/{attrs.kernel_layout} is not NCHW/OIHW")
    (n, c, h, w), dtype = _shape(call.args[0])
    (k, _, r, s), _ = _shape(call.args[1])
    top, left, bottom, right = (int(p) for p in attrs.padding)
    if top != bottom or left != right:
        raise InvalidWorkloadError(f"asymmetric conv2d padding {(top, left, bottom, right)} is not supported")
    sh, sw = (int(v) for v in attrs.strides)
    dh, dw = (int(v) for v in attrs.dilation)
    return Conv2d(n, c, h, w, k, r, s, stride_h=sh, stride_w=sw, pad_h=top, pad_w=left, dil_h=dh, dil_w=dw,
                  groups=int(attrs.groups), dtype=dtype)


class MatmulForm(Enum):
    """How a matmul of any rank reaches a GEMM-like kernel with no data moved (numpy's matmul rules)."""

    BATCH = "batch_matmul"  # a and b hold the same batch elements (equal batch dims up to leading 1s)
    DENSE = "dense"  # otherwise b is one matrix (rank 1 or 2, or batch dims all 1): a's leading dims fold into M


@dataclass(frozen=True)
class MatmulGeometry:
    """A matmul's operands as the kernel reads them: a as [batch, m, k], b as [batch, k, n] (batch 1 for
    DENSE, where a is [m, k]), and the output's shape."""

    form: MatmulForm
    batch: int
    m: int
    n: int
    k: int
    out_shape: tuple[int, ...]


def matmul_geometry(a: Sequence[int], b: Sequence[int]) -> MatmulGeometry:
    """Where a reshape is free, the dense or batch_matmul form of ``a @ b`` (torch/ONNX/numpy matmul:
    a rank-1 operand is a row or column vector, batch dims broadcast); InvalidWorkloadError when an
    operand would have to be copied across a broadcast batch dim (the expression path takes that)."""
    a, b = list(a), list(b)
    if not a or not b:
        raise InvalidWorkloadError("matmul of a 0-d operand")
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise InvalidWorkloadError(f"matmul of shapes {a} x {b}: reduction lengths differ")
    m, k, n = a2[-2], a2[-1], b2[-1]
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))
    except ValueError:
        raise InvalidWorkloadError(f"matmul of shapes {a} x {b}: batch dims do not broadcast") from None
    out = [*batch, *([m] if len(a) > 1 else []), *([n] if len(b) > 1 else [])]
    if len(a2) > 2 and len(b2) > 2 and prod(a2[:-2]) == prod(b2[:-2]) == prod(batch):
        # the same batch elements on both sides (a batch of 1 too: a runtime b is read as it is)
        return MatmulGeometry(MatmulForm.BATCH, prod(batch), m, n, k, tuple(out))
    if prod(b2[:-2]) == 1:  # one weight matrix: every row of a (batch dims included) is one GEMM row
        return MatmulGeometry(MatmulForm.DENSE, 1, prod(a2[:-1]), n, k, tuple(out))
    raise InvalidWorkloadError(f"matmul of shapes {a} x {b} broadcasts an operand across batch dims "
                               "(not a free reshape to dense or batch_matmul)")


def conv1d_workload(call: Any) -> Conv2d:
    """A 1-D convolution (NCW/OIW) as the conv2d of height 1 it equals: [N, C, 1, W] and [K, C/g, 1, S]
    are free views of its operands."""
    attrs = call.attrs
    if str(attrs.data_layout) != "NCW" or str(attrs.kernel_layout) != "OIW":
        raise InvalidWorkloadError(f"conv1d layout {attrs.data_layout}/{attrs.kernel_layout} is not NCW/OIW")
    (n, c, w), dtype = _shape(call.args[0])
    (k, _, s), _ = _shape(call.args[1])
    left, right = (int(p) for p in attrs.padding)
    if left != right:
        raise InvalidWorkloadError(f"asymmetric conv1d padding {(left, right)} is not supported")
    (stride,), (dil,) = (int(v) for v in attrs.strides), (int(v) for v in attrs.dilation)
    return Conv2d(n, c, 1, w, k, 1, s, stride_h=1, stride_w=stride, pad_h=0, pad_w=left, dil_h=1, dil_w=dil,
                  groups=int(attrs.groups), dtype=dtype)


def matmul_workload(call: Any) -> Dense | BatchMatmul:
    a, dtype = _shape(call.args[0])
    b, _ = _shape(call.args[1])
    g = matmul_geometry(a, b)
    if g.form is MatmulForm.DENSE:
        return Dense(g.m, g.n, g.k, dtype)  # weights are constants: transposed to [N, K] at compile time
    return BatchMatmul(g.batch, g.m, g.n, g.k, dtype)


READERS = {"relax.nn.conv2d": conv_workload, "relax.nn.conv1d": conv1d_workload,
           "relax.matmul": matmul_workload}


class Routing(str, Enum):
    """Which single-stage PrimFuncs become expression operators (each level takes the ones before)."""

    GEMM_LIKE = "gemm_like"  # a reduction over a product of two or more inputs (conv1d, einsum, ...)
    REDUCTIONS = "reductions"  # and single-input reductions (sum, max, max pooling without padding)
    MEMORY_BOUND = "memory_bound"  # and element-wise operators (unary, broadcast binary, copies)


def expression_workload(func: Any, name: str, routing: Routing) -> ExprWorkload:
    """The legalized PrimFunc of an operator no reader takes, as an expression operator; raises
    InvalidWorkloadError with the reason it is not one (several stages, element-wise, ...)."""
    wl = ExprWorkload.from_script(canonical_script(_inline_copies(func)), re.sub(r"\d+$", "", name) or name)
    if not wl.expr.spatial:
        raise InvalidWorkloadError("a reduction to a scalar has no axis to spread over the CPEs")
    if wl.expr.gemm_like:
        return wl
    if routing is Routing.GEMM_LIKE:
        raise InvalidWorkloadError("not GEMM-like (memory-bound: Routing.MEMORY_BOUND tunes it)")
    if not wl.expr.reduce and routing is not Routing.MEMORY_BOUND:
        raise InvalidWorkloadError("element-wise (Routing.MEMORY_BOUND tunes it)")
    if any(not acc.shape for acc in wl.expr.inputs):
        # a 0-d operand (an ONNX scalar constant) has no tile box: left to the generic lowering
        raise InvalidWorkloadError("a 0-d operand")
    return wl


def canonical_script(func: Any) -> str:
    """The PrimFunc's TVMScript with its parameters renamed ``p0, p1, ...`` by position: a legalized
    PrimFunc names its inputs after the Relax bindings that feed it (``lv8``), so the same operator
    would get another workload key in every model, or from ONNX rather than torch. The renamed text
    must parse back to a structurally equal function, else the original text is kept."""
    import tvm_ffi

    from tuner.expr.parse import prim_func_from_script, script_text

    text = script_text(func)
    names = [str(p.name) for p in func.params]
    if len(set(names)) != len(names) or not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
        return text
    parts = re.split(r'("[^"]*")', text)  # string literals (block names, annotations) stay as they are
    for k in range(0, len(parts), 2):
        for i, n in enumerate(names):  # through placeholders: a name may be another's new name
            parts[k] = re.sub(rf"\b{re.escape(n)}\b", f"__swtune_p{i}__", parts[k])
        parts[k] = re.sub(r"__swtune_p(\d+)__", r"p\1", parts[k])
    renamed = "".join(parts)
    try:
        back = prim_func_from_script(renamed)
    except InvalidWorkloadError:
        return text
    return script_text(back) if tvm_ffi.structural_equal(back, prim_func_from_script(text)) else text


def transpose_expression(shape: tuple[int, ...], axes: tuple[int, ...], dtype: str) -> ExprWorkload:
    """A layout copy ``out[i...] = x[permuted i...]`` as an expression operator (TVM's topi.transpose)."""
    from tvm import te, topi

    from tuner.expr.parse import prim_func_from_tensors

    x = te.placeholder(shape, dtype, name="x")
    return ExprWorkload.from_script(canonical_script(prim_func_from_tensors([x, topi.transpose(x, list(axes))])),
                                    "transpose")


def _inline_copies(func: Any) -> Any:
    """The PrimFunc with its pure copy stages (a pad stage of padding 0, a transpose: ``out[..] =
    in[..]``) inlined into their consumer, so the compute reads the inputs themselves. A stage that
    computes (a zero padding's if_then_else) stays, and the function is then refused as two stages."""
    import tvm

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    blocks: list[Any] = []

    def walk(stmt: Any) -> None:
        kind = type(stmt).__name__
        if kind == "SBlockRealize":
            walk(stmt.block)
        elif kind == "SBlock":
            if stmt.iter_vars:
                blocks.append(stmt)
            walk(stmt.body)
        elif hasattr(stmt, "seq"):
            for x in stmt.seq:
                walk(x)
        elif hasattr(stmt, "body"):
            walk(stmt.body)

    walk(func.body)
    for block in blocks[:-1]:
        body = block.body
        if type(body).__name__ == "BufferStore" and type(body.value).__name__ in ("TensorLoad", "BufferLoad"):
            try:
                sch.compute_inline(sch.get_sblock(str(block.name_hint)))
            except Exception:  # noqa: BLE001 -- TVM refuses some inlines (e.g. a reduction reads it): keep the stage
                continue
    return sch.mod["main"]
