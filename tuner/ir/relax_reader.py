"""Relax main function (params bound as constants) -> tuner.ir.graph.Graph.

The module is first legalized by TVM (``LegalizeOps``) except for the operators this reader keeps:
conv2d, conv1d (as a conv2d of height 1) and matmul become "kernel" nodes with the same workloads task
extraction produces
(tuner.bridge.extract), so tuning-log keys match, their operands brought to the layouts the slave
kernels read (constant weights transposed to [N, K] here, at compile time). A matmul of any rank is
dense or batch_matmul on views of its operands where that is free (``matmul_geometry``; a b that is
``x.swapaxes(-1, -2)`` is read through x, with no copy), and otherwise (an operand broadcast across
batch dims) the legalized matmul as a GEMM-like expression operator; batch_norm is folded to a
per-channel scale and shift (one step a kernel can fuse as its epilogue, or, with no kernel to fuse
into, a multiply and an add that run on the CPEs); group_norm and instance_norm become a
normalisation of the grouped view and a per-channel scale and shift (steps that slice into CPE
blocks); reshape-like operators are views;
``shape_of`` is a compile-time shape;
permute_dims is a layout copy (or a compile-time transpose of a constant). Every other operator
arrives as ``call_tir`` of a legalized PrimFunc and becomes a generic MPE node printed from its TIR
(tuner.ir.tir_c), or a compile-time constant when all its operands are constants (run once through
TVM's llvm build). A PrimFunc task
extraction maps to an expression operator (its own matcher, tuner.bridge.extract, with
``Routing.MEMORY_BOUND``: GEMM-like stages, element-wise operators, single-input reductions) carries
that ``expr_workload``, and so does a runtime transpose (a layout copy, as TVM's topi.transpose):
tuner.aot.kernels makes it a tuned kernel when the lookup has a config (for a memory-bound one, when
that is faster than its untuned lowering). Region copies (concat, split, strided_slice, tile, and a
take of one constant index, read as a slice) and NCHW
``image.resize2d`` carry their static parameters (``attrs["region"]``, ``attrs["resize"]``) for
their CPE kernels (tuner.aot.cpe_region, cpe_resize). An operator neither path can compile is an AotError naming
it and its binding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from math import prod
from typing import Any

import numpy as np

from tuner.errors import InvalidWorkloadError
from tuner.ir import llvm
from tuner.ir.cprint.dtypes import INPUT_FILE_TYPES
from tuner.ir.graph import ALLREDUCE_MEAN, AotError, Graph, Node, Note, Tensor, Where
from tuner.ir.names import operator_name
from tuner.ir.relax_ops import (
    MatmulForm,
    Routing,
    conv1d_workload,
    conv_workload,
    expression_workload,
    matmul_geometry,
    matmul_workload,
    transpose_expression,
)

Value = Any  # Tensor | tuple[Value, ...] | int | float

_VIEWS = {"reshape", "flatten", "squeeze", "expand_dims"}
# operators this reader keeps for itself; LegalizeOps lowers every other one to a PrimFunc
KEPT_OPS = ("nn.conv2d", "nn.conv1d", "matmul", "nn.batch_norm", "nn.group_norm", "nn.instance_norm",
            "permute_dims", "shape_of", "tensor_to_shape", *sorted(_VIEWS))


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _tensor_type(ty: Any, what: str) -> tuple[tuple[int, ...], str]:
    shape = getattr(ty, "shape", None)
    if shape is None:
        raise AotError(f"{what}: shape unknown ({ty}); the AOT compiler needs static shapes")
    try:
        return _ints(shape), str(ty.dtype)
    except (TypeError, ValueError):
        raise AotError(f"{what}: dynamic shape {shape} is not supported") from None


class RelaxReader:
    """One pass over ``mod["main"]``: ``read()`` returns the Graph."""

    def __init__(self, mod: Any, calls: dict[str, Any] | None = None) -> None:
        self.mod = mod
        self.calls = calls or {}  # binding name -> the Relax call before legalization
        self.ops = {k: str(c.op.name).removeprefix("relax.") for k, c in self.calls.items()}
        self.functions: dict[str, Any] = {}  # PrimFunc name -> its printed C (tuner.ir.tir_c.CFunction)
        self.expressions: dict[str, Any] = {}  # PrimFunc name -> its ExprWorkload, or None (not one)
        self.env: dict[Any, Value] = {}
        self.consts: dict[Any, Tensor] = {}  # Relax constant object -> its tensor (one storage each)
        self.steps: list[Node | Note] = []
        self.dtype = ""
        self._ids = 0

    # ---- tensors ------------------------------------------------------------------------------
    def _new(self, shape: tuple[int, ...], dtype: str, kind: str, name: str, **kw: Any) -> Tensor:
        self._ids += 1
        return Tensor(self._ids, tuple(shape), dtype, kind, name, **kw)

    def producer(self, t: Tensor) -> Node | None:
        """The step whose output ``t`` (itself, not a view of it) is, if a step made it."""
        return next((s for s in reversed(self.steps) if isinstance(s, Node) and s.output is t), None)

    def const(self, data: np.ndarray, name: str) -> Tensor:
        data = np.ascontiguousarray(data)
        return self._new(data.shape, str(data.dtype), "const", name, data=data)

    def view(self, t: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
        if prod(shape) != t.size:
            raise AotError(f"{name}: a view of {list(t.shape)} as {list(shape)} changes the size")
        if t.kind == "const":  # a folded constant keeps its own (reshaped) data: no aliasing to track
            assert t.data is not None
            return self.const(t.data.reshape(shape), name)
        return self._new(shape, t.dtype, t.kind, name, base=t)

    def node(self, op: str, inputs: list[Tensor], shape: tuple[int, ...], source: str, relax_op: str,
             **attrs: Any) -> Tensor:
        for t in inputs:
            if t.dtype != self.dtype:
                raise AotError(f"{source} ({relax_op}): operand {t.name} has dtype {t.dtype}, the model "
                               f"computes in {self.dtype}; mixed dtypes are not supported")
        out = self._new(shape, self.dtype, "temp", source)
        self.steps.append(Node(op, list(inputs), out, dict(attrs), relax_op, source))
        return out

    def note(self, source: str, relax_op: str, where: Where, detail: str = "") -> None:
        self.steps.append(Note(source, relax_op, where, detail))

    # ---- expressions --------------------------------------------------------------------------
    def expr(self, e: Any, name: str = "") -> Value:
        from tvm import ir, relax

        if isinstance(e, relax.Call):
            return self.call(e, name)
        if isinstance(e, ir.Constant):
            if e not in self.consts:
                self.consts[e] = self.const(e.value.numpy(), f"const{len(self.consts)}")
            return self.consts[e]
        if isinstance(e, relax.Tuple):
            return tuple(self.expr(f, name) for f in e.fields)
        if isinstance(e, relax.TupleGetItem):
            value = self.expr(e.tuple_value, name)
            if not isinstance(value, tuple):
                raise AotError(f"{name}: TupleGetItem of a non-tuple value")
            return value[int(e.index)]
        if isinstance(e, relax.ShapeExpr):
            return _ints(e.values)
        if isinstance(e, relax.Var):
            if e not in self.env:
                raise AotError(f"{name}: variable {e.name} is used before it is bound")
            return self.env[e]
        if type(e).__name__ == "PrimValue":
            return e.value.value
        raise AotError(f"{name}: Relax expression {type(e).__name__} is not supported by the AOT compiler")

    def tensor(self, e: Any, name: str) -> Tensor:
        v = self.expr(e, name)
        if isinstance(v, (int, float)):
            return self.const(np.array(v, dtype=self.dtype), f"{name}.scalar")
        if not isinstance(v, Tensor):
            raise AotError(f"{name}: expected a tensor operand, got {type(v).__name__}")
        return v

    def call(self, call: Any, name: str) -> Value:
        op = getattr(call.op, "name", None)
        if op is None or not str(op).startswith("relax."):
            raise AotError(f"{name}: call to {call.op} is not a Relax operator; compile the module before "
                           "legalization (no call_tir / extern functions)")
        short = str(op).removeprefix("relax.")
        rule = _RULES.get(short)
        if rule is None:
            raise AotError(f"operator {op} (binding {name}) has no AOT implementation: TVM did not legalize "
                           "it and it is not a Sunway kernel")
        return rule(self, call, name, short)

    # ---- the function -------------------------------------------------------------------------
    def read(self) -> Graph:
        from tvm import relax

        fn = self.mod["main"]
        inputs = []
        types = [_tensor_type(p.ty, f"parameter {p.name}") for p in fn.params]
        floats = [dtype for _, dtype in types if dtype in ("float32", "float64")]
        self.dtype = self.dtype or (floats[0] if floats else "float32")  # the model's dtype: its float inputs'
        for i, (p, (shape, dtype)) in enumerate(zip(fn.params, types)):
            # integer and bool inputs (token ids, masks) are kept in the model's dtype like every tensor
            # (tuner.ir.tir_c), read from their own dtype's file by the program (tuner.aot.host)
            if dtype != self.dtype and dtype not in INPUT_FILE_TYPES:
                raise AotError(f"parameter {p.name} has dtype {dtype}; a model's inputs are of its float dtype "
                               f"({self.dtype}) or one of {', '.join(INPUT_FILE_TYPES)}")
            t = self._new(shape, dtype, "input", p.name, index=i)
            self.env[p] = t
            inputs.append(t)
        if not inputs:
            raise AotError("the main function has no tensor parameters (keep_params_as_input=False, one input)")
        for block in fn.body.blocks:
            for b in block.bindings:
                if not isinstance(b, (relax.VarBinding, relax.MatchCast)):
                    raise AotError(f"binding {type(b).__name__} is not supported")
                self.env[b.var] = self.expr(b.value, b.var.name)
        out = self.expr(fn.body.body, "output")
        outputs = _flatten(out)
        if not outputs:
            raise AotError("the model returns no tensor")
        return Graph(inputs, outputs, self._dead_code_removed(outputs), self.dtype, self._ids, self.functions)

    def _dead_code_removed(self, outputs: list[Tensor]) -> list[Node | Note]:
        """Drop nodes nothing reads (e.g. the zeros_like torch's max_pool2d export leaves behind)."""
        used = {t.root.id for t in outputs}
        keep: list[Node | Note] = []
        for s in reversed(self.steps):
            if isinstance(s, Node) and not any(o.id in used for o in s.outputs):
                keep.append(Note(s.source, s.relax_op, Where.REMOVED))
                continue
            if isinstance(s, Node):
                used.update(t.root.id for t in s.inputs)
            keep.append(s)
        return keep[::-1]


def _flatten(v: Value) -> list[Tensor]:
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, tuple):
        return [t for x in v for t in _flatten(x)]
    return []


