"""Reverse-mode differentiation of tensor-expression operators, in gather form (NeoFlow's AD).

For an operator written as ``te.compute`` stages (a user's function returning inputs, then the
output), :func:`differentiate` derives the gradient of every input as new one-stage expression
operators, each a tuning task like any other, plus the program that assembles them.

How (after Urban & van der Smagt's tensor-algebra AD and Halide's scatter-to-gather conversion):

- **Stages**, walked in reverse. The output's adjoint is the head ``grad_<out>``; a stage's inputs get
  their adjoints from its body by the chain rule and sum over consumers. Index-only stages (a padding
  ``if_then_else(in bounds, X[i - p], 0)``, a copy, a transpose) are composed through instead of
  differentiated: the conv reading ``pad(X)`` is differentiated straight for X.
- **Element-wise rules** (tuner/expr/derivative.py): the body's derivative with respect to one group
  of loads (the same tensor at the same index). A max/min reduction routes through the forward
  argmax: the program first finds, per output point, the first reduction point (row-major) whose body
  equals the output -- an operator of its own, :func:`tuner.expr.adjoint_ops.argmax_stage` -- and only
  that point carries the gradient. A tie (a window of equal values) gives it to one point, as torch's
  max_pool2d does.
- **Gather form.** ``dX[a] = sum over (i, k) with J(i, k) = a of dOut[i] * d body/d X[J]``. Each index
  dimension of X is solved for one axis (its *pivot*: one in no other dimension, the output's axes
  first, then the largest). Every other axis becomes a reduction axis of the adjoint. Where a
  dimension's every axis also indexes another, the map may still be triangular: a shift's group u
  indexes its channel part and its row ``i + u``; u is solved from the channel first and substituted
  in the row, whose pivot i is then ``i' - u`` -- a shift's adjoint is the opposite shift, a gather.
- **Zero elimination.** A pivot with coefficient c (a stride) splits the adjoint by the residue of
  the index mod c, and each other axis u of that dimension by its residue mod c/gcd(c_u, c); only the
  residue combinations that solve the index exactly are kept, so no multiply-add falls on an inserted
  zero. A pivot alone in its dimension gets its exact range instead (bound tightening); one with
  other axes relies on the head padded with zeros (the border of a transposed conv), or a guard.
- **Non-affine indices** ``v // m`` and ``v % m`` (grouped convs, reshapes) are made affine by
  splitting the axis v into ``m * v_hi + v_lo`` first; a mixed-radix index ``ext(v) * u + v`` is viewed
  as two dimensions.
- **An input at several places** (``x[i, j] * W[j, k] * x[i, k]``, ``x[i, j] * x[j, i]``): each place
  (each group of loads) is differentiated alone and solved for its own pivots, so x's gradient is one
  term per place (``W x`` and ``W^T x``). Terms over the same points merge into one operator only where
  every tensor they share is read at the same linear index (a stencil's taps, offsets apart,
  :func:`tuner.expr.adjoint_ops.merge_terms`): merged, W's reads ``[j, r]`` and ``[r, j]`` would span no
  affine box. So each place is an operator of its own, tuned and checked as any other, and the
  assembly sums them as it sums a tensor's consumers (pieces over the whole target, read unguarded: an
  element-wise sum). A term that itself reads a tensor at two linear indices (W's gradient
  ``sum_i g[i] * x[i, j] * x[i, k]``) reads it as two operands, ``x`` and ``x_2``
  (``GradientOperator.aliases``); the program passes the same tensor to both. Every standalone stage
  (:func:`program_stages`, a forward stage split into its own function) is split so too.

Modules: this one walks the stages and builds the program; tuner/expr/gather_form.py solves one
stage's terms; tuner/expr/adjoint_ops.py makes operators of them (padding, compact copies, assembly).
Imports tvm inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tuner.expr.adjoint_ops import (
    Gather,
    GradientOperator,
    Padding,
    Piece,
    argmax_stage,
    assemble,
    build_operator,
    formula,
    merge_terms,
    passes_through,
    prepare,
    reduction_position,
)
from tuner.expr.derivative import (
    NotDifferentiableError,
    derivative,
    dtype_of,
    kind,
    load_parts,
    loads,
    rebuild,
    show_indices,
)
from tuner.expr.gather_form import Linear, Stage, Term, gather_terms, index_map, linear_part, stage_of

__all__ = ["Gather", "Gradient", "GradientOperator", "Padding", "differentiate", "program_stages", "with_dtype"]


@dataclass
class Gradient:
    """Every input's gradient: the operators (tuning tasks) and the program that runs them."""

    forward: str
    head: Any  # placeholder of the output's gradient
    inputs: list[Any]  # the forward operator's input placeholders
    outputs: dict[str, Any]  # input name -> its gradient (a te tensor of the program)
    operators: list[GradientOperator] = field(default_factory=list)

    def program(self) -> list[Any]:
        """Tensors of the whole gradient program: forward inputs, head, then one gradient per input. An
        input whose gradient is the head itself (``out = x + f(w)``) gets a copy of it: a function's
        output buffer cannot be one of its inputs."""
        from tvm import te

        def own(name: str, t: Any) -> Any:
            if isinstance(t.op, te.ComputeOp):
                return t
            return te.compute(t.shape, lambda *i: t(*i), name=f"{self.forward}_grad_{name}")

        return [*self.inputs, self.head, *(own(n, t) for n, t in self.outputs.items())]

    def describe(self) -> str:
        """The derived operators as a user reads them (``swtune grad``)."""
        lines = []
        for op in self.operators:
            out = op.tensors[-1]
            spatial = ", ".join(str(v.var.name) for v in out.op.axis)
            where = ""
            if any(s != 1 for s in op.step) or any(op.first) or any(op.residue):
                where = "   # d{}[{}]".format(op.wrt, ", ".join(
                    f"{s}*({v.var.name}+{f})+{r}" if s != 1 else (f"{v.var.name}+{f + r}" if f + r else str(v.var.name))
                    for s, f, r, v in zip(op.step, op.first, op.residue, out.op.axis)))
            if any(len(sizes) > 1 for sizes in op.radix):  # a dimension viewed as several (mixed radix)
                view = [n for sizes in op.radix for n in sizes]
                where += f"   # d{op.wrt} viewed as shape {view}"
            lines.append(f"{op.name}[{spatial}] = {op.formula}{where}")
            for name, pad in op.operands.items():
                if isinstance(pad, Gather):
                    index = ", ".join(f"{c}*j{p}+{o}" if p >= 0 else str(o) for p, c, o in pad.index)
                    lines.append(f"    {name}{pad.name_suffix}[j0..] = {name}[{index}], shape {list(pad.shape)}")
                elif pad.needed:
                    fill = "zeros" if pad.zeros else "edge values"
                    lines.append(f"    {name} padded by {list(zip(pad.low, pad.high))} with {fill}")
            for alias, name in op.aliases.items():
                lines.append(f"    {alias} is {name}, read at another index")
        return "\n".join(lines)


