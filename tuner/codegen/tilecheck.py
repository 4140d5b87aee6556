"""A tile-level execution check of an expression's geometry (no generated C): boxes and DMA requests.

For one config it walks every (row tile, col tile, reduction tile) the schedule would execute,
fetches each operand's box exactly as a TVM ``cache_read`` region of that tile would be (the full
tile's box, started at the tile's lowest index and clipped to the tensor), evaluates the expression
for the tile *only from those boxes* (numpy, from the PrimFunc's body) and compares the assembled
output with a reference run of the whole, unscheduled PrimFunc built by TVM for llvm. A box missing
an element the tile reads is a wrong result. Every fetch's DMA requests are counted from its actual
box (block rule of tuner/space/analysis.py: trailing dims the LDM box covers merge into one block;
``strided`` = one request per index outside the strided dim, ``rows`` = one per block), with the
sharing and reuse multiplicities of the schedule, and compared with the analysis totals.

Sharing follows the schedule's rule and is checked for soundness only: a column that shares a box
must read one box (the rule may pass up a column whose row tiles happen to agree).
What this does not check: athread C generated from the expression and its run on swemu (there is no
codegen for expression operators yet), nor the analysis' per-CPE and timing figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from tuner.ir import llvm
from tuner.space.choices import Dma, Order, Pack, Share
from tuner.space.expr_geometry import PAD_AXIS, ExprGeometry
from tuner.space.expr_space import ExprSpace
from tuner.space.ops import axis_tiles

_NP_DTYPES = {"float32": np.float32, "float64": np.float64}


class MissingData(Exception):
    """A tile reads an element its operand's LDM box does not hold."""


@dataclass
class CheckSummary:
    configs_checked: int = 0
    wrong_results: int = 0
    dma_count_mismatches: int = 0
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"configs_checked": self.configs_checked, "wrong_results": self.wrong_results,
                "dma_count_mismatches": self.dma_count_mismatches, "problems": self.problems[:10]}


class _Body:
    """The compute sblock's value as a numpy evaluator over an index domain."""

    def __init__(self, func: Any) -> None:
        from tuner.expr.parse import compute_block

        block = compute_block(func)
        self.var_names = {str(iv.var.name): str(iv.var.name).removeprefix("v_") for iv in block.iter_vars}
        value = block.body.value
        out = str(block.writes[0].source.name)
        reduced = bool(len(block.iter_vars) and any(int(iv.iter_type) == 2 for iv in block.iter_vars))
        if reduced:  # C = C (+|max|min) f: keep f
            a, b = value.a, value.b
            value = b if _load_name(a) == out else a
        self.value = value

    def eval(self, node: Any, env: dict[str, np.ndarray], boxes: dict[str, tuple[np.ndarray, np.ndarray]]) -> Any:
        kind = type(node).__name__
        if kind in ("FloatImm", "IntImm"):
            return node.value
        if kind == "Var":
            return env[self.var_names[str(node.name)]]
        if kind == "Cast":
            return self.eval(node.value, env, boxes)
        name = _load_name(node)
        if name is not None:
            data, start = boxes[name]
            idx = []
            for d, ix in enumerate(node.indices):
                rel = np.asarray(self.eval(ix, env, boxes)) - start[d]
                if (rel < 0).any() or (rel >= data.shape[d]).any():
                    raise MissingData(f"{name} dim {d} outside the tile's box")
                idx.append(rel)
            return data[tuple(idx)]
        ops = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
               "Max": np.maximum, "Min": np.minimum}
        if kind in ops:
            return ops[kind](self.eval(node.a, env, boxes), self.eval(node.b, env, boxes))
        if kind == "Call":
            from tuner.expr.intrinsics import NUMPY

            return NUMPY[str(node.op.name)](*(self.eval(a, env, boxes) for a in node.args))
        raise NotImplementedError(f"tile check cannot evaluate {kind}")


def _load_name(node: Any) -> str | None:
    """The tensor a load reads (``TensorLoad`` in this TVM, ``BufferLoad`` in others), else None."""
    kind = type(node).__name__
    if kind == "TensorLoad":
        return str(node.source.name)
    if kind == "BufferLoad":
        return str(node.buffer.name)
    return None


def _requests(lengths: list[int], full: list[int], shape: list[int], strided: bool) -> int:
    """Requests of one box fetch: the LDM box's coverage decides the merged block (as the analysis)."""
    n = len(lengths)
    first_in_block = n - 1
    while first_in_block > 0 and full[first_in_block] >= shape[first_in_block]:
        first_in_block -= 1
    outside = lengths[:first_in_block]
    if not strided:
        return prod(outside)
    return prod(outside[:-1]) if outside else 1


