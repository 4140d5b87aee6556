"""The Relax reader: a Relax main function (params bound as constants) -> tuner.ir.graph.Graph, for a target.

The module is brought to the reader's form (``reader_form``: reductions split for the CPEs, binding names
unique) and legalized by TVM (``LegalizeOps``) except for the operators the passes read themselves
(``KEPT_OPS``). The reader then walks the bindings once, and ``PIPELINE`` lowers them, a list of named
passes (tuner.ir.passes, one job each) in this order:

1. ``fold_constants``: a legalized operator on constant operands runs once, at compile time;
2. ``views``: reshape-likes are views, ``shape_of`` and ``tensor_to_shape`` compile-time shapes;
3. ``transposes``: permute_dims (and the kernels' transposes) a layout copy, or done at compile time;
4. ``kernel_nodes``: conv2d, conv1d and matmul the kernel nodes the tuned slave kernels run;
5. ``fold_batch_norm``: an inference batch norm one per-channel scale and shift;
6. ``norm_rewrites``: group_norm, instance_norm and long variances steps that fit the target's LDM;
7. ``take_one``: a take of one constant index a slice (a region copy);
8. ``allreduce``: the mean over MPI ranks a training step calls;
9. ``cpe_annotations``: a legalized operator no pass rewrote is a generic node (its PrimFunc printed as C,
   tuner.ir.cprint), marked with the CPE kernel that runs it (region copy, resize, gather, expression);
10. ``dead_code``: nodes nothing reads removed.

The order matters where passes meet the same binding: a legalized operator is tried by the passes'
``legalized`` rewrites in this order (constants fold before a variance is split). An operator no pass
lowers and TVM does not legalize is an AotError naming it and its binding. The target's LDM is the one
figure the passes read (``norm_rewrites``); with no target (one operator rebuilt from its script) no step
is split for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from tuner.ir.cprint.dtypes import INPUT_FILE_TYPES
from tuner.ir.graph import AotError, Graph, Node, Note, Tensor, Where
from tuner.ir.legalizations import legalize
from tuner.ir.names import operator_name
from tuner.ir.passes import (
    allreduce,
    cpe_annotations,
    dead_code,
    fold_batch_norm,
    fold_constants,
    kernel_nodes,
    norm_rewrites,
    take_one,
    transposes,
    views,
)
from tuner.ir.passes.emit import flatten, generic_node, ints, tensor_type
from tuner.ir.passes.lowering_pass import LegalizedCall, LoweringPass, Rule, Value
from tuner.targets import Target, get_target

PIPELINE: tuple[LoweringPass, ...] = (
    fold_constants.PASS,
    views.PASS,
    transposes.PASS,
    kernel_nodes.PASS,
    fold_batch_norm.PASS,
    norm_rewrites.PASS,
    take_one.PASS,
    allreduce.PASS,
    cpe_annotations.PASS,
    dead_code.PASS,
)


def _rules(passes: Sequence[LoweringPass]) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for p in passes:
        twice = set(rules) & set(p.rules)
        assert not twice, f"pass {p.name} lowers {sorted(twice)}, which an earlier pass lowers"
        rules.update(p.rules)
    return rules


_RULES = _rules(PIPELINE)
# operators the passes read themselves; LegalizeOps lowers every other one to a PrimFunc
KEPT_OPS = tuple(_RULES)


class RelaxReader:
    """One pass over ``mod["main"]`` for ``target`` (None: no target's LDM applies): ``read()`` returns
    the Graph. The passes build it through ``tensor``, ``const``, ``view``, ``node`` and ``note``."""

    def __init__(self, mod: Any, calls: dict[str, Any] | None = None, target: Target | None = None) -> None:
        self.mod = mod
        self.target = target
        self.calls = calls or {}  # binding name -> the Relax call before legalization
        self.ops = {k: str(c.op.name).removeprefix("relax.") for k, c in self.calls.items()}
        self.functions: dict[str, Any] = {}  # PrimFunc name -> its printed C (tuner.ir.cprint.legalized.CFunction)
        self.expressions: dict[str, Any] = {}  # PrimFunc name -> its ExprWorkload, or None (not one)
        self.env: dict[Any, Value] = {}
        self.consts: dict[Any, Tensor] = {}  # Relax constant object -> its tensor (one storage each)
        self.steps: list[Node | Note] = []
        self.dtype = ""
        self._ids = 0

    # ---- tensors ------------------------------------------------------------------------------
    def new_tensor(self, shape: tuple[int, ...], dtype: str, kind: str, name: str, **kw: Any) -> Tensor:
        """A tensor with the next id (ids follow the order tensors are made in)."""
        self._ids += 1
        return Tensor(self._ids, tuple(shape), dtype, kind, name, **kw)

    def producer(self, t: Tensor) -> Node | None:
        """The step whose output ``t`` (itself, not a view of it) is, if a step made it."""
        return next((s for s in reversed(self.steps) if isinstance(s, Node) and s.output is t), None)

    def const(self, data: np.ndarray, name: str) -> Tensor:
        data = np.ascontiguousarray(data)
        return self.new_tensor(data.shape, str(data.dtype), "const", name, data=data)

    def view(self, t: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
        if prod(shape) != t.size:
            raise AotError(f"{name}: a view of {list(t.shape)} as {list(shape)} changes the size")
        if t.kind == "const":  # a folded constant keeps its own (reshaped) data: no aliasing to track
            assert t.data is not None
            return self.const(t.data.reshape(shape), name)
        return self.new_tensor(shape, t.dtype, t.kind, name, base=t)

    def node(self, op: str, inputs: list[Tensor], shape: tuple[int, ...], source: str, relax_op: str,
             **attrs: Any) -> Tensor:
        for t in inputs:
            if t.dtype != self.dtype:
                raise AotError(f"{source} ({relax_op}): operand {t.name} has dtype {t.dtype}, the model "
                               f"computes in {self.dtype}; mixed dtypes are not supported")
        out = self.new_tensor(shape, self.dtype, "temp", source)
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
            return ints(e.values)
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
        if short == "call_tir":
            return self.call_tir(call, name)
        rule = _RULES.get(short)
        if rule is None:
            raise AotError(f"operator {op} (binding {name}) has no AOT implementation: TVM did not legalize "
                           "it and it is not a Sunway kernel")
        return rule(self, call, name, short)

    def call_tir(self, call: Any, name: str) -> Value:
        """A legalized operator: the first pass's rewrite that takes it, else a generic node running the
        PrimFunc's C, marked by the passes' ``annotate``."""
        from tvm import relax

        gvar = call.args[0]
        relax_op = self.ops.get(name, gvar.name_hint)
        if relax_op.startswith("call_tir"):  # a PrimFunc called as it is (a derived gradient, a user's operator)
            relax_op = operator_name(gvar.name_hint)
        func = self.mod[gvar]
        args = self.expr(call.args[1], name)
        args = args if isinstance(args, tuple) else (args,)
        if not all(isinstance(a, Tensor) for a in args):
            raise AotError(f"{name} ({relax_op}): call_tir with non-tensor operands")
        out_info = call.ty_args[0]
        infos = list(out_info.fields) if isinstance(out_info, relax.TupleType) else [out_info]
        outs = [tensor_type(i, name) for i in infos]
        if len(call.args) > 2:
            raise AotError(f"{name} ({relax_op}): call_tir with symbolic shape variables is not supported")
        c = LegalizedCall(name, relax_op, func, str(gvar.name_hint), args, outs, self.calls.get(name))
        for p in PIPELINE:
            if p.legalized is not None:
                value = p.legalized(self, c)
                if value is not None:
                    return value
        out = generic_node(self, func, list(args), outs, name, relax_op, c.call, f"tir_{gvar.name_hint}")
        step = self.steps[-1]
        if isinstance(step, Node) and step.op == "tir" and step.output is flatten(out)[0]:
            for p in PIPELINE:
                if p.annotate is not None:
                    p.annotate(self, c, step)
        return out

    # ---- the function -------------------------------------------------------------------------
    def read(self) -> Graph:
        from tvm import relax

        fn = self.mod["main"]
        inputs = []
        types = [tensor_type(p.ty, f"parameter {p.name}") for p in fn.params]
        floats = [dtype for _, dtype in types if dtype in ("float32", "float64")]
        self.dtype = self.dtype or (floats[0] if floats else "float32")  # the model's dtype: its float inputs'
        for i, (p, (shape, dtype)) in enumerate(zip(fn.params, types)):
            # integer and bool inputs (token ids, masks) are kept in the model's dtype like every tensor
            # (tuner.ir.cprint), read from their own dtype's file by the program (tuner.aot.host)
            if dtype != self.dtype and dtype not in INPUT_FILE_TYPES:
                raise AotError(f"parameter {p.name} has dtype {dtype}; a model's inputs are of its float dtype "
                               f"({self.dtype}) or one of {', '.join(INPUT_FILE_TYPES)}")
            t = self.new_tensor(shape, dtype, "input", p.name, index=i)
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
        outputs = flatten(out)
        if not outputs:
            raise AotError("the model returns no tensor")
        steps = self.steps
        for p in PIPELINE:
            if p.steps is not None:
                steps = p.steps(steps, outputs)
        return Graph(inputs, outputs, steps, self.dtype, self._ids, self.functions)


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


def read_relax(mod: Any, target: Target | str | None) -> Graph:
    """The Graph of a Relax IRModule's main function (legalized here) as compiled for ``target``, whose LDM
    decides how a normalisation is split into steps; None: no target (an operator read as it is, with no
    step split for a CPE's LDM: a CPE kernel rebuilt from its script, tuner.space.cpe.rebuild)."""
    mod = reader_form(mod)
    tgt = None if target is None else get_target(target)
    return RelaxReader(legalize(mod, KEPT_OPS), source_calls(mod), tgt).read()
