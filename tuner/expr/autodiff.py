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
  result: only points where the body equals the output (the argmax) carry the gradient.
- **Gather form.** ``dX[a] = sum over (i, k) with J(i, k) = a of dOut[i] * d body/d X[J]``. Each index
  dimension of X is solved for one axis (its *pivot*: one in no other dimension, the output's axes
  first, then the largest). Every other axis becomes a reduction axis of the adjoint.
- **Zero elimination.** A pivot with coefficient c (a stride) splits the adjoint by the residue of
  the index mod c, and each other axis u of that dimension by its residue mod c/gcd(c_u, c); only the
  residue combinations that solve the index exactly are kept, so no multiply-add falls on an inserted
  zero. A pivot alone in its dimension gets its exact range instead (bound tightening); one with
  other axes relies on the head padded with zeros (the border of a transposed conv), or a guard.
- **Non-affine indices** ``v // m`` and ``v % m`` (grouped convs, reshapes) are made affine by
  splitting the axis v into ``m * v_hi + v_lo`` first.

Imports tvm inside functions only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.expr.derivative import (
    NotDifferentiableError,
    derivative,
    dtype_of,
    is_load,
    kind,
    load_parts,
    loads,
    nodes,
    rebuild,
    show,
    show_indices,
)


@dataclass(frozen=True)
class Padding:
    """How a gradient operator reads an operand: padded by ``low``/``high`` per dimension, with zeros
    (the head: outside the output there is no gradient) or by repeating the edge (other operands:
    finite values that the zero head then multiplies away)."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    zeros: bool

    @property
    def needed(self) -> bool:
        return any(self.low) or any(self.high)


@dataclass(frozen=True)
class Gather:
    """An operand read at one fixed or strided index (a data gradient's weight taps ``W[f, c, 1, 1]``):
    the program copies those elements into a compact tensor first, so the operator's DMA reads whole
    rows instead of single elements. ``index`` per dimension of the operand: (position of the compact
    dimension or -1 for a constant, coefficient, offset)."""

    index: tuple[tuple[int, int, int], ...]
    shape: tuple[int, ...]

    @property
    def name_suffix(self) -> str:
        return "_c"


@dataclass
class GradientOperator:
    """One derived operator: a single ``te.compute`` computing the gradient of input ``wrt`` at the
    points ``step * (q + first) + residue`` of each dimension (step 1, first 0, residue 0: all of it)."""

    name: str
    wrt: str
    step: tuple[int, ...]
    first: tuple[int, ...]
    residue: tuple[int, ...]
    radix: tuple[tuple[int, ...], ...]  # per dimension of ``wrt``, the output dimensions it is viewed as
    tensors: list[Any]  # standalone: one placeholder per operand, then the output (the tuning task)
    # operand name -> how the program prepares it before this operator reads it: padded, or gathered compact
    operands: dict[str, Padding | Gather]
    formula: str  # the body as a user reads it

    def workload(self) -> Any:
        from tuner.expr.workload import ExprWorkload

        return ExprWorkload.from_tensors(self.tensors, name=self.name)

    @property
    def macs(self) -> int:
        """Multiply-adds the operator's loops execute (output points times reduction points)."""
        out = self.tensors[-1]
        body = out.op.body[0]
        reduce = math.prod(int(r.dom.extent) for r in getattr(body, "axis", ()))
        return math.prod(int(s) for s in out.shape) * reduce


@dataclass
class Gradient:
    """Every input's gradient: the operators (tuning tasks) and the program that runs them."""

    forward: str
    head: Any  # placeholder of the output's gradient
    inputs: list[Any]  # the forward operator's input placeholders
    outputs: dict[str, Any]  # input name -> its gradient (a te tensor of the program)
    operators: list[GradientOperator] = field(default_factory=list)

    def program(self) -> list[Any]:
        """Tensors of the whole gradient program: forward inputs, head, then one gradient per input."""
        return [*self.inputs, self.head, *self.outputs.values()]

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
        return "\n".join(lines)


# --- stages -----------------------------------------------------------------------------------
@dataclass
class _Stage:
    """One te.compute in reduce form: out[head] = reducer over reduce axes of value."""

    tensor: Any
    extents: dict[Any, int]  # every axis variable (spatial and reduction) -> extent
    spatial: list[Any]
    head: list[Any]  # the output index as a function of the axes (the spatial axes, or their splits)
    value: Any
    reducer: str  # "none", "sum", "max" or "min"


def _stage(tensor: Any) -> _Stage:
    from tvm import ir, sym, te

    op = tensor.op
    if not isinstance(op, te.ComputeOp) or len(op.body) != 1:
        raise NotDifferentiableError(f"{op.name} must be a te.compute with one output")
    body = op.body[0]
    spatial = [iv.var for iv in op.axis]
    extents = {iv.var: int(iv.dom.extent) for iv in op.axis}
    if kind(body) == "Reduce":
        if not (kind(body.condition) == "IntImm" and int(body.condition.value) == 1):
            raise NotDifferentiableError(f"{op.name}: a reduction with where= is not differentiated "
                                         "(write if_then_else inside the sum instead)")
        reducer = {"Add": "sum", "Max": "max", "Min": "min"}.get(kind(body.combiner.result[0]))
        if reducer is None or len(body.source) != 1:
            raise NotDifferentiableError(f"{op.name}: only sum, max and min reductions are differentiated")
        extents.update({iv.var: int(iv.dom.extent) for iv in body.axis})
        value = body.source[0]
    else:
        reducer, value = "none", body
    # indices simplified under the axes' bounds first: a conv of one group indexes k // K, always 0
    analyzer = sym.Analyzer()
    for var, ext in extents.items():
        analyzer.bind(var, ir.Range(0, ext))
    value = rebuild(value, {}, lambda t, idx: t(*[analyzer.simplify(i) for i in idx]))
    stage = _Stage(tensor, extents, spatial, list(spatial), value, reducer)
    return _split_div_mod(stage)


def _split_div_mod(stage: _Stage) -> _Stage:
    """Axes used as ``v // m`` or ``v % m`` are split into ``m * v_hi + v_lo`` (both then affine)."""
    from tvm import ir, sym, tirx

    divisors: dict[Any, int] = {}
    for e in nodes(stage.value):
        if kind(e) in ("FloorDiv", "FloorMod") and kind(e.a) == "Var" and kind(e.b) == "IntImm":
            m = int(e.b.value)
            if divisors.setdefault(e.a, m) != m:
                raise NotDifferentiableError(f"axis {e.a.name} is divided by both {divisors[e.a]} and {m}")
    if not divisors:
        return stage
    mapping: dict[Any, Any] = {}
    split: dict[Any, tuple[Any, Any]] = {}
    extents = dict(stage.extents)
    analyzer = sym.Analyzer()
    for v, m in divisors.items():
        if extents[v] % m:
            raise NotDifferentiableError(f"axis {v.name} (extent {extents[v]}) is divided by {m}, which does not "
                                         "divide its extent")
        hi, lo = tirx.Var(f"{v.name}_hi", "int32"), tirx.Var(f"{v.name}_lo", "int32")
        extents[hi], extents[lo] = extents.pop(v) // m, m
        mapping[v] = hi * m + lo
        split[v] = (hi, lo)
    for var, ext in extents.items():
        analyzer.bind(var, ir.Range(0, ext))

    def simplify(e: Any) -> Any:
        return analyzer.simplify(e)

    def load(tensor: Any, idx: list[Any]) -> Any:
        return tensor(*[simplify(i) for i in idx])

    value = rebuild(stage.value, mapping, load)
    head = [simplify(rebuild(h, mapping, load)) for h in stage.head]
    spatial = [s for v in stage.spatial for s in (split[v] if v in split else (v,))]
    return _Stage(stage.tensor, extents, spatial, head, value, stage.reducer)


def _index_map(tensor: Any) -> tuple[Any, list[Any], Any] | None:
    """(source tensor, index of it in the stage's axes, guard or None) when ``tensor`` is an index-only
    stage: a copy, transpose or zero padding of one tensor."""
    from tvm import te

    op = tensor.op
    if not isinstance(op, te.ComputeOp) or len(op.body) != 1 or kind(op.body[0]) == "Reduce":
        return None
    body, guard = op.body[0], None
    if kind(body) == "Call" and str(body.op.name) == "prim.if_then_else":
        guard, kept, other = body.args
        body = kept
        if not (kind(other) in ("FloatImm", "IntImm") and float(other.value) == 0.0):
            return None
    elif kind(body) == "Select":
        if not (kind(body.false_value) in ("FloatImm", "IntImm") and float(body.false_value.value) == 0.0):
            return None
        guard, body = body.condition, body.true_value
    if not is_load(body):
        return None
    source, index = load_parts(body)
    return source, index, guard


# --- the gather form of one term ----------------------------------------------------------------
@dataclass(frozen=True)
class _Affine:
    coefs: dict[Any, int]
    offset: int


def _affine(expr: Any, variables: list[Any], what: str) -> _Affine:
    from tvm import sym

    coefs = sym.detect_linear_equation(expr, variables)
    if len(coefs) != len(variables) + 1 or any(kind(c) != "IntImm" for c in coefs):
        raise NotDifferentiableError(f"the index {show(expr)} of {what} is not an integer affine function of "
                                     "the axes")
    values = [int(c.value) for c in coefs]
    return _Affine({v: c for v, c in zip(variables, values[:-1]) if c}, values[-1])


@dataclass
class _Term:
    """One contribution to an input's gradient, re-indexed: value over (q axes, reduce axes)."""

    step: tuple[int, ...]
    first: tuple[int, ...]
    residue: tuple[int, ...]
    count: tuple[int, ...]
    q: list[Any]  # one output variable per dimension of the target
    reduce: list[tuple[Any, int]]  # (variable, extent)
    value: Any  # reads the original tensors at in-range-or-not indices (padding decided later)
    radix: tuple[tuple[int, ...], ...] = ()  # per target dimension, the sizes it is viewed as (mixed radix)


def _mixed_radix(dims: list[_Affine], shape: list[int], extents: dict[Any, int]) -> tuple[
        list[_Affine], list[int], tuple[tuple[int, ...], ...]]:
    """A dimension indexed as ``ext(v) * u + v`` over exactly its size (a grouped conv's channel
    ``g * C_g + c``, a patch embedding's ``3 * y + r``) is a bijection: view it as the dimensions (u, v),
    each solved directly, instead of splitting by residue. (dims, shape, the sizes of each original
    dimension)."""
    out_dims: list[_Affine] = []
    out_shape: list[int] = []
    radix: list[tuple[int, ...]] = []
    for d, (dim, size) in enumerate(zip(dims, shape)):
        ordered = sorted(dim.coefs.items(), key=lambda vc: vc[1])
        mixed = len(ordered) > 1 and dim.offset == 0 and ordered[0][1] == 1 and all(
            not any(v in other.coefs for e, other in enumerate(dims) if e != d) for v, _ in ordered)
        coef = 1
        for v, c in ordered:
            mixed = mixed and c == coef
            coef *= extents[v]
        if not (mixed and coef == size):
            out_dims.append(dim)
            out_shape.append(size)
            radix.append((size,))
            continue
        for v, _ in reversed(ordered):  # the outermost (largest coefficient) first, as the memory layout
            out_dims.append(_Affine({v: 1}, 0))
            out_shape.append(extents[v])
        radix.append(tuple(extents[v] for v, _ in reversed(ordered)))
    return out_dims, out_shape, tuple(radix)


def _gather_terms(stage: _Stage, index: list[Any], grad: Any, target: Any, head: Any) -> list[_Term]:
    """The terms of ``d target[index] += head[stage.head] * grad`` in gather form over target's points."""
    from tvm import ir, sym, tirx

    axes = list(stage.extents)
    name = str(target.op.name)
    dims, shape, radix = _mixed_radix([_affine(i, axes, name) for i in index], [int(s) for s in target.shape],
                                      stage.extents)
    # axes that are a whole dimension of the output's index: out of range, they read the head's zero
    # padding (a split axis, one of m * v_hi + v_lo, is not)
    head_dims = [_affine(h, axes, "the output") for h in stage.head]
    head_axes = {v for h in head_dims for v, c in h.coefs.items() if len(h.coefs) == 1 and c == 1 and h.offset == 0}
    pivots: list[Any | None] = []
    for d, dim in enumerate(dims):
        candidates = [v for v in dim.coefs if v not in pivots
                      and all(v not in other.coefs for e, other in enumerate(dims) if e != d)]
        if dim.coefs and not candidates:
            raise NotDifferentiableError(f"every axis in the index {show(index[d])} of {name} also indexes another "
                                         "dimension: its gradient needs a scatter form, which is not supported")
        # a whole output dimension first (the head's padding bounds it), then the largest coefficient
        # (the other axes split by it shrink to a point: v_hi of a split axis), then the largest extent
        pivots.append(max(candidates, key=lambda v: (v in head_axes, abs(dim.coefs[v]), stage.extents[v]))
                      if candidates else None)
    # the modulus each non-pivot axis is split by: the residue that solves every pivot's equation exactly
    modulus: dict[Any, int] = {}
    for dim, pivot in zip(dims, pivots):
        if pivot is None:
            continue
        m = abs(dim.coefs[pivot])
        for u, c in dim.coefs.items():
            if u != pivot:
                need = m // math.gcd(abs(c), m)
                modulus[u] = math.lcm(modulus.get(u, 1), need)
    split = [u for u, m in modulus.items() if m > 1]
    steps = [abs(dim.coefs[p]) if p is not None else 1 for dim, p in zip(dims, pivots)]
    residues = [range(s) if p is not None else range(dim.offset, dim.offset + 1)
                for s, p, dim in zip(steps, pivots, dims)]
    terms: list[_Term] = []
    for rho in itertools.product(*residues):
        for t in itertools.product(*(range(modulus[u]) for u in split)):
            shift = dict(zip(split, t))
            term = _one_term(stage, dims, pivots, steps, rho, shift, modulus, shape, grad, head, head_axes, name)
            if term is not None:
                term.radix = radix
                terms.append(term)
    # simplify indices and guards under the term's bounds
    for term in terms:
        analyzer = sym.Analyzer()
        for v, c in zip(term.q, term.count):
            analyzer.bind(v, ir.Range(0, c))
        for v, e in term.reduce:
            analyzer.bind(v, ir.Range(0, e))

        def load(tensor: Any, idx: list[Any], analyzer: Any = analyzer) -> Any:
            return tensor(*[analyzer.simplify(i) for i in idx])

        def simplify_guards(e: Any, analyzer: Any = analyzer) -> Any:
            if kind(e) == "Select":
                cond = analyzer.simplify(e.condition)
                if kind(cond) == "IntImm":
                    return simplify_guards(e.true_value if int(cond.value) else e.false_value)
                return tirx.Select(cond, simplify_guards(e.true_value), simplify_guards(e.false_value))
            if kind(e) in ("Add", "Sub", "Mul", "Div"):
                return getattr(tirx, kind(e))(simplify_guards(e.a), simplify_guards(e.b))
            return e

        term.value = simplify_guards(rebuild(term.value, {}, load))
    return terms


def _one_term(stage: _Stage, dims: list[_Affine], pivots: list[Any | None], steps: list[int], rho: tuple[int, ...],
              shift: dict[Any, int], modulus: dict[Any, int], shape: list[int], grad: Any, head: Any,
              head_axes: set[Any], name: str) -> _Term | None:
    """The term of one residue combination, or None when it is empty or never solves the index."""
    from tvm import tirx

    # the equation of each pivot dimension must be solvable for these residues
    for dim, pivot, m, r in zip(dims, pivots, steps, rho):
        if pivot is not None:
            rest = sum(c * shift.get(u, 0) for u, c in dim.coefs.items() if u != pivot)
            if (r - dim.offset - rest) % m:
                return None
    reduce: list[tuple[Any, int]] = []
    mapping: dict[Any, Any] = {}
    renamed: dict[Any, Any] = {}  # forward axis -> its reduction variable in the adjoint
    for v, ext in stage.extents.items():
        if v in pivots:
            continue
        m = modulus.get(v, 1)
        t = shift.get(v, 0)
        points = -(-(ext - t) // m)
        if points <= 0:
            return None
        new = tirx.Var(f"{v.name}_r" if m > 1 else str(v.name), "int32")
        if points == 1:  # a single point: no reduction axis
            new = tirx.IntImm("int32", 0)
        else:
            reduce.append((new, points))
        renamed[v] = new
        mapping[v] = new * m + t if m > 1 else new
    q = [tirx.Var(str(p.name) if p is not None else f"i{d}", "int32") for d, p in enumerate(pivots)]
    first: list[int] = []
    count: list[int] = []
    guards: list[tuple[Any, int]] = []
    for d, (dim, pivot, m, r) in enumerate(zip(dims, pivots, steps, rho)):
        points = -(-(shape[d] - r) // m) if pivot is not None else (1 if 0 <= r < shape[d] else 0)
        lo, hi = 0, points
        if pivot is not None:
            sign = 1 if dim.coefs[pivot] > 0 else -1
            rest_const = sum(cu * shift.get(u, 0) for u, cu in dim.coefs.items() if u != pivot)
            base = (r - dim.offset - rest_const) // m  # exact: checked above
            # axes split down to one point are constants of the residue (already in base)
            others = [(u, cu) for u, cu in dim.coefs.items() if u != pivot and kind(renamed[u]) == "Var"]
            ext = stage.extents[pivot]
            if not others and pivot not in head_axes:
                # tighten: the pivot sign * (q + first + base) must lie in [0, ext); a pivot of the head's
                # index is kept in range by the head's zero padding instead, so that the taps of a
                # stencil share one domain and make one operator
                if sign > 0:
                    lo, hi = max(lo, -base), min(hi, ext - base)
                else:
                    lo, hi = max(lo, -base - ext + 1), min(hi, -base + 1)
            solved = q[d] + lo + base
            for u, cu in others:
                solved = solved - (cu * modulus.get(u, 1) // m) * renamed[u]
            mapping[pivot] = solved if sign > 0 else tirx.IntImm("int32", 0) - solved
            if others and pivot not in head_axes:
                guards.append((mapping[pivot], ext))
        if hi - lo <= 0:
            return None
        first.append(lo)
        count.append(hi - lo)

    def load(tensor: Any, idx: list[Any]) -> Any:
        return tensor(*idx)

    value = rebuild(grad, mapping, load)
    head_load = head(*[rebuild(h, mapping, load) for h in stage.head])
    value = head_load * value
    for solved, ext in guards:
        zero = tirx.FloatImm(dtype_of(value), 0.0)
        value = tirx.Select(tirx.And(solved >= 0, solved < ext), value, zero)
    return _Term(tuple(steps), tuple(first), tuple(rho), tuple(count), q, reduce, value)


# --- operators from terms -------------------------------------------------------------------------
def _merge(terms: list[_Term]) -> list[list[_Term]]:
    """Terms over the same points with reductions of the same extents become one operator."""
    groups: dict[tuple[Any, ...], list[_Term]] = {}
    for t in terms:
        key = (t.step, t.first, t.residue, t.count, t.radix, tuple(e for _, e in t.reduce))
        groups.setdefault(key, []).append(t)
    return list(groups.values())


def _ranges(expr: Any, bounds: dict[Any, int]) -> tuple[int, int]:
    """[min, max] of an affine integer expression over its variables' ranges [0, bound)."""
    aff = _affine(expr, list(bounds), "an operand")
    lo = aff.offset + sum(c * (bounds[v] - 1) for v, c in aff.coefs.items() if c < 0)
    hi = aff.offset + sum(c * (bounds[v] - 1) for v, c in aff.coefs.items() if c > 0)
    return lo, hi


def _operator(group: list[_Term], name: str, wrt: Any, head: Any) -> tuple[GradientOperator, Any]:
    """(the standalone operator, a builder of the same compute over any operand tensors)."""
    from tvm import te

    first = group[0]
    bounds = {v: c for v, c in zip(first.q, first.count)}
    bounds.update({v: e for v, e in first.reduce})
    # align every term's variables with the first's
    values = []
    for t in group:
        mapping = {v: w for v, w in zip(t.q, first.q)}
        mapping.update({v: w for (v, _), (w, _) in zip(t.reduce, first.reduce)})
        values.append(rebuild(t.value, mapping, lambda tensor, idx: tensor(*idx)))
    pads: dict[Any, tuple[list[int], list[int]]] = {}
    tensors: dict[str, Any] = {}
    for value in values:
        for ld in loads(value):
            tensor, idx = load_parts(ld)
            tensors[str(tensor.op.name)] = tensor
            low, high = pads.setdefault(tensor, ([0] * len(idx), [0] * len(idx)))
            for d, i in enumerate(idx):
                lo, hi = _ranges(i, bounds)
                low[d] = max(low[d], -lo)
                high[d] = max(high[d], hi - (int(tensor.shape[d]) - 1))
    paddings: dict[str, Padding | Gather] = {
        str(t.op.name): Padding(tuple(lo), tuple(hi), zeros=t.same_as(head)) for t, (lo, hi) in pads.items()}
    gathered: dict[str, list[Any]] = {}  # operand -> the variables indexing its compact copy
    for tensor in pads:
        spec = _gather(tensor, values, bounds, paddings[str(tensor.op.name)], head)
        if spec is not None:
            paddings[str(tensor.op.name)], gathered[str(tensor.op.name)] = spec
    value = values[0]
    for v in values[1:]:
        value = value + v

    def build(operands: dict[str, Any], out_name: str) -> Any:
        def fcompute(*qs: Any) -> Any:
            raxes = [te.reduce_axis((0, e), name=str(v.name)) for v, e in first.reduce]
            mapping = {v: w for v, w in zip(first.q, qs)}
            mapping.update({v: r.var for (v, _), r in zip(first.reduce, raxes)})

            def load(tensor: Any, idx: list[Any]) -> Any:
                name = str(tensor.op.name)
                if name in gathered:
                    return operands[name](*[mapping[v] for v in gathered[name]])
                low = paddings[name].low  # type: ignore[union-attr]
                return operands[name](*[i + p if p else i for i, p in zip(idx, low)])

            body = rebuild(value, mapping, load)
            return te.sum(body, axis=raxes) if raxes else body

        return te.compute(first.count, fcompute, name=out_name)

    placeholders = {n: te.placeholder(_prepared_shape(t, paddings[n]), dtype=t.dtype,
                                      name=n + (paddings[n].name_suffix if n in gathered else ""))  # type: ignore
                    for n, t in tensors.items()}
    out = build(placeholders, name)
    formula = _formula(out)
    op = GradientOperator(name=name, wrt=str(wrt.op.name), step=first.step, first=first.first,
                          residue=first.residue, radix=first.radix, tensors=[*placeholders.values(), out],
                          operands=paddings, formula=formula)
    return op, build


def _gather(tensor: Any, values: list[Any], bounds: dict[Any, int], pad: Padding | Gather,
            head: Any) -> tuple[Gather, list[Any]] | None:
    """A compact copy of an operand read at one index whose dimensions are constants or single
    axes with a stride (each axis once), when that index skips elements; None otherwise."""
    if tensor.same_as(head) or not isinstance(pad, Padding) or pad.needed:
        return None
    indices = {show_indices(load_parts(ld)[1]): load_parts(ld)[1] for v in values for ld in loads(v)
               if load_parts(ld)[0].same_as(tensor)}
    if len(indices) != 1:
        return None
    (idx,) = indices.values()
    variables: list[Any] = []
    spec = []
    sparse = False
    for i in idx:
        aff = _affine(i, list(bounds), str(tensor.op.name))
        if len(aff.coefs) > 1:
            return None
        if not aff.coefs:
            spec.append((-1, 0, aff.offset))
            sparse = True
            continue
        ((v, c),) = aff.coefs.items()
        if any(v.same_as(w) for w in variables):
            return None
        spec.append((len(variables), c, aff.offset))
        variables.append(v)
        sparse = sparse or abs(c) != 1
    if not sparse:
        return None
    return Gather(tuple(spec), tuple(bounds[v] for v in variables)), variables


def _prepared_shape(tensor: Any, spec: Padding | Gather) -> tuple[int, ...]:
    if isinstance(spec, Gather):
        return spec.shape
    return tuple(int(s) + lo + hi for s, lo, hi in zip(tensor.shape, spec.low, spec.high))


def _prepare(tensor: Any, spec: Padding | Gather) -> Any:
    """The program's copy of an operand as the operator reads it: padded, or gathered compact."""
    from tvm import te

    if isinstance(spec, Padding):
        return _padded(tensor, spec)
    return te.compute(spec.shape, lambda *j: tensor(*[c * j[p] + o if p >= 0 else o for p, c, o in spec.index]),
                      name=f"{tensor.op.name}{spec.name_suffix}")


def _formula(out: Any) -> str:
    body = out.op.body[0]
    if kind(body) == "Reduce":
        axes = ", ".join(f"{iv.var.name} < {int(iv.dom.extent)}" for iv in body.axis)
        reducer = {"Add": "sum"}.get(kind(body.combiner.result[0]), "reduce")
        return f"{reducer}[{axes}] {show(body.source[0])}"
    return show(body)


def _padded(tensor: Any, pad: Padding) -> Any:
    """The program's padded copy of ``tensor`` (zeros, or the edge repeated)."""
    from tvm import te, tirx

    if not pad.needed:
        return tensor
    shape = [int(s) + lo + hi for s, lo, hi in zip(tensor.shape, pad.low, pad.high)]

    def fcompute(*idx: Any) -> Any:
        inner = [i - lo for i, lo in zip(idx, pad.low)]
        if not pad.zeros:
            return tensor(*[tirx.max(0, tirx.min(i, int(s) - 1)) for i, s in zip(inner, tensor.shape)])
        inside = tirx.all(*[tirx.And(i >= 0, i < int(s)) for i, s in zip(inner, tensor.shape)])
        clamped = [tirx.max(0, tirx.min(i, int(s) - 1)) for i, s in zip(inner, tensor.shape)]
        return tirx.if_then_else(inside, tensor(*clamped), tirx.const(0.0, tensor.dtype))

    return te.compute(shape, fcompute, name=f"{tensor.op.name}_pad")


# one part of a gradient in the program: (step, first, residue, radix, tensor) -- the tensor holds the
# gradient at the points step * (q + first) + residue of each dimension the target is viewed as (radix)
Piece = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...], Any]


def _passes_through(group: list[_Term], head: Any, target: Any) -> bool:
    """The terms are exactly ``head[q]`` over the target's whole shape: its gradient is the head."""
    if len(group) != 1 or group[0].reduce or any(s != 1 for s in group[0].step) or any(group[0].first) \
            or any(group[0].residue) or list(group[0].count) != [int(s) for s in target.shape] \
            or list(head.shape) != list(target.shape):
        return False
    value = group[0].value
    if not is_load(value):
        return False
    tensor, idx = load_parts(value)
    return tensor.same_as(head) and all(i.same_as(q) for i, q in zip(idx, group[0].q))


def _virtual(a: list[Any], radix: tuple[tuple[int, ...], ...]) -> list[Any]:
    """The indices of the dimensions a piece views the target's as (mixed radix: a -> a // n, a % n)."""
    from tvm import tirx

    if not radix:
        return a
    out = []
    for index, sizes in zip(a, radix):
        inner = math.prod(sizes)
        for size in sizes:
            inner //= size
            out.append(index if len(sizes) == 1 else tirx.floormod(tirx.floordiv(index, inner), size))
    return out


def _assemble(target: Any, pieces: list[Piece], name: str) -> Any:
    """The program's gradient of ``target``: the sum of its pieces, each at its own points."""
    from tvm import te, tirx

    shape = [int(s) for s in target.shape]
    dtype = str(target.dtype)
    if len(pieces) == 1:
        step, first, residue, radix, tensor = pieces[0]
        if all(s == 1 for s in step) and not any(first) and not any(residue) \
                and [int(s) for s in tensor.shape] == shape:
            return tensor

    def fcompute(*target_index: Any) -> Any:
        total = tirx.const(0.0, dtype)
        for step, first, residue, radix, tensor in pieces:
            a = _virtual(list(target_index), radix)
            conds, idx = [], []
            for d, (s, f, r) in enumerate(zip(step, first, residue)):
                q = tirx.floordiv(a[d] - r, s) - f if s != 1 else a[d] - r - f
                conds.append(tirx.And(q >= 0, q < int(tensor.shape[d])))
                if s != 1:
                    conds.append(tirx.EQ(tirx.floormod(a[d] - r, s), 0))
                idx.append(q)
            safe = [tirx.max(0, tirx.min(i, int(n) - 1)) for i, n in zip(idx, tensor.shape)]
            total = total + tirx.if_then_else(tirx.all(*conds), tensor(*safe), tirx.const(0.0, dtype))
        return total

    return te.compute(shape, fcompute, name=name)


# --- the whole operator ---------------------------------------------------------------------------
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
    stages = [s for s in _topological(out) if s.same_as(out) or _index_map(s) is None]
    adjoint: dict[Any, Any] = {out.op: head}  # program tensors
    standalone_head: dict[Any, Any] = {out.op: head}
    pieces: dict[Any, list[Piece]] = {}  # target -> the program tensors of its gradient's parts
    operators: list[GradientOperator] = []
    for stage_tensor in reversed(stages):
        if stage_tensor.op not in adjoint:
            contributions = pieces.pop(stage_tensor.op, [])
            if not contributions:
                continue  # nothing downstream depends on it
            adjoint[stage_tensor.op] = _assemble(stage_tensor, contributions, f"grad_{stage_tensor.op.name}")
            standalone_head[stage_tensor.op] = te.placeholder(stage_tensor.shape, dtype=stage_tensor.dtype,
                                                              name=f"grad_{stage_tensor.op.name}")
        stage = _stage(stage_tensor)
        sa_head = standalone_head[stage_tensor.op]
        groups: dict[tuple[Any, str], list[Any]] = {}
        for ld in loads(stage.value):
            tensor, idx = load_parts(ld)
            groups.setdefault((tensor.op, show_indices(idx)), []).append(ld)
        terms_by_target: dict[Any, list[_Term]] = {}
        for (op, key), members in groups.items():
            tensor, index = load_parts(members[0])

            def wrt(e: Any, op: Any = op, key: str = key) -> bool:
                t, i = load_parts(e)
                return t.op.same_as(op) and show_indices(i) == key

            grad = derivative(stage.value, wrt)
            if grad is None:
                continue
            if stage.reducer in ("max", "min"):
                result = stage.tensor(*stage.head)
                grad = tirx.Select(tirx.EQ(stage.value, result), grad, tirx.FloatImm(dtype_of(grad), 0.0))
            # compose through index-only stages down to a placeholder or a differentiated stage
            while not tensor.same_as(out) and _index_map(tensor) is not None:
                source, inner, guard = _index_map(tensor)  # type: ignore[misc]
                axes = {iv.var: i for iv, i in zip(tensor.op.axis, index)}
                if guard is not None:
                    grad = tirx.Select(rebuild(guard, axes, lambda t, i: t(*i)), grad,
                                       tirx.FloatImm(dtype_of(grad), 0.0))
                index = [rebuild(i, axes, lambda t, i: t(*i)) for i in inner]
                tensor = source
            terms_by_target.setdefault(tensor, []).extend(_gather_terms(stage, index, grad, tensor, sa_head))
        for target, terms in terms_by_target.items():
            groups_of_terms = _merge(terms)
            for n, group in enumerate(groups_of_terms):
                suffix = "" if len(groups_of_terms) == 1 else f"_{n}"
                op_name = f"{forward}_grad_{target.op.name}" + (
                    "" if stage_tensor.same_as(out) else f"_via_{stage_tensor.op.name}") + suffix
                if len(groups_of_terms) == 1 and _passes_through(group, sa_head, target):
                    # d target = the head itself (a bias add, a matmul's epilogue): no operator, no copy
                    full = tuple(1 for _ in target.shape), tuple(0 for _ in target.shape)
                    pieces.setdefault(target.op, []).append((*full, full[1], (), adjoint[stage_tensor.op]))
                    continue
                gop, build = _operator(group, op_name, target, sa_head)
                operators.append(gop)
                program_operands = {}
                for operand_name, pad in gop.operands.items():
                    source = adjoint[stage_tensor.op] if operand_name == str(sa_head.op.name) else _by_name(
                        operand_name, stage, inputs)
                    program_operands[operand_name] = _prepare(source, pad)
                pieces.setdefault(target.op, []).append((gop.step, gop.first, gop.residue, gop.radix,
                                                         build(program_operands, op_name)))
    outputs: dict[str, Any] = {}
    for x in inputs:
        contributions = pieces.get(x.op, [])
        if contributions:
            outputs[str(x.op.name)] = _assemble(x, contributions, f"grad_{x.op.name}")
        else:
            zero = tirx.const(0.0, x.dtype)  # an input nothing depends on
            outputs[str(x.op.name)] = te.compute(x.shape, lambda *i, z=zero: z, name=f"grad_{x.op.name}")
    return Gradient(forward=forward, head=head, inputs=inputs, outputs=outputs, operators=operators)


def _by_name(name: str, stage: _Stage, inputs: list[Any]) -> Any:
    """The program tensor an operand name stands for: a forward input or stage output."""
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


def _recompute(t: Any, sources: dict[Any, Any], dtype: str | None = None) -> Any:
    """The compute stage ``t`` again, reading ``sources[input op]`` instead of its inputs (and over
    ``dtype``, when given)."""
    from tvm import te

    stage = t.op
    body = stage.body[0]

    def load(tensor: Any, idx: list[Any]) -> Any:
        return sources[tensor.op](*idx)

    def fcompute(*axes: Any) -> Any:
        mapping = {iv.var: a for iv, a in zip(stage.axis, axes)}
        if kind(body) != "Reduce":
            return rebuild(body, mapping, load, dtype)
        raxes = [te.reduce_axis((0, int(iv.dom.extent)), name=str(iv.var.name)) for iv in body.axis]
        mapping.update({iv.var: r.var for iv, r in zip(body.axis, raxes)})
        value = rebuild(body.source[0], mapping, load, dtype)
        reducer = {"Add": te.sum, "Max": te.max, "Min": te.min}[kind(body.combiner.result[0])]
        return reducer(value, axis=raxes)

    return te.compute(t.shape, fcompute, name=str(stage.name))


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
            new = _recompute(t, {src.op: convert(src) for src in t.op.input_tensors}, dtype)
        made[t.op] = new
        return new

    return [convert(t) for t in tensors]


def program_stages(outputs: Sequence[Any]) -> list[tuple[Any, list[Any], list[Any]]]:
    """The gradient program as one-stage functions, producers first: (the stage's tensor in the
    program, its input tensors in the program, the standalone stage -- placeholders named as its
    inputs, then its output -- for ``te.create_prim_func``). Each derived operator is one of them,
    and so is each memory pass (a padding, a compact copy, an assembly)."""
    from tvm import te

    order: list[Any] = []
    seen: set[Any] = set()
    for out in outputs:
        for t in _topological(out):
            if t.op not in seen:
                seen.add(t.op)
                order.append(t)
    stages = []
    for t in order:
        inputs = list(t.op.input_tensors)
        holders = {src.op: te.placeholder(src.shape, dtype=src.dtype, name=str(src.op.name)) for src in inputs}
        stages.append((t, inputs, [*holders.values(), _recompute(t, holders)]))
    return stages
