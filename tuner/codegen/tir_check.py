"""An independent check of the analysis layer: LDM bytes and DMA requests/bytes per buffer, computed
by walking the lowered TIR of a schedule (its copy nests into and out of ``local.ldm`` buffers).

The walk interprets only the skeleton: the CPE loop, the rounds and chunk loops and the copy nests
(loops without copies -- the compute -- are skipped). Each copy's box is evaluated from its TIR
index expressions and clipped to the tensor; requests follow the block rule (trailing dims the box
covers merge into one block; ``strided`` = one request per index of the dims outside the strided
one, ``rows`` = one per block). A copy is counted for a CPE only when its tile exists; a shared copy
(bcast) once per mesh row (``a``) or column (``b``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from tuner.codegen.boxes import LDM_SCOPE, CopyNest, match_copy
from tuner.codegen.schedule import Scheduled
from tuner.codegen.te_ops import role_group
from tuner.ir.tir import const_int, evaluate_array, free_vars, kind, lower
from tuner.space.choices import Dma, Order, Pack


@dataclass
class TirFigures:
    """Per buffer role (a, b, c; a1, b1... for expressions): LDM bytes of one copy, and DMA requests and
    bytes over the mesh."""

    ldm_bytes: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def group(self, figure: str, group: str) -> int:
        """A figure summed over the roles of one sharing group (what the analysis reports)."""
        values: dict[str, int] = getattr(self, figure)
        return sum(v for r, v in values.items() if role_group(r) == group)


class _Walker:
    def __init__(self, s: Scheduled, func: Any) -> None:
        self.s, self.func = s, func
        self.ds = s.workload.dtype_bytes
        self.fig = TirFigures()
        self.roles: dict[str, str] = {}

        self.put_lines = bool(s.config["put_lines"])
        self.strided = s.config["dma"] == Dma.STRIDED.label
        self.row_var = self.col_var = ""
        self.cpe_var = ""  # the kernel's CPE-id loop variable, set once the loop is found

    # LDM allocations ---------------------------------------------------------------------------
    def allocs(self, node: Any) -> None:
        k = kind(node)
        if k == "AllocBuffer" and node.buffer.scope() == LDM_SCOPE:
            self.roles[node.buffer.name] = self.s.ldm_roles[node.buffer.name]
        for attr in ("body", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if child is not None:
                self.allocs(child)
        if k == "SeqStmt":
            for x in node.seq:
                self.allocs(x)

    def has_copy(self, node: Any) -> bool:
        if match_copy(node, self.roles) is not None:
            return True
        k = kind(node)
        if k == "SeqStmt":
            return any(self.has_copy(x) for x in node.seq)
        return k == "For" and self.has_copy(node.body)

    # skeleton walk ---------------------------------------------------------------------------
    # Every loop of the skeleton is taken whole: its variable becomes a numpy array along a new leading
    # axis (so arrays of the enclosing loops broadcast against it), and a copy nest is counted for all
    # its enclosing iterations at once. Only the CPE loop runs in Python (tir_figures), which bounds
    # the arrays at one CPE's iterations.
    def walk(self, node: Any, env: dict[str, Any], tile: tuple[Any, Any] | None, shape: tuple[int, ...]) -> None:
        k = kind(node)
        if k == "SeqStmt":
            for x in node.seq:
                self.walk(x, env, tile, shape)
            return
        nest = match_copy(node, self.roles)
        if nest is not None:
            self.count(nest, env, tile, shape)
            return
        if k != "For" or not self.has_copy(node) and "swtune.rounds" not in dict(node.annotations):
            return
        ann = dict(node.annotations)
        v, ext = node.loop_var.name, const_int(node.extent)
        rounds = ann.get("swtune.rounds")
        row_first = self.s.config["tile_order"] == Order.ROW.label
        if rounds is not None:
            is_row = (rounds == "outer") == row_first
            if is_row:
                self.row_var = v
            else:
                self.col_var = v
        if ext <= 0:
            return
        env[v] = np.arange(ext).reshape((ext,) + (1,) * len(shape))
        t = tile
        if rounds == "inner":
            cpe = env[self.cpe_var]
            t = (env[self.row_var] * self.s.pr + cpe // self.s.pc, env[self.col_var] * self.s.pc + cpe % self.s.pc)
        self.walk(node.body, env, t, (ext, *shape))
        del env[v]

    def count(self, nest: CopyNest, env: dict[str, Any], tile: tuple[Any, Any] | None, shape: tuple[int, ...]) -> None:
        """Adds the copy's requests and bytes over every iteration (``shape``: the enclosing loops' extents)."""
        s, role = self.s, nest.role
        cpe = env[self.cpe_var]
        ci, cj = cpe // s.pc, cpe % s.pc
        if tile is not None:
            rt, ct = tile
        elif role_group(role) == "a":  # a reused operand fetched in the outer rounds loop
            rt, ct = env[self.row_var] * s.pr + ci, cj
        else:
            rt, ct = ci, env[self.col_var] * s.pc + cj
        # the iterations (of the enclosing loops) at which this CPE makes the copy
        if s.shared(role) and role_group(role) == "a":
            live = (rt < s.rows_total) & (cj == 0)
        elif s.shared(role) and role_group(role) == "b":
            live = (ct < s.cols_total) & (ci == 0)
        elif s.shared(role):
            live = np.bool_(True)
        else:
            live = (rt < s.rows_total) & (ct < s.cols_total)
        live = np.asarray(live)
        if not live.any():
            return
        extents = [const_int(x) for x in nest.mem.shape]
        loop_ext = {lp.loop_var.name: const_int(lp.extent) for lp in nest.loops}
        at_start = {**env, **{n: 0 for n in loop_ext}}
        full: list[int] = []
        lens: list[Any] = []
        for d, idx in enumerate(nest.mem_indices):
            names = [n for n in free_vars(idx) if n in loop_ext]
            e = loop_ext[names[0]] if names else 1
            base = evaluate_array(idx, at_start)
            full.append(e)
            # the box [base, base + e) clipped to the tensor at both ends, as tuner/codegen/boxes.py fetches it
            lens.append(np.maximum(0, np.minimum(base + e, extents[d]) - np.maximum(base, 0)))
        if self.put_lines and role == "c" and full[-1] >= extents[-1]:
            per_line = 128 // self.ds
            lens[-1] = full[-1] = -(-extents[-1] // per_line) * per_line
            extents = extents[:-1] + [full[-1]]
        self.fig.ldm_bytes[role] = prod(full) * self.ds  # the LDM tile the copy nest fills
        kdim = len(full) - 1
        while kdim >= 1 and full[kdim] >= extents[kdim]:
            kdim -= 1
        outer = lens[: max(kdim - 1, 0)] if self.strided else lens[:kdim]
        if role_group(role) == "b" and s.config.get("pack", Pack.NONE.label) == Pack.B.label:
            outer = []  # b stored tile after tile (pack knob): one request per box
        box = _product(lens)
        # an empty box (clipped away at the tensor's edge) is no copy; an iteration a figure does not depend
        # on still counts: broadcast to every iteration of the enclosing loops
        live = np.broadcast_to(live & (box > 0), shape)
        self.fig.requests[role] += int(np.sum(np.where(live, _product(outer), 0)))
        self.fig.bytes[role] += int(np.sum(np.where(live, box, 0))) * self.ds


def _product(values: list[Any]) -> Any:
    """Element-wise product of ints and broadcastable arrays (1 for none)."""
    out: Any = 1
    for v in values:
        out = out * v
    return np.asarray(out)


def tir_figures(s: Scheduled, func: Any | None = None) -> TirFigures:
    """LDM bytes per buffer and DMA requests/bytes per buffer over the mesh, from the lowered TIR."""
    func = func if func is not None else lower(s.sch.mod)
    w = _Walker(s, func)
    w.allocs(func.body)
    cpe_loop = func.body
    while kind(cpe_loop) == "For" and "swtune.cpe" not in dict(cpe_loop.annotations):
        cpe_loop = cpe_loop.body
    w.cpe_var = cpe_loop.loop_var.name
    env: dict[str, Any] = {}
    for cpe in range(const_int(cpe_loop.extent)):
        env[w.cpe_var] = cpe
        w.walk(cpe_loop.body, env, None, ())
    return w.fig


def _ldm_buffers(func: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def go(node: Any) -> None:
        if kind(node) == "AllocBuffer" and node.buffer.scope() == LDM_SCOPE:
            out[node.buffer.name] = node.buffer
        for attr in ("body", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if child is not None:
                go(child)
        if kind(node) == "SeqStmt":
            for x in node.seq:
                go(x)

    go(func.body)
    return out


def compare_with_analysis(s: Scheduled, fig: TirFigures | None = None) -> dict[str, tuple[float, float]]:
    """Mismatches {figure: (tir, analysis)} between the TIR walk and the analysis (empty = agree)."""
    from tuner.space.factory import space_for

    fig = fig if fig is not None else tir_figures(s)
    space = space_for(s.workload, s.target)
    an = space.analyze(space.encode(s.config)[None, :])
    out: dict[str, tuple[float, float]] = {}
    for role in "abc":  # per sharing group: the analysis merges a group's operands (tuner/space/analysis.py _merge)
        plan = getattr(an, role)
        pairs = {f"{role}.ldm_bytes": (fig.group("ldm_bytes", role), float(plan.ldm_bytes[0])),
                 f"{role}.total_requests": (fig.group("requests", role), float(plan.total_requests[0])),
                 f"{role}.total_bytes": (fig.group("bytes", role), float(plan.total_bytes[0]))}
        for key, (t, a) in pairs.items():
            if abs(t - a) > 1e-6 * max(1.0, abs(a)):
                out[key] = (t, a)
    return out