def _out(call: Any, name: str) -> tuple[int, ...]:
    return _tensor_type(call.ty, name)[0]


# ---- rules: one per Relax operator (or group) ---------------------------------------------------
def _workload(reader: Callable[[Any], Any], call: Any, name: str, op: str) -> Any:
    """The task extractor's reader of the call (identical workload keys), its refusal an AotError."""
    try:
        return reader(call)
    except InvalidWorkloadError as exc:
        raise AotError(f"{name} ({op}): {exc}") from None


def _conv1d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """conv1d as the conv2d of height 1 it equals (views of its operands and of its output)."""
    w = _workload(conv1d_workload, call, name, op)
    x, weight = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    x4 = r.view(x, (w.n, w.c, 1, w.w), name + ".x")
    w4 = r.view(weight, (weight.shape[0], weight.shape[1], 1, weight.shape[2]), name + ".weight")
    out = _conv2d_kernel(r, x4, w4, w, name, op)
    return r.view(out, _out(call, name), name)


def _conv2d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    w = _workload(conv_workload, call, name, op)
    x, weight = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    out = _conv2d_kernel(r, x, weight, w, name, op)
    if _out(call, name) != out.shape:
        raise AotError(f"{name} (nn.conv2d): output shape {_out(call, name)} != workload's {out.shape}")
    return out


