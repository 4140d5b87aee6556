"""conv2d, conv1d and matmul as the kernel nodes the tuned slave kernels run, on operands in their layouts.

Each becomes a "kernel" node with the workload task extraction gives the same call (tuner.ir.relax_ops,
so tuning-log keys match). conv1d is the conv2d of height 1 it equals, on views; a padded conv reads an
input zero-padded once before it (swDNN style), a step of its own. A matmul of any rank is dense or
batch_matmul on views of its operands where that is free (``matmul_geometry``; a b that is
``x.swapaxes(-1, -2)`` is read through x, with no copy), its b brought to the [N, K] the kernel reads
(tuner.ir.passes.transposes: a constant weight at compile time); a matmul that broadcasts an operand
across batch dims is the legalized matmul instead, a GEMM-like expression operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuner.errors import InvalidWorkloadError
from tuner.ir.graph import AotError, Node, Tensor
from tuner.ir.passes.emit import legalized, out_shape, synthetic
from tuner.ir.passes.lowering_pass import LoweringPass, Value
from tuner.ir.passes.transposes import transposed, untransposed
from tuner.ir.relax_ops import MatmulForm, conv1d_workload, conv_workload, matmul_geometry, matmul_workload

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def _workload(reader: Callable[[Any], Any], call: Any, name: str, op: str) -> Any:
    """The task extractor's reader of the call (identical workload keys), its refusal an AotError."""
    try:
        return reader(call)
    except InvalidWorkloadError as exc:
        raise AotError(f"{name} ({op}): {exc}") from None


def conv1d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """conv1d as the conv2d of height 1 it equals (views of its operands and of its output)."""
    w = _workload(conv1d_workload, call, name, op)
    x, weight = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    x4 = r.view(x, (w.n, w.c, 1, w.w), name + ".x")
    w4 = r.view(weight, (weight.shape[0], weight.shape[1], 1, weight.shape[2]), name + ".weight")
    out = conv2d_kernel(r, x4, w4, w, name, op)
    return r.view(out, out_shape(call, name), name)


def conv2d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    w = _workload(conv_workload, call, name, op)
    x, weight = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    out = conv2d_kernel(r, x, weight, w, name, op)
    if out_shape(call, name) != out.shape:
        raise AotError(f"{name} (nn.conv2d): output shape {out_shape(call, name)} != workload's {out.shape}")
    return out


def conv2d_kernel(r: RelaxReader, x: Tensor, weight: Tensor, w: Any, name: str, op: str) -> Tensor:
    """The conv2d kernel node of workload ``w`` on NCHW ``x`` and OIHW ``weight``."""
    if w.pad_h or w.pad_w:  # the kernel reads a zero-padded input (swDNN style), padded once before it
        from tvm import relax

        pads = [0, 0, 0, 0, w.pad_h, w.pad_h, w.pad_w, w.pad_w]
        x = synthetic(r, x, lambda v: relax.op.nn.pad(v, pads), name, "nn.pad (conv input)")
        pad_step = r.steps[-1]
        assert isinstance(pad_step, Node), "a conv input's padding is a step of its own"
        pad_step.attrs.update(pad_h=w.pad_h, pad_w=w.pad_w)  # its row-copy form on the MPE (mpe._pad_nchw)
    return r.node("kernel", [x, weight], (w.n, w.k, w.oh, w.ow), name, op, workload=w)


def matmul(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A matmul of any rank: dense or batch_matmul on views of its operands where that is free
    (``matmul_geometry``), else the legalized matmul as a GEMM-like expression operator."""
    from tvm import relax

    a, b = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    try:
        w = matmul_workload(call)
    except InvalidWorkloadError:  # an operand broadcast across batch dims: one einsum-like PrimFunc
        return legalized(r, [a, b], lambda vs: relax.op.matmul(vs[0], vs[1]), name, op)
    g = matmul_geometry(a.shape, b.shape)
    shape = out_shape(call, name)
    if g.form is MatmulForm.BATCH:
        # the kernel reads b as [B, N, K]: the operand of b's transpose when b = x.swapaxes(-1, -2)
        bt = untransposed(r, b, (g.batch, g.n, g.k))
        if bt is None:
            b3 = b if b.shape == (g.batch, g.k, g.n) else r.view(b, (g.batch, g.k, g.n), name + ".b")
            bt = transposed(r, b3, (0, 2, 1), name, "matmul")
        a3 = a if a.shape == (g.batch, g.m, g.k) else r.view(a, (g.batch, g.m, g.k), name + ".a")
        out = r.node("kernel", [a3, bt], (g.batch, g.m, g.n), name, "matmul", workload=w)
    else:
        a_rows = a if a.shape == (g.m, g.k) else r.view(a, (g.m, g.k), name + ".a")
        b2 = b if b.shape == (g.k, g.n) else r.view(b, (g.k, g.n), name + ".b")
        bt = transposed(r, b2, (1, 0), name, "matmul")  # dense reads weight[N, K]
        out = r.node("kernel", [a_rows, bt], (g.m, g.n), name, "matmul", workload=w)
    return out if out.shape == shape else r.view(out, shape, name)


PASS = LoweringPass("kernel_nodes", rules={"nn.conv2d": conv2d, "nn.conv1d": conv1d, "matmul": matmul})