def _topological(out: Any) -> list[Any]:
    """The compute stages reachable from ``out``, producers first."""
    from tvm import te

    order: list[Any] = []
    seen: set[Any] = set()

    def visit(t: Any) -> None:
        if t.op in seen or not isinstance(t.op, te.ComputeOp):
            return
        seen.add(t.op)
        for src in t.op.input_tensors:
            visit(src)
        order.append(t)

    visit(out)
    return order


def differentiate(tensors: Sequence[Any], name: str | None = None) -> Gradient:
    """The gradient of every input of ``tensors`` (inputs, then the output, as a user's operator
    function returns them), with respect to a head gradient of the output's shape."""
    from tvm import te, tirx

    tensors = list(tensors)
    if len(tensors) < 2 or not isinstance(tensors[-1].op, te.ComputeOp):
        raise NotDifferentiableError("an operator is its input tensors, then one te.compute output")
    inputs, out = tensors[:-1], tensors[-1]
    forward = name or str(out.op.name)
    head = te.placeholder(out.shape, dtype=out.dtype, name=f"grad_{out.op.name}")
    stages = [s for s in _topological(out) if s.same_as(out) or index_map(s) is None]
    adjoint: dict[Any, Any] = {out.op: head}  # program tensors
    standalone_head: dict[Any, Any] = {out.op: head}
    pieces: dict[Any, list[Piece]] = {}  # target -> the program tensors of its gradient's parts
    made: dict[str, Any] = {}  # program tensors that are not forward tensors (argmax stages), by name
    operators: list[GradientOperator] = []
    for stage_tensor in reversed(stages):
        if stage_tensor.op not in adjoint:
            contributions = pieces.pop(stage_tensor.op, [])
            if not contributions:
                continue  # nothing downstream depends on it
            adjoint[stage_tensor.op] = assemble(stage_tensor, contributions, f"grad_{stage_tensor.op.name}")
            standalone_head[stage_tensor.op] = te.placeholder(stage_tensor.shape, dtype=stage_tensor.dtype,
                                                              name=f"grad_{stage_tensor.op.name}")
        stage = stage_of(stage_tensor)
        sa_head = standalone_head[stage_tensor.op]
        argmax = positions = None
        if stage.reducer in ("max", "min"):  # the gradient goes to the forward's argmax only
            suffix = "" if stage_tensor.same_as(out) else f"_via_{stage_tensor.op.name}"
            argmax, positions = argmax_stage(stage_tensor, f"{forward}_arg{stage.reducer}{suffix}")
            made.update({str(t.op.name): t for t in (argmax, positions)})
            operators.append(_stage_operator(argmax, wrt=str(stage_tensor.op.name)))
        groups: dict[tuple[Any, str], list[Any]] = {}
        for ld in loads(stage.value):
            tensor, idx = load_parts(ld)
            groups.setdefault((tensor.op, show_indices(idx)), []).append(ld)
        terms_by_target: dict[Any, list[Term]] = {}
        for (op, key), members in groups.items():
            tensor, index = load_parts(members[0])

            def wrt(e: Any, op: Any = op, key: str = key) -> bool:
                t, i = load_parts(e)
                return t.op.same_as(op) and show_indices(i) == key

            grad = derivative(stage.value, wrt)
            if grad is None:
                continue
            if argmax is not None:
                grad = tirx.Select(tirx.EQ(reduction_position(stage, positions), argmax(*stage.head)), grad,
                                   tirx.FloatImm(dtype_of(grad), 0.0))
            # compose through index-only stages down to a placeholder or a differentiated stage
            while not tensor.same_as(out) and index_map(tensor) is not None:
                source, inner, guard = index_map(tensor)  # type: ignore[misc]
                axes = {iv.var: i for iv, i in zip(tensor.op.axis, index)}
                if guard is not None:
                    grad = tirx.Select(rebuild(guard, axes, lambda t, i: t(*i)), grad,
                                       tirx.FloatImm(dtype_of(grad), 0.0))
                index = [rebuild(i, axes, lambda t, i: t(*i)) for i in inner]
                tensor = source
            terms_by_target.setdefault(tensor, []).extend(gather_terms(stage, index, grad, tensor, sa_head))
        for target, terms in terms_by_target.items():
            groups_of_terms = merge_terms(terms)
            for n, group in enumerate(groups_of_terms):
                suffix = "" if len(groups_of_terms) == 1 else f"_{n}"
                op_name = f"{forward}_grad_{target.op.name}" + (
                    "" if stage_tensor.same_as(out) else f"_via_{stage_tensor.op.name}") + suffix
                if len(groups_of_terms) == 1 and passes_through(group, sa_head, target):
                    # d target = the head itself (a bias add, a matmul's epilogue): no operator, no copy
                    full = tuple(1 for _ in target.shape), tuple(0 for _ in target.shape)
                    pieces.setdefault(target.op, []).append((*full, full[1], (), adjoint[stage_tensor.op]))
                    continue
                gop, build = build_operator(group, op_name, target, sa_head)
                operators.append(_one_operand_per_occurrence(gop))
                program_operands = {}
                for operand_name, pad in gop.operands.items():
                    source = adjoint[stage_tensor.op] if operand_name == str(sa_head.op.name) else _by_name(
                        operand_name, stage, inputs, made)
                    program_operands[operand_name] = prepare(source, pad)
                pieces.setdefault(target.op, []).append((gop.step, gop.first, gop.residue, gop.radix,
                                                         build(program_operands, op_name)))
    outputs: dict[str, Any] = {}
    for x in inputs:
        contributions = pieces.get(x.op, [])
        if contributions:
            outputs[str(x.op.name)] = assemble(x, contributions, f"grad_{x.op.name}")
        else:
            zero = tirx.const(0.0, x.dtype)  # an input nothing depends on
            outputs[str(x.op.name)] = te.compute(x.shape, lambda *i, z=zero: z, name=f"grad_{x.op.name}")
    return Gradient(forward=forward, head=head, inputs=inputs, outputs=outputs, operators=operators)


