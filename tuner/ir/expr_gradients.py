"""An expression operator inside a Relax model, with its gradient derived from the expression.

A user's operator (a function returning te tensors, inputs first) joins a Relax function as
``call_tir_with_grad`` (the PrimFunc form of ``call_te_with_grad``): the forward is the operator's own
PrimFunc, and its ``te_grad_name`` names a hook that ``relax.transform.Gradient`` calls for the
backward: it emits the gradient program derived by tuner/expr/autodiff.py (every
input's gradient) as one ``call_tir`` per stage: each derived operator a one-stage function of its own
(a tuning task, as the compiler reads expressions), each memory pass (padding, compact copy,
assembly) too; the pass hands each input its gradient. Three memory passes are Relax operators instead,
so the CPE cutter runs them where a call_tir of their select-and-clamp bodies would stay on the MPE:
a padding is ``nn.pad``, an assembly that only interleaves its pieces (a strided conv's data
gradient, split by stride residue) is a concat, a transpose and two reshapes, and one that only views
its piece in the input's shape (a gradient derived in a mixed-radix view: a grouped shift's) is a
reshape, a view.

TVM 0.27 never lowers ``call_tir_with_grad`` itself (the forward function keeps it and the VM cannot
emit it): :func:`strip_with_grad` rewrites each one into the plain ``call_tir`` it stands for, once
the gradient has been taken. A forward of several stages that is no expression operator as a whole
(gated_dense: two reductions and a gate) becomes one ``call_tir`` per stage instead, named as the
gradient program names its recomputed forward stages (``<name>_pass_<stage>``):
each stage is then a tuning task the CPEs run (the same tasks as the backward's recomputed stages),
where the whole function would run as plain C on the MPE.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import tvm
import tvm_ffi
from tvm import relax, te
from tvm.relax.op.base import register_gradient

from tuner.expr.adjoint_ops import INTERLEAVE_ATTR, INTERLEAVE_SOURCES_ATTR, PAD_ATTR, PAD_MODE_ATTR, RESHAPE_ATTR
from tuner.expr.autodiff import differentiate, program_stages
from tuner.expr.layers import conv2d
from tuner.expr.workload import script_hash

HOOK_PREFIX = "tvm.relax.te_grad._register."
# te_grad_name -> (the operator's tensors, inputs then output; its name): what strip_with_grad splits
_FORWARDS: dict[str, tuple[list[Any], str]] = {}


def _stage_name(name: str, stage: Any) -> str:
    """The function name of a forward stage of operator ``name`` run on its own (a memory pass of its
    gradient program, or a stage of a forward split by strip_with_grad): both use this one name, so the
    same stage is the same function and the step's CSE computes it once."""
    return f"{name}_pass_{stage.op.name}"


def _tensor_type(t: Any) -> Any:
    return relax.TensorType([int(s) for s in t.shape], str(t.dtype))


def emit_gradient(ctx: Any, tensors: Sequence[Any], name: str, inputs: Sequence[Any], head: Any) -> list[Any]:
    """Emit the gradient program of the operator ``tensors`` (inputs, then output) at the Relax values
    ``inputs`` and output gradient ``head``: one call_tir per stage. Returns each input's gradient."""
    gradient = differentiate(tensors, name)
    values = {x.op: arg for x, arg in zip(gradient.inputs, inputs)}
    values[gradient.head.op] = head
    operators = {op.name for op in gradient.operators}
    names: list[str] = []
    for t, sources, standalone in program_stages(list(gradient.outputs.values())):
        # a derived operator keeps its name; the memory passes around them (padding, compact copies,
        # assembly, a recomputed forward stage) are named ``<name>_pass_<stage>``, numbered when repeated
        base = str(t.op.name) if str(t.op.name) in operators else _stage_name(name, t)
        names.append(base if base not in names else f"{base}_{sum(n.startswith(base) for n in names)}")
        widths = t.op.attrs.get(PAD_ATTR) if t.op.attrs is not None else None
        if widths is not None and len(sources) == 1:  # a padding: Relax's nn.pad, which the CPEs run
            values[t.op] = ctx.emit(relax.op.nn.pad(values[sources[0].op], [int(v) for v in widths],
                                                    str(t.op.attrs[PAD_MODE_ATTR]), 0.0))
            continue
        if t.op.attrs is not None and RESHAPE_ATTR in t.op.attrs and len(sources) == 1:
            # a gradient derived in a mixed-radix view of its input (a grouped shift's channel as group
            # and place): the same elements in the input's shape, a view and no pass over memory
            values[t.op] = ctx.emit(relax.op.reshape(values[sources[0].op], [int(x) for x in t.shape]))
            continue
        interleaved = _interleave(ctx, t, sources, values)
        if interleaved is not None:
            values[t.op] = interleaved
            continue
        gv = ctx.add_func(te.create_prim_func(standalone).with_attr("global_symbol", names[-1]), names[-1])
        values[t.op] = ctx.emit(relax.call_tir(gv, [values[x.op] for x in sources], _tensor_type(t)))
    return [values[t.op] for t in gradient.outputs.values()]


