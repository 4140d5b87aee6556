"""Relax main function (before legalization, params bound as constants) -> tuner.aot.graph.Graph.

Bindings are read in order. conv2d and matmul become "kernel" nodes with the same workloads task
extraction produces (tuner.bridge.extract), so tuning-log keys match; their operands are brought to
the layouts the slave kernels read (constant weights transposed to [N, K] here, at compile time).
Everything else becomes an MPE node, a view (reshape/flatten: same storage) or a compile-time fold
(constant operands, batch_norm statistics). An operator without a rule is an AotError naming it.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from tuner.aot.graph import AotError, Graph, Node, Note, Tensor
from tuner.errors import InvalidWorkloadError

Value = Any  # Tensor | tuple[Value, ...] | int | float

_BINARY = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "power"}
_UNARY = {"nn.relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "sqrt": "sqrt",
          "rsqrt": "rsqrt", "negative": "negative", "abs": "abs", "nn.silu": "silu", "nn.gelu": "gelu",
          "clip": "clip"}
_REDUCE = {"mean", "sum", "max", "min"}
_VIEWS = {"reshape", "flatten", "squeeze", "expand_dims"}
_NUMPY_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power}


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

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        self.env: dict[Any, Value] = {}
        self.consts: dict[Any, Tensor] = {}  # Relax constant object -> its tensor (one storage each)
        self.steps: list[Node | Note] = []
        self.dtype = ""
        self._ids = 0

    # ---- tensors ------------------------------------------------------------------------------
    def _new(self, shape: tuple[int, ...], dtype: str, kind: str, name: str, **kw: Any) -> Tensor:
        self._ids += 1
        return Tensor(self._ids, tuple(shape), dtype, kind, name, **kw)

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

    def note(self, source: str, relax_op: str, where: str, detail: str = "") -> None:
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
            for group, fn in _GROUP_RULES:
                if short in group:
                    rule = fn
                    break
        if rule is None:
            raise AotError(f"operator {op} (binding {name}) has no AOT implementation: it can be neither "
                           "a Sunway kernel nor MPE code yet")
        return rule(self, call, name, short)

    # ---- the function -------------------------------------------------------------------------
    def read(self) -> Graph:
        from tvm import relax

        fn = self.mod["main"]
        inputs = []
        for i, p in enumerate(fn.params):
            shape, dtype = _tensor_type(p.ty, f"parameter {p.name}")
            if not self.dtype:
                self.dtype = dtype
            if dtype not in ("float32", "float64"):
                raise AotError(f"parameter {p.name} has dtype {dtype}; only float32/float64 models are supported")
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
        return Graph(inputs, outputs, self._dead_code_removed(outputs), self.dtype, self._ids)

    def _dead_code_removed(self, outputs: list[Tensor]) -> list[Node | Note]:
        """Drop nodes nothing reads (e.g. the zeros_like torch's max_pool2d export leaves behind)."""
        used = {t.root.id for t in outputs}
        keep: list[Node | Note] = []
        for s in reversed(self.steps):
            if isinstance(s, Node) and s.output.id not in used:
                keep.append(Note(s.source, s.relax_op, "removed (unused)"))
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
def _conv2d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    from tuner.bridge.extract import _conv  # the task extractor's reader: identical workload keys

    try:
        w = _conv(call)
    except InvalidWorkloadError as exc:
        raise AotError(f"{name} (nn.conv2d): {exc}") from None
    x, weight = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    if w.pad_h or w.pad_w:  # the kernel reads a zero-padded input (swDNN style): the MPE pads once
        x = r.node("pad_nchw", [x], (w.n, w.c, w.h + 2 * w.pad_h, w.w + 2 * w.pad_w), name, "nn.conv2d",
                   pad_h=w.pad_h, pad_w=w.pad_w)
    out = r.node("kernel", [x, weight], (w.n, w.k, w.oh, w.ow), name, "nn.conv2d", workload=w)
    if _out(call, name) != out.shape:
        raise AotError(f"{name} (nn.conv2d): output shape {_out(call, name)} != workload's {out.shape}")
    return out


def _transposed(r: RelaxReader, t: Tensor, axes: tuple[int, ...], name: str, why: str) -> Tensor:
    if t.kind == "const":
        assert t.data is not None
        return r.const(np.transpose(t.data, axes), f"{t.name}.T")
    # a runtime transpose undone here (x @ x^T: Relax transposes b, the kernel wants it back): use
    # the original; the first transpose is then unused and removed
    p = next((s for s in reversed(r.steps) if isinstance(s, Node) and s.output is t.root), None)
    if p is not None and p.op == "transpose" and t.shape == p.output.shape \
            and all(p.attrs["axes"][a] == i for i, a in enumerate(axes)):
        return p.inputs[0]
    shape = tuple(t.shape[a] for a in axes)
    return r.node("transpose", [t], shape, name, why, axes=axes)


def _matmul(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    from tuner.bridge.extract import _matmul as read_matmul
    from tuner.workloads import BatchMatmul

    try:
        w = read_matmul(call)
    except InvalidWorkloadError as exc:
        raise AotError(f"{name} (matmul): {exc}") from None
    a, b = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    out_shape = _out(call, name)
    if isinstance(w, BatchMatmul):
        bt = _transposed(r, b, (0, 2, 1), name, "matmul")  # the kernel reads b as [B, N, K]
        return r.node("kernel", [a, bt], (w.b, w.m, w.n), name, "matmul", workload=w)
    a2 = a if len(a.shape) == 2 else r.view(a, (w.m, w.k), name + ".a")
    bt = _transposed(r, b, (1, 0), name, "matmul")  # dense reads weight[N, K]
    out = r.node("kernel", [a2, bt], (w.m, w.n), name, "matmul", workload=w)
    return out if out.shape == out_shape else r.view(out, out_shape, name)


def _binary(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    a, b = r.tensor(call.args[0], name), r.tensor(call.args[1], name)
    shape = _out(call, name)
    if a.kind == "const" and b.kind == "const":
        r.note(name, op, "compile time", "constant operands folded")
        return r.const(_NUMPY_BINARY[op](a.data, b.data).astype(r.dtype), name)
    return r.node("binary", [a, b], shape, name, op, fn=op)


def _unary(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    attrs: dict[str, Any] = {"fn": _UNARY[op]}
    if op == "clip":
        attrs.update(lo=float(r.expr(call.args[1], name)), hi=float(r.expr(call.args[2], name)))
    if op == "nn.gelu" and getattr(call.attrs, "approximate", "none") not in (None, "none"):
        raise AotError(f"{name} (nn.gelu): the tanh approximation is not supported")
    return r.node("unary", [x], _out(call, name), name, op, **attrs)


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
    out = r.node("channel_affine", [x, r.const(scale.astype(r.dtype), name + ".scale"),
                                    r.const(shift.astype(r.dtype), name + ".shift")],
                 x.shape, name, op, axis=axis)
    return (out, stats[2], stats[3])  # Relax returns (y, moving_mean, moving_var)


def _pool2d(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    a = call.attrs
    if str(a.layout) != "NCHW" or str(getattr(a, "out_layout", "NCHW")) != "NCHW":
        raise AotError(f"{name} ({op}): layout {a.layout} is not NCHW")
    x = r.tensor(call.args[0], name)
    pad = _ints(a.padding)
    if len(pad) == 2:
        pad = pad + pad
    return r.node("pool2d", [x], _out(call, name), name, op, mode="max" if op == "nn.max_pool2d" else "avg",
                  pool=_ints(a.pool_size), strides=_ints(a.strides), dilation=_ints(a.dilation), padding=pad,
                  count_include_pad=bool(getattr(a, "count_include_pad", False)))


def _adaptive_pool(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    a = call.attrs
    if str(a.layout) != "NCHW":
        raise AotError(f"{name} ({op}): layout {a.layout} is not NCHW")
    return r.node("adaptive_avg_pool2d", [r.tensor(call.args[0], name)], _out(call, name), name, op)


def _reduce(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    axes_attr = call.attrs.axis
    rank = len(x.shape)
    axes = tuple(range(rank)) if axes_attr is None else tuple(sorted(int(i) % rank for i in axes_attr))
    return r.node("reduce", [x], _out(call, name), name, op, fn=op, axes=axes)


def _view(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    r.note(name, op, "compile time" if x.kind == "const" else "view (no-op)",
           f"{list(x.shape)} -> {list(_out(call, name))}")
    return r.view(x, _out(call, name), name)


def _broadcast_to(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    shape = _out(call, name)
    if x.kind == "const":
        r.note(name, op, "compile time")
        return r.const(np.broadcast_to(x.data, shape), name)
    if shape == x.shape:
        r.note(name, op, "view (no-op)", "same shape")
        return r.view(x, shape, name)
    return r.node("broadcast_to", [x], shape, name, op)


def _permute(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    axes_attr = call.attrs.axes
    rank = len(x.shape)
    axes = tuple(reversed(range(rank))) if axes_attr is None else tuple(int(i) % rank for i in axes_attr)
    if x.kind == "const":
        r.note(name, op, "compile time", "constant transposed")
    return _transposed(r, x, axes, name, op)


def _astype(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    dtype = str(call.attrs.dtype)
    if x.kind == "const":
        r.note(name, op, "compile time")
        assert x.data is not None
        return r.const(x.data.astype(dtype), name)
    if dtype != x.dtype:
        raise AotError(f"{name} (astype): casting {x.dtype} to {dtype} at run time is not supported")
    return _view(r, call, name, op)


def _fill(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    value = 1.0 if op.startswith("ones") else 0.0
    shape, dtype = _tensor_type(call.ty, name)
    if dtype != r.dtype:
        raise AotError(f"{name} ({op}): dtype {dtype} differs from the model's {r.dtype}")
    return r.node("fill", [], shape, name, op, value=value)


def _softmax(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    x = r.tensor(call.args[0], name)
    return r.node("softmax", [x], x.shape, name, op, axis=int(call.attrs.axis) % len(x.shape))


def _concat(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    parts = r.expr(call.args[0], name)
    if not isinstance(parts, tuple) or not all(isinstance(p, Tensor) for p in parts):
        raise AotError(f"{name} (concat): expected a tuple of tensors")
    shape = _out(call, name)
    return r.node("concat", list(parts), shape, name, op, axis=int(call.attrs.axis) % len(shape))


_RULES: dict[str, Callable[[RelaxReader, Any, str, str], Value]] = {
    "nn.conv2d": _conv2d, "matmul": _matmul, "nn.batch_norm": _batch_norm,
    "nn.max_pool2d": _pool2d, "nn.avg_pool2d": _pool2d, "nn.adaptive_avg_pool2d": _adaptive_pool,
    "permute_dims": _permute, "broadcast_to": _broadcast_to, "astype": _astype, "nn.softmax": _softmax,
    "concat": _concat,
}
_GROUP_RULES: list[tuple[set[str], Callable[[RelaxReader, Any, str, str], Value]]] = [
    (_BINARY, _binary), (set(_UNARY), _unary), (_REDUCE, _reduce), (_VIEWS, _view),
    ({"zeros_like", "ones_like", "zeros", "ones"}, _fill),
]


def read_relax(mod: Any) -> Graph:
    """The Graph of a Relax IRModule's main function."""
    return RelaxReader(mod).read()