def _stage_operator(t: Any, wrt: str) -> GradientOperator:
    """A program stage that is an operator of its own (an argmax), over the whole of its output."""
    whole = tuple(0 for _ in t.shape)
    return GradientOperator(name=str(t.op.name), wrt=wrt, step=tuple(1 for _ in t.shape), first=whole, residue=whole,
                            radix=tuple((int(s),) for s in t.shape), tensors=_standalone(t), operands={},
                            formula=formula(t))


def _standalone(t: Any) -> list[Any]:
    """Stage ``t`` on its own: placeholders for its inputs, then its compute (:func:`_standalone_parts`)."""
    return _standalone_parts(t)[1]


def _standalone_parts(t: Any, inputs: Sequence[Any] | None = None) -> tuple[list[Any], list[Any]]:
    """(sources, standalone) of stage ``t``: standalone is a placeholder per input (named as the input,
    in the order of ``inputs``, by default the stage's), then its compute; an input read at indices with
    different linear parts gets one placeholder per index class (``x``, ``x_2``: each read an affine box,
    where their union is none), so ``sources[n]`` is the input that placeholder n stands for."""
    from tvm import te

    classes = _occurrences(t)
    taken = {str(src.op.name) for src in t.op.input_tensors} | {str(t.op.name)}
    holders: dict[tuple[Any, int], Any] = {}  # (input op, index class) -> placeholder
    sources: list[Any] = []
    for src in (inputs if inputs is not None else t.op.input_tensors):
        for n in range(len(classes.get(src.op, [None]))):
            name = str(src.op.name) if n == 0 else _fresh_name(f"{src.op.name}_{n + 1}", taken)
            holders[(src.op, n)] = te.placeholder(src.shape, dtype=src.dtype, name=name)
            sources.append(src)

    def load(tensor: Any, idx: list[Any], axes: list[Any]) -> Any:
        parts = classes.get(tensor.op)
        return holders[(tensor.op, parts.index(linear_part(idx, axes)) if parts else 0)](*idx)

    return sources, [*holders.values(), _recompute(t, load)]