def _conv2d_kernel(r: RelaxReader, x: Tensor, weight: Tensor, w: Any, name: str, op: str) -> Tensor:
    """The conv2d kernel node of workload ``w`` on NCHW ``x`` and OIHW ``weight``."""
    if w.pad_h or w.pad_w:  # the kernel reads a zero-padded input (swDNN style), padded once before it
        from tvm import relax

        pads = [0, 0, 0, 0, w.pad_h, w.pad_h, w.pad_w, w.pad_w]
        x = _synthetic(r, x, lambda v: relax.op.nn.pad(v, pads), name, "nn.pad (conv input)")
        pad_step = r.steps[-1]
        assert isinstance(pad_step, Node), "a conv input's padding is a step of its own"
        pad_step.attrs.update(pad_h=w.pad_h, pad_w=w.pad_w)  # its row-copy form on the MPE (mpe._pad_nchw)
    return r.node("kernel", [x, weight], (w.n, w.k, w.oh, w.ow), name, op, workload=w)


def _transposed(r: RelaxReader, t: Tensor, axes: tuple[int, ...], name: str, why: str) -> Tensor:
    if t.kind == "const":
        assert t.data is not None
        return r.const(np.transpose(t.data, axes), f"{t.name}.T")
    # a runtime transpose undone here (x @ x^T: Relax transposes b, the kernel wants it back): use
    # the original; the first transpose is then unused and removed
    p = r.producer(t.root)
    if p is not None and p.op == "transpose" and t.shape == p.output.shape \
            and all(p.attrs["axes"][a] == i for i, a in enumerate(axes)):
        return p.inputs[0]
    shape = tuple(t.shape[a] for a in axes)
    out = r.node("transpose", [t], shape, name, why, axes=axes)
    step = r.steps[-1]
    assert isinstance(step, Node)
    key = f"transpose:{list(t.shape)}:{list(axes)}"
    if key not in r.expressions:  # a layout copy is an expression operator too (tuned when looked up)
        try:
            r.expressions[key] = transpose_expression(t.shape, axes, t.dtype)
        except InvalidWorkloadError:
            r.expressions[key] = None
    if r.expressions[key] is not None:
        step.attrs["expr_workload"] = r.expressions[key]
    return out