def _interleave(ctx: Any, t: Any, sources: list[Any], values: dict[Any, Any]) -> Any:
    """An assembly that interleaves its pieces (tuner.expr.adjoint_ops marks it) as Relax operators the
    CPEs run -- concatenate the pieces, view as [steps..., part...], transpose each step next to its part,
    view as the target -- or None for any other stage."""
    steps = t.op.attrs.get(INTERLEAVE_ATTR) if t.op.attrs is not None else None
    if steps is None:
        return None
    by_name = {str(src.op.name): src for src in sources}
    names = [str(n) for n in t.op.attrs[INTERLEAVE_SOURCES_ATTR]]
    if len(by_name) != len(sources) or sorted(by_name) != sorted(names):
        return None
    steps = [int(x) for x in steps]
    shape = [int(x) for x in t.shape]
    part = [n // st for n, st in zip(shape, steps)]
    strided = [d for d, st in enumerate(steps) if st > 1]
    # concat along axis 0 is the stack, piece-major (a region copy the CPEs run: tuner.aot.cpe_region)
    stacked = ctx.emit(relax.op.concat([values[by_name[n].op] for n in names], axis=0))
    split = ctx.emit(relax.op.reshape(stacked, [steps[d] for d in strided] + part))
    rank = len(shape)
    order = []
    for d in range(rank):
        order.append(len(strided) + d)
        if d in strided:
            order.append(strided.index(d))
    moved = ctx.emit(relax.op.permute_dims(split, order))
    return ctx.emit(relax.op.reshape(moved, shape))


def emit_expression(bb: Any, tensors: Sequence[Any], args: Sequence[Any], name: str | None = None) -> Any:
    """Emit the operator ``tensors`` (inputs, then output) applied to the Relax values ``args`` into the
    function ``bb`` is building; its gradient is the derived one. Returns the output's Relax value."""
    tensors = list(tensors)
    name = name or str(tensors[-1].op.name)
    forward = te.create_prim_func(tensors).with_attr("global_symbol", name)
    grad_name = f"swtune_{name}_{script_hash(forward.script())}"

    def hook(orig_var: Any, call: Any, output_grad: Any, ctx: Any) -> Any:
        return ctx.emit(relax.Tuple(emit_gradient(ctx, tensors, name, list(call.args[1]), output_grad)))

    tvm_ffi.register_global_func(HOOK_PREFIX + grad_name, hook, override=True)
    _FORWARDS[grad_name] = (tensors, name)
    gv = bb.add_func(forward, name)
    return bb.emit(relax.op.call_tir_with_grad(gv, list(args), _tensor_type(tensors[-1]), te_grad_name=grad_name))


def derived_conv2d_grad(orig_var: Any, call: Any, dy: Any, ctx: Any) -> list[Any]:
    """``nn.conv2d``'s gradient from its expression (tuner/expr/layers.py): the data gradient split by
    stride residue with no multiply-add on an inserted zero, the weight gradient at the kernel's size.
    NCHW data and OIHW weights, as TVM's own gradient."""
    attrs = call.attrs
    if (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout)) != ("NCHW", "OIHW", "NCHW"):
        raise NotImplementedError("the derived conv2d gradient is implemented for NCHW data and OIHW weights")
    data, weight = call.args
    shape = lambda e: tuple(int(d) for d in e.ty.shape)  # noqa: E731
    tensors = conv2d(shape(data), shape(weight), tuple(int(x) for x in attrs.strides),  # type: ignore[arg-type]
                     tuple(int(x) for x in attrs.padding), tuple(int(x) for x in attrs.dilation),  # type: ignore
                     int(attrs.groups), str(data.ty.dtype))
    layer = "conv2d_" + "x".join(str(d) for d in (*shape(data), *shape(weight), *attrs.strides, *attrs.padding,
                                                   *attrs.dilation, attrs.groups))
    return emit_gradient(ctx, tensors, layer, [data, weight], dy)