def _occurrences(t: Any) -> dict[Any, list[Linear | None]]:
    """Input op -> the linear parts of the indices stage ``t`` reads it at, in the order first read, for
    each input read at two or more (all affine: an index that is not, a clamp, leaves the input whole)."""
    op = t.op
    body = op.body[0]
    axes = [iv.var for iv in op.axis]
    if kind(body) == "Reduce":
        axes += [iv.var for iv in body.axis]
        body = body.source[0]
    found: dict[Any, list[Linear | None]] = {}
    for ld in loads(body):
        tensor, idx = load_parts(ld)
        parts = found.setdefault(tensor.op, [])
        part = linear_part(idx, axes)
        if part not in parts:
            parts.append(part)
    return {src: parts for src, parts in found.items() if len(parts) > 1 and None not in parts}


def _fresh_name(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _one_operand_per_occurrence(gop: GradientOperator) -> GradientOperator:
    """The operator with an operand read at indices with different linear parts split into one operand
    per index class (the gradient of W of ``x[i, j] * W[j, k] * x[i, k]`` reads ``x[r, j] * x[r, k]``):
    then every read is affine and the operator is an expression workload. Unchanged otherwise."""
    out = gop.tensors[-1]
    if not _occurrences(out):
        return gop
    sources, tensors = _standalone_parts(out, gop.tensors[:-1])
    aliases = {str(p.op.name): str(s.op.name) for p, s in zip(tensors, sources) if str(p.op.name) != str(s.op.name)}
    return replace(gop, tensors=tensors, aliases=aliases, formula=formula(tensors[-1]))


def _by_name(name: str, stage: Stage, inputs: list[Any], made: dict[str, Any]) -> Any:
    """The program tensor an operand name stands for: a forward input or stage output, or a tensor the
    program made (an argmax)."""
    if name in made:
        return made[name]
    for t in [*inputs, stage.tensor, *_all_tensors(stage.tensor)]:
        if str(t.op.name) == name:
            return t
    raise NotDifferentiableError(f"operand {name} of a derived operator is not a tensor of the forward operator")


def _all_tensors(out: Any) -> list[Any]:
    found: list[Any] = []
    seen: set[Any] = set()

    def visit(t: Any) -> None:
        if t.op in seen:
            return
        seen.add(t.op)
        found.append(t)
        for src in getattr(t.op, "input_tensors", []):
            visit(src)

    visit(out)
    return found


def _recompute(t: Any, load: Callable[[Any, list[Any], list[Any]], Any], dtype: str | None = None) -> Any:
    """The compute stage ``t`` again, each load of an input made by ``load(input, index, axes)`` (axes:
    the new stage's axis variables, spatial then reduction, in the order of ``t``'s), over ``dtype``
    when given."""
    from tvm import te

    stage = t.op
    body = stage.body[0]

    def fcompute(*axes: Any) -> Any:
        mapping = {iv.var: a for iv, a in zip(stage.axis, axes)}
        if kind(body) != "Reduce":
            return rebuild(body, mapping, lambda tensor, idx: load(tensor, idx, list(axes)), dtype)
        raxes = [te.reduce_axis((0, int(iv.dom.extent)), name=str(iv.var.name)) for iv in body.axis]
        mapping.update({iv.var: r.var for iv, r in zip(body.axis, raxes)})
        every = [*axes, *(r.var for r in raxes)]
        value = rebuild(body.source[0], mapping, lambda tensor, idx: load(tensor, idx, every), dtype)
        return _reducer(body.combiner)(value, axis=raxes)

    return te.compute(t.shape, fcompute, name=str(stage.name))


def _reducer(combiner: Any) -> Any:
    """The te reducer of a reduction's combiner: sum, max or min, with its own identity when that is a
    finite value (an argmax stage's) rather than the dtype's extreme."""
    from tvm import te, tirx

    name = kind(combiner.result[0])
    identity = combiner.identity_element[0]
    if name == "Add" or abs(float(identity.value)) > 1e30:
        return {"Add": te.sum, "Max": te.max, "Min": te.min}[name]
    fold = {"Max": tirx.max, "Min": tirx.min}[name]
    return te.comm_reducer(lambda a, b: fold(a, b), lambda t: tirx.FloatImm(t, float(identity.value)),
                           name=f"{name.lower()}_from_{float(identity.value):g}")


def with_dtype(tensors: Sequence[Any], dtype: str) -> list[Any]:
    """The same operator over ``dtype`` (every float tensor, constant and cast): what the finite
    difference check runs in float64 whatever the operator's own precision."""
    from tvm import te

    made: dict[Any, Any] = {}

    def convert(t: Any) -> Any:
        if t.op in made:
            return made[t.op]
        if isinstance(t.op, te.PlaceholderOp):
            new = te.placeholder(t.shape, dtype=dtype if str(t.dtype).startswith("float") else t.dtype,
                                 name=str(t.op.name))
        else:
            sources = {src.op: convert(src) for src in t.op.input_tensors}

            def load(tensor: Any, idx: list[Any], _: list[Any], sources: dict[Any, Any] = sources) -> Any:
                return sources[tensor.op](*idx)

            new = _recompute(t, load, dtype)
        made[t.op] = new
        return new

    return [convert(t) for t in tensors]


def program_stages(outputs: Sequence[Any]) -> list[tuple[Any, list[Any], list[Any]]]:
    """The gradient program as one-stage functions, producers first: (the stage's tensor in the
    program, the program tensor each placeholder of the standalone stage stands for, the standalone
    stage -- placeholders named as its inputs, then its output -- for ``te.create_prim_func``). Each
    derived operator is one of them, and so is each memory pass (a padding, a compact copy, an
    assembly). An input read at indices with different linear parts is passed once per index class."""
    order: list[Any] = []
    seen: set[Any] = set()
    for out in outputs:
        for t in _topological(out):
            if t.op not in seen:
                seen.add(t.op)
                order.append(t)
    return [(t, *_standalone_parts(t)) for t in order]