class TileChecker:
    """Checks configs of one expression space against a TVM llvm reference run."""

    def __init__(self, space: ExprSpace, seed: int = 0) -> None:

        from tuner.expr.parse import prim_func_from_script

        self.space = space
        self.geo: ExprGeometry = space.geometry
        func = prim_func_from_script(space.workload.script)
        self.body = _Body(func)
        dt = _NP_DTYPES[space.workload.dtype]
        rng = np.random.default_rng(seed)
        self.inputs = {acc.tensor: rng.standard_normal(acc.shape).astype(dt) for acc in self.geo.expr.inputs}
        names = [str(p.name) for p in func.params]
        (self.reference,) = llvm.run(func, [self.inputs[n] for n in names[:-1]],
                                     [(self.geo.expr.output.shape, space.workload.dtype)])

    def steps(self, config: dict[str, Any]) -> int:
        """(output tile, reduction tile) pairs the config executes (the check's cost)."""
        return prod(-(-a.extent // min(int(config[f"tile_{a.name}"]), a.extent)) for a in self.geo.axes)

    def check(self, config: dict[str, Any]) -> tuple[bool, bool, str]:
        """(result right, DMA counts match, what went wrong)."""
        geo, space = self.geo, self.space
        expr = geo.expr
        tiles = {a.name: min(int(config[f"tile_{a.name}"]), a.extent) for a in geo.axes}
        extents = {a.name: a.extent for a in geo.axes} | geo.fixed
        counts = {a: -(-extents[a] // tiles[a]) for a in tiles}
        pr, pc = (int(x) for x in config["grid"].split("x"))
        rows_total = prod(counts[a] for a in geo.row_axes)
        cols_total = prod(counts[a] for a in geo.col_axes)
        red = geo.red_axis.name
        k_tiles = counts[red]
        analysis = space.analyze(space.encode(config)[None, :])
        share = int(analysis.share_mode[0]) != Share.NONE
        row_coords = list(itertools.product(*(range(counts[a]) for a in geo.row_axes)))

        def column_agrees(op: Any) -> bool:
            # the pr row tiles a mesh column holds in one round must read one box of the operand
            keep = [geo.row_axes.index(r) for r in op.row_axes]
            groups = [row_coords[i:i + pr] for i in range(0, len(row_coords), pr)]
            return all(len({tuple(c[j] for j in keep) for c in g}) == 1 for g in groups)

        # Sharing follows the schedule's rule (geometry.shareable, conservative: it may miss a column
        # whose row tiles happen to agree); what is checked is that it is sound -- every column that
        # shares a box really reads one box.
        t = {a.name: axis_tiles(a.extent, np.array([float(tiles[a.name])])) for a in geo.axes}
        a_shared = share and pc > 1 and bool(geo.group("a"))
        b_rule = all(bool(geo.shareable(op, t, np.array([float(pr)]))[0]) for op in geo.group("b"))
        b_shared = share and pr > 1 and bool(geo.group("b")) and b_rule
        if b_shared and not all(column_agrees(op) for op in geo.group("b")):
            return False, True, "a shared box differs between the CPEs of a mesh column"
        row_order = config["tile_order"] == Order.ROW.label
        strided = config["dma"] == Dma.STRIDED.label
        packed = config.get("pack", Pack.NONE.label) == Pack.B.label
        # Multiplicity of one (tile, k tile) fetch over the mesh, as the schedule walks it.
        col_rounds, row_rounds = -(-cols_total // pc), -(-rows_total // pr)

        def full_box(acc: Any) -> list[int]:
            out = []
            for d, extent in zip(acc.dims, acc.shape):
                n = d.span + sum(abs(c) * (tiles.get(a, extents[a]) - 1) for a, c in d.coefs)
                out.append(min(n, extent))
            return out

        fulls = {acc.tensor: full_box(acc) for acc in expr.inputs}
        out_full = full_box(expr.output)
        result = np.full(expr.output.shape, np.nan, dtype=self.reference.dtype)
        requests = {"a": 0.0, "b": 0.0, "c": 0.0}
        ranges = {a: [(i * tiles[a], min((i + 1) * tiles[a], extents[a])) for i in range(counts[a])] for a in tiles}
        row_tiles = list(itertools.product(*(ranges[a] for a in geo.row_axes)))
        col_tiles = list(itertools.product(*(ranges[a] for a in geo.col_axes)))
        fixed_ranges = {a: (0, e) for a, e in geo.fixed.items()}
        reuse = {op.access.tensor: k_tiles == 1 and (row_order if op.group == "a" else not row_order)
                 and (op.group == "a" or prod(counts[r] for r in op.row_axes) == 1) for op in geo.operands}
        try:
            for rt in row_tiles:
                for ct in col_tiles:
                    span = dict(zip(geo.row_axes, rt)) | dict(zip(geo.col_axes, ct))
                    acc_tile = None
                    for kt in ranges[red]:
                        span_k = span | ({red: kt} if red != PAD_AXIS else {}) | fixed_ranges
                        boxes = {}
                        for op in geo.operands:
                            acc = op.access
                            start, lengths = [], []
                            for d, extent, full in zip(acc.dims, acc.shape, fulls[acc.tensor]):
                                lo = d.offset + sum(c * (span_k[a][0] if c > 0 else span_k[a][1] - 1)
                                                    for a, c in d.coefs)
                                start.append(lo)
                                lengths.append(min(full, extent - lo))
                            sl = tuple(slice(s, s + n) for s, n in zip(start, lengths))
                            boxes[acc.tensor] = (self.inputs[acc.tensor][sl], np.array(start))
                            # pack="b": a b operand is stored tile after tile, one request per box
                            per_box = (1 if packed and op.group == "b" else
                                       _requests(lengths, fulls[acc.tensor], list(acc.shape), strided))
                            requests[op.group] += per_box * \
                                self._multiplicity(op, reuse[acc.tensor], a_shared, b_shared, rt, ct, kt,
                                                   row_tiles, col_tiles, pr, pc, col_rounds, row_rounds)
                        axes = [a.name for a in expr.axes]
                        grids = np.meshgrid(*[np.arange(*span_k[a]) for a in axes], indexing="ij")
                        env = dict(zip(axes, grids))
                        vals = np.broadcast_to(self.body.eval(self.body.value, env, boxes), grids[0].shape)
                        red_dims = tuple(i for i, a in enumerate(expr.axes) if a.kind.value == "reduce")
                        part = _reduce(expr.reducer.value, vals, red_dims)
                        acc_tile = part if acc_tile is None else _combine(expr.reducer.value, acc_tile, part)
                    out_sl = tuple(slice(*span[a.name]) for a in expr.spatial)
                    result[out_sl] = acc_tile
                    lengths = [min(f, e - span[a.name][0])
                               for f, e, a in zip(out_full, expr.output.shape, expr.spatial)]
                    requests["c"] += _requests(lengths, out_full, list(expr.output.shape), strided)
        except MissingData as exc:
            return False, True, str(exc)
        tol = 1e-4 if self.reference.dtype == np.float32 else 1e-10
        atol = tol * max(1.0, float(np.abs(self.reference).max()))
        right = bool(np.allclose(result, self.reference, rtol=tol, atol=atol))
        want = {"a": float(analysis.a.total_requests[0]), "b": float(analysis.b.total_requests[0]),
                "c": float(analysis.c.total_requests[0])}
        dma_ok = all(abs(requests[g] - want[g]) <= 1e-6 * max(1.0, want[g]) for g in want)
        detail = "" if dma_ok else f"requests counted {requests}, analysis {want}"
        return right, dma_ok, detail if right else "output differs from the reference " + detail

    @staticmethod
    def _multiplicity(op: Any, reuse: bool, a_shared: bool, b_shared: bool, rt: Any, ct: Any, kt: Any,
                      row_tiles: list, col_tiles: list, pr: int, pc: int, col_rounds: int, row_rounds: int) -> float:
        """How many times the mesh fetches this (row tile, col tile, k tile) box of the operand.

        The walk visits every (row tile, col tile, k tile); the count is spread so that the sums are
        the schedule's fetches: unshared unreused ops fetch at every visit; reused ones once per
        row (col) tile per CPE column (row) holding col (row) tiles; shared ones once per round.
        """
        first_k = kt[0] == 0
        if op.group == "a":
            n_other = len(col_tiles)
            if a_shared:
                return (1.0 if first_k else 0.0) / n_other if reuse else col_rounds / n_other
            return min(pc, n_other) / n_other if reuse and first_k else (0.0 if reuse else 1.0)
        n_other = len(row_tiles)
        if b_shared:
            return (1.0 if first_k else 0.0) / n_other if reuse else row_rounds / n_other
        return min(pr, n_other) / n_other if reuse and first_k else (0.0 if reuse else 1.0)


_REDUCERS: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min}


def _reduce(kind: str, vals: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if not dims:
        return vals
    return _REDUCERS[kind](vals, axis=dims)


def _combine(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind](a, b)


def check_space(space: ExprSpace, n_configs: int, seed: int = 0, max_steps: int = 1500) -> CheckSummary:
    """Check ``n_configs`` random valid configs of at most ``max_steps`` (tile, k tile) steps each."""
    checker = TileChecker(space, seed)
    summary = CheckSummary()
    rng = np.random.default_rng(seed)
    tried = 0
    while summary.configs_checked < n_configs and tried < 50:
        tried += 1
        for row in space.sample(4 * n_configs, rng):
            if summary.configs_checked >= n_configs:
                break
            config = space.decode(row)
            if checker.steps(config) > max_steps:
                continue
            right, dma_ok, detail = checker.check(config)
            summary.configs_checked += 1
            summary.wrong_results += not right
            summary.dma_count_mismatches += not dma_ok
            if detail:
                summary.problems.append(f"{config}: {detail}")
    return summary