DERIVED_LEVEL = 12  # above TVM's (10) and swtune's Relax-operator gradients (11)


def register_derived() -> None:
    """Route ``nn.conv2d``'s gradient to the derived operators (level 12): backward graphs then hold
    one-stage expression functions (tuning tasks) instead of conv2d_transpose and a cropped conv."""
    register_gradient("relax.nn.conv2d", derived_conv2d_grad, level=DERIVED_LEVEL)


@contextmanager
def derived_conv2d_gradient() -> Iterator[None]:
    """Inside the block, ``nn.conv2d``'s gradient is the derived operators' (``register_derived``);
    after it, the gradient registered before (the registry is process-global)."""
    op = tvm.ir.Op.get("relax.nn.conv2d")
    previous = op.get_attr("FPrimalGradient")
    register_derived()
    try:
        yield
    finally:
        op.reset_attr("FPrimalGradient")  # a registration's level cannot be lowered: start afresh
        if previous is not None:
            tvm.ir.register_op_attr("relax.nn.conv2d", "FPrimalGradient", previous, level=DERIVED_LEVEL - 1)


def _one_operator(func: Any, name: str) -> bool:
    """Whether the compiler reads the PrimFunc ``func`` as one expression operator (a tuning task)."""
    from tuner.errors import InvalidWorkloadError
    from tuner.ir.relax_ops import Routing, expression_workload

    try:
        expression_workload(func, name, Routing.MEMORY_BOUND)
    except InvalidWorkloadError:
        return False
    return True


@relax.expr_functor.visitor
class _ForwardCalls(relax.PyExprVisitor):
    """The PrimFuncs called by ``call_tir_with_grad``: GlobalVar -> the operator's tensors and name
    (``Gradient`` calls the same PrimFunc with a plain ``call_tir`` in the adjoint function)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[Any, tuple[list[Any], str]] = {}

    def visit_call_(self, call: Any) -> None:  # noqa: N802 -- the visitor's name
        super().visit_call_(call)
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir_with_grad":
            forward = _FORWARDS.get(str(call.attrs.te_grad_name))
            if forward is not None:
                self.found[call.args[0]] = forward


@relax.expr_functor.mutator
class _StripWithGrad(relax.PyExprMutator):
    def __init__(self, mod: Any) -> None:
        super().__init__(mod)
        self.mod_ = mod
        calls = _ForwardCalls()
        for func in mod.functions.values():
            if isinstance(func, relax.Function):
                calls.visit_expr(func)
        # forwards of several stages that are no one expression operator: their stages, made once
        # (the forward is called in main and again in main_adjoint)
        self.split = {gv: (tensors, program_stages([tensors[-1]]), name) for gv, (tensors, name) in calls.found.items()
                      if not _one_operator(mod[gv], name)}

    def visit_call_(self, call: Any) -> Any:  # noqa: N802 -- the mutator's visitor name
        call = self.visit_expr_post_order(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name not in ("relax.call_tir_with_grad", "relax.call_tir"):
            return call
        if call.args[0] not in self.split:
            if call.op.name == "relax.call_tir":
                return call
            return relax.call_tir(call.args[0], call.args[1], call.ty_args[0])
        tensors, stages, name = self.split[call.args[0]]
        values = {x.op: arg for x, arg in zip(tensors[:-1], call.args[1])}
        for i, (t, sources, standalone) in enumerate(stages):
            stage = _stage_name(name, t)
            gv = self.builder_.add_func(te.create_prim_func(standalone).with_attr("global_symbol", stage), stage)
            value = relax.call_tir(gv, [values[x.op] for x in sources], _tensor_type(t))
            values[t.op] = value if i == len(stages) - 1 else self.builder_.emit(value)
        return values[tensors[-1].op]

    def transform(self) -> Any:
        for gv, func in list(self.mod_.functions_items()):
            if isinstance(func, relax.Function):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.get()


def strip_with_grad(mod: Any) -> Any:
    """``mod`` with every ``call_tir_with_grad`` a plain ``call_tir`` (what 0.27 cannot lower), or one
    per stage when its forward is several stages and no one expression operator."""
    return _StripWithGrad(mod).transform()