def _matmul(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A matmul of any rank: dense or batch_matmul on views of its operands where that is free
    (``matmul_geometry``), else the legalized matmul as a GEMM-like expression operator."""
    from tvm import relax

    a, b = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    try:
        w = matmul_workload(call)
    except InvalidWorkloadError:  # an operand broadcast across batch dims: one einsum-like PrimFunc
        return _legalized(r, [a, b], lambda vs: relax.op.matmul(vs[0], vs[1]), name, op)
    g = matmul_geometry(a.shape, b.shape)
    out_shape = _out(call, name)
    if g.form is MatmulForm.BATCH:
        # the kernel reads b as [B, N, K]: the operand of b's transpose when b = x.swapaxes(-1, -2)
        bt = _untransposed(r, b, (g.batch, g.n, g.k))
        if bt is None:
            b3 = b if b.shape == (g.batch, g.k, g.n) else r.view(b, (g.batch, g.k, g.n), name + ".b")
            bt = _transposed(r, b3, (0, 2, 1), name, "matmul")
        a3 = a if a.shape == (g.batch, g.m, g.k) else r.view(a, (g.batch, g.m, g.k), name + ".a")
        out = r.node("kernel", [a3, bt], (g.batch, g.m, g.n), name, "matmul", workload=w)
    else:
        a_rows = a if a.shape == (g.m, g.k) else r.view(a, (g.m, g.k), name + ".a")
        b2 = b if b.shape == (g.k, g.n) else r.view(b, (g.k, g.n), name + ".b")
        bt = _transposed(r, b2, (1, 0), name, "matmul")  # dense reads weight[N, K]
        out = r.node("kernel", [a_rows, bt], (g.m, g.n), name, "matmul", workload=w)
    return out if out.shape == out_shape else r.view(out, out_shape, name)


def _untransposed(r: RelaxReader, b: Tensor, shape: tuple[int, ...]) -> Tensor | None:
    """When ``b`` is (a view of) a runtime transpose that only swaps its last two axes -- attention's
    ``k.transpose(-2, -1)`` --, the transpose's own operand viewed as ``shape`` = [B, N, K]: the kernel
    reads it as it is and the copy goes unused (removed as dead code)."""
    root = b.root
    p = r.producer(root)
    if p is None or p.op != "transpose" or root.shape[-2:] != b.shape[-2:]:
        return None
    axes = tuple(p.attrs["axes"])
    rank = len(axes)
    if rank < 2 or axes != (*range(rank - 2), rank - 1, rank - 2):
        return None
    src = p.inputs[0]
    return src if src.shape == shape else r.view(src, shape, f"{src.name}.bt")


def _batch_norm(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    stats = [r.tensor(e, name) for e in call.args[1:5]]
    if any(t.kind != "const" for t in stats):
        raise AotError(f"{name} (nn.batch_norm): gamma/beta/mean/var must be constants (inference form)")
    gamma, beta, mean, var = (t.data.astype(np.float64) for t in stats)  # type: ignore[union-attr]
    a = call.attrs
    if not bool(a.scale):
        gamma = np.ones_like(gamma)
    if not bool(a.center):
        beta = np.zeros_like(beta)
    # inference form folded at compile time: y = x * scale + shift, per channel
    scale = gamma / np.sqrt(var + float(a.epsilon))
    shift = beta - mean * scale
    axis = int(a.axis) % len(x.shape)
    # a per-channel multiply and add: fused into the kernel that made ``x`` as two epilogue stages
    # (tuner.aot.fusion) where their vectors fit its LDM, else run on the CPEs as any broadcast
    # operator (and fused with their neighbours there)
    channel = (len(scale),) + (1,) * (len(x.shape) - 1 - axis)
    out = _scale_shift(r, x, r.const(scale.astype(r.dtype).reshape(channel), name + ".scale"),
                       r.const(shift.astype(r.dtype).reshape(channel), name + ".shift"), name, op)
    return (out, stats[2], stats[3])  # Relax returns (y, moving_mean, moving_var)


def _view(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    r.note(name, op, Where.COMPILE_TIME if x.kind == "const" else Where.VIEW,
           f"{list(x.shape)} -> {list(_out(call, name))}")
    return r.view(x, _out(call, name), name)


# A group's normalisation on the CPEs holds the group in and out in LDM: SW26010's budget (56 KB) less
# room for the kernel's scalars. The reader is target-independent, so the smaller LDM decides.
GROUP_IN_LDM_BYTES = 55 * 1024


def _group_norm(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """group_norm and instance_norm (groups = channels) over the trailing axes of channels-first data,
    as steps that each slice into CPE blocks: a normalisation of the [N * G, 1, C/G * rest] view (over
    each group's contiguous elements; blocks along the groups), viewed back, then the per-channel
    scale and shift as two broadcast operators (blocks along the channels); a group too large for LDM
    in two passes (``_group_norm_in_two_passes``). TVM's legalized form is one PrimFunc with the
    per-channel gamma/beta inside a group's reduction, which does not slice. Any other layout is
    legalized as it is (a generic step)."""
    from tvm import relax

    x, gamma, beta = (r.tensor(a, name) for a in call.args[:3])
    at = call.attrs
    rank = len(x.shape)
    groups = int(at.num_groups) if op == "nn.group_norm" else (x.shape[1] if rank > 1 else 0)
    # TVM's torch import gives instance_norm axes [0, 2, 3]: the same reduction when the batch is 1
    axes = {int(a) % rank for a in at.axes} - ({0} if x.shape[0] == 1 else set())
    if rank < 3 or int(at.channel_axis) % rank != 1 or axes != set(range(2, rank)) or not groups \
            or x.shape[1] % groups:
        return _legalized(r, [x, gamma, beta], lambda vs: relax.Call(call.op, vs, call.attrs), name, op,
                          expression=False)
    n, c = x.shape[0], x.shape[1]
    per_group = c // groups * prod(x.shape[2:])
    eps = float(at.epsilon)
    if 2 * per_group * np.dtype(x.dtype).itemsize > GROUP_IN_LDM_BYTES:
        return _group_norm_in_two_passes(r, x, gamma if bool(at.scale) else None,
                                         beta if bool(at.center) else None, groups, eps, name, op)
    # each group one channel of its own: [N * G, 1, C/G * rest], normalised by a one-channel
    # instance_norm (unit scale, zero shift of one element each): a CPE block holds its group and
    # nothing else
    grouped = r.view(x, (n * groups, 1, per_group), name + ".groups")
    one = r.const(np.ones(1, dtype=x.dtype), name + ".one")
    zero = r.const(np.zeros(1, dtype=x.dtype), name + ".zero")
    normed = _legalized(r, [grouped, one, zero],
                        lambda vs: relax.op.nn.instance_norm(vs[0], vs[1], vs[2], 1, [2], eps),
                        name, op, expression=False)
    y = r.view(normed, x.shape, name + ".normed")
    channel = (c,) + (1,) * (rank - 2)  # gamma/beta broadcast along the channel axis
    return _scale_shift(r, y, r.view(gamma, channel, name + ".gamma") if bool(at.scale) else None,
                        r.view(beta, channel, name + ".beta") if bool(at.center) else None, name, op)


def _group_norm_in_two_passes(r: RelaxReader, x: Tensor, gamma: Tensor | None, beta: Tensor | None,
                              groups: int, eps: float, name: str, op: str) -> Tensor:
    """A group too large to hold in LDM, in two passes over ``x`` that each slice into CPE blocks.

    Pass one: each row's mean and variance, a row being a channel's elements or an equal part of them
    that fits LDM. Between the passes, on [N, G, rows of a group] values (small): the group's mean and
    variance by Chan et al.'s pairwise combination (the rows' variances plus the spread of their means:
    no E[x^2] - E[x]^2 cancellation), then each channel's coefficients ``a = gamma / sqrt(var + eps)``
    and ``b = beta - mean * a``. Pass two: ``x * a + b`` row by row."""
    from tvm import relax

    step = partial(_step, r, name=name, op=op)
    n, c = x.shape[0], x.shape[1]
    spatial = prod(x.shape[2:])
    itemsize = np.dtype(x.dtype).itemsize
    row = _row_length(spatial, itemsize)
    per_channel = spatial // row
    rows = r.view(x, (n * c * per_channel, row), name + ".rows")
    group_mean, group_var = _pooled_moments(r, rows, n * groups, name, op)
    group_mean, group_var = (r.view(t, (n, groups, 1), name + ".moment") for t in (group_mean, group_var))
    eps_t = r.const(np.array(eps, dtype=x.dtype), name + ".eps")
    rstd = step([step([group_var, eps_t], lambda vs: relax.op.add(vs[0], vs[1]))],
                lambda vs: relax.op.rsqrt(vs[0]))
    channels = (groups, c // groups)
    gamma = r.view(gamma, channels, name + ".gamma") if gamma is not None else \
        r.const(np.ones(channels, dtype=x.dtype), name + ".gamma")
    beta = r.view(beta, channels, name + ".beta") if beta is not None else \
        r.const(np.zeros(channels, dtype=x.dtype), name + ".beta")
    scale = step([rstd, gamma], lambda vs: relax.op.multiply(vs[0], vs[1]))  # [N, G, C/G]
    shift = step([beta, step([group_mean, scale], lambda vs: relax.op.multiply(vs[0], vs[1]))],
                 lambda vs: relax.op.subtract(vs[0], vs[1]))
    if per_channel > 1:  # one coefficient per row: each channel's repeated over its rows
        scale, shift = (step([r.view(t, (n * c, 1), name + ".coef")],
                             lambda vs: relax.op.broadcast_to(vs[0], (n * c, per_channel)))
                        for t in (scale, shift))
    y = _scale_shift(r, rows, r.view(scale, (rows.shape[0], 1), name + ".scale"),
                     r.view(shift, (rows.shape[0], 1), name + ".shift"), name, op)
    return r.view(y, x.shape, name + ".normed")


def _step(r: RelaxReader, args: list[Tensor], make: Callable[[list[Any]], Any], name: str, op: str) -> Tensor:
    """One step of an operator the reader writes as several (``_legalized``, never an expression task)."""
    t = _legalized(r, args, make, name, op, expression=False)
    assert isinstance(t, Tensor)
    return t


def _row_length(size: int, itemsize: int) -> int:
    """The longest row a CPE block reduces whole that divides ``size``: a variance's kernel holds its
    row three times in LDM (the row, its centred squares and its output)."""
    return max(d for d in range(1, size + 1) if size % d == 0 and 3 * d * itemsize <= GROUP_IN_LDM_BYTES)


def _pooled_moments(r: RelaxReader, rows: Tensor, groups: int, name: str, op: str) -> tuple[Tensor, Tensor]:
    """Mean and variance ([groups, 1]) of each of ``groups`` runs of consecutive rows of ``rows``
    [R, L]: each row's mean and variance (a CPE block holds a row), then pooled per group by Chan et
    al.'s formula, ``var = mean_k(v_k + (m_k - M)^2)`` (no E[x^2] - E[x]^2 cancellation), on
    [groups, R / groups] values."""
    from tvm import relax

    step = partial(_step, r, name=name, op=op)
    per_group = (groups, rows.shape[0] // groups)
    mean = step([rows], lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    var = step([rows], lambda vs: relax.op.variance(vs[0], [1], keepdims=True))
    row_mean, row_var = r.view(mean, per_group, name + ".row_mean"), r.view(var, per_group, name + ".row_var")
    group_mean = step([row_mean], lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    spread = step([row_mean, group_mean], lambda vs: relax.op.subtract(vs[0], vs[1]))
    spread = step([spread, spread], lambda vs: relax.op.multiply(vs[0], vs[1]))
    group_var = step([step([row_var, spread], lambda vs: relax.op.add(vs[0], vs[1]))],
                     lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    return group_mean, group_var


def _gather_mode(call: Any) -> str | None:
    """A ``take`` along axis 0 (an embedding lookup): its out-of-range mode; None for another axis."""
    if call is None or getattr(call.attrs, "axis", None) is None or int(call.attrs.axis) != 0:
        return None
    return str(call.attrs.mode)


def _long_variance(r: RelaxReader, call: Any, x: Tensor, out: tuple[int, ...], name: str, op: str
                   ) -> Tensor | None:
    """A variance over trailing axes too long for a CPE block to hold (an ONNX GroupNormalization's
    [N, G, C/G * H * W]) as rows that fit, pooled (``_pooled_moments``); None for any other one."""
    rank = len(x.shape)
    if call is None or len(call.args) != 1:
        return None
    axes = sorted({int(a) % rank for a in call.attrs.axis}) if call.attrs.axis is not None else list(range(rank))
    reduced = prod(x.shape[axes[0]:]) if axes else 1
    itemsize = np.dtype(x.dtype).itemsize
    if not axes or axes != list(range(axes[0], rank)) or 3 * reduced * itemsize <= GROUP_IN_LDM_BYTES:
        return None
    kept = prod(x.shape[:axes[0]])
    row = _row_length(reduced, itemsize)
    rows = r.view(x, (kept * reduced // row, row), name + ".rows")
    _, var = _pooled_moments(r, rows, kept, name, op)
    return r.view(var, out, name + ".var")


def _scale_shift(r: RelaxReader, y: Tensor, scale: Tensor | None, shift: Tensor | None, name: str,
                 op: str) -> Tensor:
    """``y * scale + shift`` as two broadcast operators (each slices into CPE blocks; None: left out),
    ``scale`` and ``shift`` already shaped to broadcast along the channel axis."""
    from tvm import relax

    if scale is not None:
        y = _legalized(r, [y, scale], lambda vs: relax.op.multiply(vs[0], vs[1]), name, op, expression=False)
    if shift is not None:
        y = _legalized(r, [y, shift], lambda vs: relax.op.add(vs[0], vs[1]), name, op, expression=False)
    return y


def _shape_of(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A tensor's shape as a value (ONNX Expand/Reshape compute their target shapes from it): static, so
    known at compile time."""
    x = r.tensor(call.args[0], name)
    r.note(name, op, Where.COMPILE_TIME, f"shape {list(x.shape)}")
    return tuple(x.shape)


def _tensor_to_shape(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A shape computed as a tensor (ONNX Reshape's target from Shape/Gather/Concat): it must be a
    compile-time constant, since the AOT compiler needs static shapes."""
    x = r.tensor(call.args[0], name)
    if x.kind != "const" or x.data is None:
        raise AotError(f"{name} ({op}): a shape computed at run time; the AOT compiler needs static shapes")
    r.note(name, op, Where.COMPILE_TIME, f"shape {x.data.astype(int).tolist()}")
    return tuple(int(v) for v in x.data.reshape(-1))


def _permute(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    axes_attr = call.attrs.axes
    rank = len(x.shape)
    axes = tuple(reversed(range(rank))) if axes_attr is None else tuple(int(i) % rank for i in axes_attr)
    if x.kind == "const":
        r.note(name, op, Where.COMPILE_TIME, "constant transposed")
    return _transposed(r, x, axes, name, op)


def _call_tir(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A legalized operator: a generic MPE node running the PrimFunc's C, or a compile-time fold."""
    from tvm import relax


    gvar = call.args[0]
    relax_op = r.ops.get(name, gvar.name_hint)
    if relax_op.startswith("call_tir"):  # a PrimFunc called as it is (a derived gradient, a user's operator)
        relax_op = operator_name(gvar.name_hint)
    func = r.mod[gvar]
    args = r.expr(call.args[1], name)
    args = args if isinstance(args, tuple) else (args,)
    if not all(isinstance(a, Tensor) for a in args):
        raise AotError(f"{name} ({relax_op}): call_tir with non-tensor operands")
    out_info = call.ty_args[0]
    infos = list(out_info.fields) if isinstance(out_info, relax.TupleType) else [out_info]
    outs = [_tensor_type(i, name) for i in infos]
    if len(call.args) > 2:
        raise AotError(f"{name} ({relax_op}): call_tir with symbolic shape variables is not supported")
    if all(a.kind == "const" for a in args):
        r.note(name, relax_op, Where.COMPILE_TIME, "constant operands folded")
        values = llvm.run(func, [a.data for a in args], outs)
        consts = [r.const(v, name if len(values) == 1 else f"{name}.{i}") for i, v in enumerate(values)]
        return consts[0] if len(consts) == 1 else tuple(consts)
    if relax_op == "variance" and len(args) == 1 and len(outs) == 1:
        pooled = _long_variance(r, r.calls.get(name), args[0], outs[0][0], name, relax_op)
        if pooled is not None:
            return pooled
    one = _one_index(relax_op, r.calls.get(name), list(args), outs)
    if one is not None:
        return _take_one(r, args[0], *one, outs[0][0], name)
    out = _generic_node(r, func, list(args), outs, name, relax_op, r.calls.get(name), f"tir_{gvar.name_hint}")
    step = r.steps[-1]
    if isinstance(step, Node) and step.op == "tir" and relax_op in REGION_OPS and step.output is _flatten(out)[0]:
        spec = _region_spec(relax_op, r.calls.get(name), len(step.inputs[0].shape))
        if spec is not None:  # a region copy: a CPE layout kernel of its own (tuner.aot.cpe_region)
            step.attrs["region"] = spec
    if isinstance(step, Node) and step.op == "tir" and relax_op == "image.resize2d" and step.output is out \
            and len(step.inputs) == 1:
        resize = _resize_spec(r.calls.get(name), len(step.inputs[0].shape))
        if resize is not None:  # an NCHW resize: a CPE kernel of its own (tuner.aot.cpe_resize)
            step.attrs["resize"] = resize
    if isinstance(step, Node) and step.op == "tir" and relax_op == "take" and step.output is out \
            and len(step.inputs) == 2:
        mode = _gather_mode(r.calls.get(name))
        if mode is not None:  # a gather of table rows: a CPE kernel of its own (tuner.aot.cpe_gather)
            step.attrs["gather"] = mode
    if len(outs) == 1 and isinstance(step, Node) and step.op == "tir" and step.output is out:
        wl = _expression_of(r, func, str(gvar.name_hint))
        if wl is not None:  # compiled as a tuned kernel when the lookup has a config (tuner.aot.kernels)
            step.attrs["expr_workload"] = wl
    return out


def _one_index(op: str, call: Any, args: list[Tensor], outs: list[tuple[tuple[int, ...], str]]
               ) -> tuple[int, int] | None:
    """(axis, index) of a ``take`` of one constant index (attention's ``qkv[0]``), else None."""
    if op != "take" or call is None or len(args) != 2 or len(outs) != 1:
        return None
    x, idx = args
    if idx.kind != "const" or idx.data is None or idx.data.size != 1 or not x.shape:
        return None
    axis = int(call.attrs.axis) % len(x.shape) if call.attrs.axis is not None else None
    if axis is None or prod(outs[0][0]) * x.shape[axis] != prod(x.shape):
        return None
    return axis, int(idx.data.reshape(-1)[0]) % x.shape[axis]


def _take_one(r: RelaxReader, x: Tensor, axis: int, i: int, out_shape: tuple[int, ...], name: str) -> Value:
    """A take of one index as the slice [i, i + 1) along ``axis``, viewed as the take's result: a
    region copy on the CPEs (tuner.aot.cpe_region), where TVM's take reads an int64 index operand the
    CPE cutter does not slice."""
    from tvm import relax

    sliced = _legalized(r, [x], lambda vs: relax.op.strided_slice(vs[0], [axis], [i], [i + 1]), name, "take",
                        expression=False)
    step = r.steps[-1]
    if isinstance(step, Node) and step.op == "tir" and step.output is sliced:
        step.attrs["region"] = ("strided_slice", (axis,), (i,), (i + 1,), (1,))
    return r.view(_flatten(sliced)[0], out_shape, name)


# copies of rectangular regions between tensors (tuner.aot.cpe_region plans their CPE kernel)
REGION_OPS = ("concat", "split", "strided_slice", "tile", "slice_scatter")


def _region_spec(op: str, call: Any, rank: int) -> tuple[Any, ...] | None:
    """The static parameters of a region-copy operator, as plain Python: ("concat", axis),
    ("split", axis), ("strided_slice", axes, begin, end, strides), ("tile",) (its repeats follow from
    the shapes), ("slice_scatter", axis, start, end, step); None when the Relax call is unknown or its
    parameters are not static integers."""
    if call is None or rank == 0:
        return None
    try:
        if op in ("concat", "split"):
            axis = call.attrs.axis
            return None if axis is None else (op, int(axis) % rank)
        if op == "strided_slice":
            axes, begin, end = (_ints(call.args[i].fields) for i in (1, 2, 3))
            strides = _ints(call.args[4].fields) if len(call.args) > 4 else (1,) * len(axes)
            return (op, tuple(a % rank for a in axes), begin, end, strides)
        if op == "tile":
            return (op,)
        if op == "slice_scatter":  # (input, src, start, end, step), the axis an attribute
            first, last, step = (int(call.args[i].value) for i in (2, 3, 4))
            return (op, int(call.attrs.axis) % rank, first, last, step)
    except (AttributeError, TypeError, ValueError):  # a symbolic begin/end/stride: the MPE copy runs
        return None
    return None


def _resize_spec(call: Any, rank: int) -> tuple[str, str, str] | None:
    """The static parameters of an ``image.resize2d`` of NCHW data, as plain strings: (method,
    coordinate transformation mode, rounding method); None when the Relax call is unknown or the
    layout is not NCHW (tuner.aot.cpe_resize decides which of them it runs)."""
    if call is None or rank != 4:
        return None
    try:
        at = call.attrs
        if str(at.layout) != "NCHW":
            return None
        return (str(at.method), str(at.coordinate_transformation_mode), str(at.rounding_method))
    except AttributeError:
        return None


def _expression_of(r: RelaxReader, func: Any, fname: str, op_name: str = "") -> Any:
    """The expression operator task extraction tunes for this PrimFunc (tuner.bridge.extract: GEMM-like
    stages and memory-bound single-stage operators), or None. ``op_name`` is the PrimFunc's name as
    LegalizeOps gives it (part of the workload's key), when ``fname`` is not that name."""
    if fname not in r.expressions:
        try:
            r.expressions[fname] = expression_workload(func, op_name or fname, Routing.MEMORY_BOUND)
        except InvalidWorkloadError:
            r.expressions[fname] = None
    return r.expressions[fname]


def _generic_node(r: RelaxReader, func: Any, args: list[Tensor], outs: list[tuple[tuple[int, ...], str]],
                  name: str, relax_op: str, relax_call: Any, fname: str) -> Value:
    """A node running a legalized PrimFunc (printed once per function name), or a view when the
    function only copies its operand (e.g. a broadcast_to that does not broadcast)."""
    from tuner.ir.cprint.dtypes import ctype
    from tuner.ir.cprint.epilogue import scalar_epilogue
    from tuner.ir.cprint.prim_func import print_prim_func

    if len(args) == 1 and len(outs) == 1 and outs[0][1] == args[0].dtype and prod(outs[0][0]) == args[0].size:
        copy = scalar_epilogue(func, fname, ctype(r.dtype))
        if copy is not None and copy[0] == [f"const {ctype(r.dtype)} _e0 = v;"]:
            r.note(name, relax_op, Where.VIEW, f"a copy: {list(args[0].shape)} -> {list(outs[0][0])}")
            return r.view(args[0], outs[0][0], name)
    if fname not in r.functions:
        try:
            r.functions[fname] = print_prim_func(func, fname, ctype(r.dtype))
        except AotError as exc:
            raise AotError(f"operator {relax_op} (binding {name}): {exc}") from None
    results = [r._new(shape, dtype, "temp", name if i == 0 else f"{name}.{i}") for i, (shape, dtype) in enumerate(outs)]
    r.steps.append(Node("tir", list(args), results[0], {"function": fname, "extra_outputs": results[1:],
                                                        "prim_func": func, "relax_call": relax_call},
                        relax_op, name))
    return results[0] if len(results) == 1 else tuple(results)


def _synthetic(r: RelaxReader, x: Tensor, make_call: Callable[[Any], Any], name: str, relax_op: str) -> Value:
    """A step the compiler adds itself (e.g. zero-padding a conv input), as a Relax operator on one
    operand legalized like any other: plain C on the MPE or a CPE kernel (tuner.aot.cpe_ops)."""
    return _legalized(r, [x], lambda vs: make_call(vs[0]), name, relax_op, expression=False)


def _legalized(r: RelaxReader, args: list[Tensor], make_call: Callable[[list[Any]], Any], name: str,
               relax_op: str, expression: bool = True) -> Value:
    """A Relax operator on ``args`` legalized on its own, as TVM lowers it: a generic node, carrying
    the expression operator task extraction tunes for its PrimFunc when ``expression`` and it is one."""
    import tvm_ffi
    from tvm import relax

    vs = [relax.Var(f"x{i}", relax.TensorType(t.shape, t.dtype)) for i, t in enumerate(args)]
    call = make_call(vs)
    bb = relax.BlockBuilder()
    with bb.function("main", vs):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(call))
        bb.emit_func_output(out)
    mod = legalize(bb.get(), keep=())
    (ct,) = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.call_tir"]
    func = mod[ct.args[0]]
    info = ct.ty_args[0]
    fname = f"tir_{ct.args[0].name_hint}_{tvm_ffi.structural_hash(func) & 0xffffffff:08x}"
    result = _generic_node(r, func, args, [_tensor_type(info, name)], name, relax_op, call, fname)
    step = r.steps[-1]
    if expression and isinstance(step, Node) and step.op == "tir" and step.output is result:
        wl = _expression_of(r, func, fname, str(ct.args[0].name_hint))
        if wl is not None:
            step.attrs["expr_workload"] = wl
    return result


def _call_packed(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """The one packed function a compiled program runs: the ranks' mean of a tensor (MPI_Allreduce)."""
    fn = str(getattr(call.args[0], "global_symbol", call.args[0]))
    if fn != ALLREDUCE_MEAN:
        raise AotError(f"operator relax.{op} (binding {name}) has no AOT implementation: {fn} is an extern "
                       f"function, and the only one a compiled program runs is {ALLREDUCE_MEAN}")
    args = r.expr(call.args[1], name)
    x = args[0] if isinstance(args, tuple) else args
    if not isinstance(x, Tensor):
        raise AotError(f"{name} ({op}): {fn} takes one tensor")
    return r.node("allreduce", [x], x.shape, name, "allreduce (MPI)")


_RULES: dict[str, Callable[[RelaxReader, Any, str, str], Value]] = {
    "nn.conv2d": _conv2d, "nn.conv1d": _conv1d, "matmul": _matmul, "nn.batch_norm": _batch_norm,
    "permute_dims": _permute, "call_tir": _call_tir, "shape_of": _shape_of, "tensor_to_shape": _tensor_to_shape,
    "nn.group_norm": _group_norm, "nn.instance_norm": _group_norm,
    "call_dps_packed": _call_packed, **{v: _view for v in _VIEWS},
}


def legalize(mod: Any, keep: Sequence[str] | None = None) -> Any:
    """Every operator but ``keep`` (by default ``KEPT_OPS``, the ones this reader reads itself, looked
    up at call time) lowered by TVM to ``call_tir`` of a PrimFunc."""
    import tvm
    from tvm import relax

    from tuner.ir.legalizations import register

    register()  # the operators this TVM does not legalize itself (cumsum)
    with tvm.transform.PassContext(opt_level=3):
        kept = KEPT_OPS if keep is None else keep
        return relax.transform.LegalizeOps(skip_ops=[f"relax.{op}" for op in kept])(mod)


def source_calls(mod: Any) -> dict[str, Any]:
    """Binding name -> Relax operator call of the module before legalization (for the report, and
    to legalize an operator again on a slice of its operands: tuner.aot.cpe_ops)."""
    from tvm import relax

    out: dict[str, Any] = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name"):
                out[b.var.name] = b.value
    return out


def reader_form(mod: Any) -> Any:
    """``mod`` as the reader reads it: reductions split so the CPEs can run them, every binding name
    unique (task extraction walks the same bindings, so names match the graph's)."""
    from tuner.ir.names import unique_binding_names
    from tuner.ir.split_reductions import split_leading_reductions

    return unique_binding_names(split_leading_reductions(mod))


def read_relax(mod: Any) -> Graph:
    """The Graph of a Relax IRModule's main function (legalized here)."""
    mod = reader_form(mod)
    return RelaxReader(legalize(mod), source_calls(mod)).read()
