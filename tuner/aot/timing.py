"""Simulated end-to-end time of a whole compiled model, step by step: the tuned program and the
OpenACC-like baseline program (same graph, every kernel on its baseline schedule).

Kernel steps take the simulator's time of their config (tuner.measure.simulator.simulate: spawn +
join, the busiest CPE, DMA), minus the host-side padding the simulator folds in, which is charged to
the padding step on the MPE instead. MPE steps (legalized operators, layout copies) are costed from
the work their loops do (tuner.ir.cprint.legalized.Work) on the MPE: scalar instructions at
``Target.mpe_cycles_per_op``, a transcendental or a float division at
``Target.mpe_transcendental_cycles``, and never faster than streaming the tensors they touch at the
target's ``mpe_copy_Bps``. These MPE figures are assumptions [A] (tuner/targets.py), not
measurements. Memory-bound operators moved to the CPEs
(tuner.aot.cpe_ops) take their kernel's simulated time. A memory-bound operator that runs its tuned
expression kernel (tuner.aot.kernels) takes that kernel's simulated time, like any kernel. The
baseline program runs the same non-GEMM steps as the tuned one, except that a memory-bound operator
tuned as an expression runs there as it does untuned (its rule-picked CPE blocks or the MPE), not on
the expression space's OpenACC-like schedule; so only tuning moves the baseline ratio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.aot.mpe import mpe_reason
from tuner.ir.graph import Graph, Node
from tuner.targets import Target, get_target

CPE, MPE = "CPE kernel", "MPE"


@dataclass
class StepTime:
    source: str
    relax_op: str
    where: str  # CPE | MPE
    tuned_s: float
    baseline_s: float
    detail: str = ""
    spawned: bool = True  # a CPE step with its own spawn + join (False: a later phase of a shared spawn)
    why: str = ""  # an MPE step's reason to run there (tuner.aot.mpe.mpe_reason)
    untuned: bool = False  # a task's kernel running without its own tuned record (a default, a near record)


@dataclass
class OpShare:
    relax_op: str
    where: str
    calls: int
    seconds: float
    share: float


@dataclass
class ModelTime:
    steps: list[StepTime]
    spawn_join_s: float  # per kernel launch

    @property
    def tuned_s(self) -> float:
        return sum(s.tuned_s for s in self.steps)

    @property
    def baseline_s(self) -> float:
        return sum(s.baseline_s for s in self.steps)

    @property
    def mpe_s(self) -> float:
        return sum(s.tuned_s for s in self.steps if s.where == MPE)

    @property
    def mpe_fraction(self) -> float:
        return self.mpe_s / self.tuned_s if self.tuned_s else 0.0

    @property
    def mpe_steps(self) -> list[StepTime]:
        return [s for s in self.steps if s.where == MPE]

    @property
    def untuned_steps(self) -> list[StepTime]:
        return [s for s in self.steps if s.untuned]

    @property
    def untuned_fraction(self) -> float:
        return sum(s.tuned_s for s in self.untuned_steps) / self.tuned_s if self.tuned_s else 0.0

    def mpe_operators(self) -> list[tuple[str, str, int, float]]:
        """(operator, why it runs on the MPE, calls, seconds) of the MPE steps, most time first."""
        acc: dict[tuple[str, str], list[float]] = {}
        for s in self.mpe_steps:
            e = acc.setdefault((s.relax_op, s.why), [0, 0.0])
            e[0] += 1
            e[1] += s.tuned_s
        return sorted(((op, why, int(n), sec) for (op, why), (n, sec) in acc.items()), key=lambda r: -r[3])

    @property
    def speedup(self) -> float:
        return self.baseline_s / self.tuned_s if self.tuned_s else 1.0

    @property
    def kernel_launches(self) -> int:
        return sum(1 for s in self.steps if s.where == CPE and s.spawned)

    def by_operator(self, program: str = "tuned") -> list[OpShare]:
        """Time per (Relax operator, where), largest share first."""
        total = self.tuned_s if program == "tuned" else self.baseline_s
        acc: dict[tuple[str, str], list[float]] = {}
        for s in self.steps:
            t = s.tuned_s if program == "tuned" else s.baseline_s
            e = acc.setdefault((s.relax_op, s.where), [0, 0.0])
            e[0] += 1
            e[1] += t
        rows = [OpShare(op, where, int(n), sec, sec / total if total else 0.0) for (op, where), (n, sec) in acc.items()]
        return sorted(rows, key=lambda r: -r.seconds)

    def summary(self) -> dict[str, Any]:
        return {"tuned_ms": self.tuned_s * 1e3, "baseline_ms": self.baseline_s * 1e3,
                "mpe_ms": self.mpe_s * 1e3, "mpe_time_fraction": self.mpe_fraction,
                "mpe_steps": len(self.mpe_steps), "untuned_steps": len(self.untuned_steps),
                "untuned_time_fraction": self.untuned_fraction,
                "speedup_vs_baseline": self.speedup, "kernel_launches": self.kernel_launches,
                "spawn_join_ms": self.kernel_launches * self.spawn_join_s * 1e3}


def _mpe_seconds(target: Target, cycles: float, nbytes: float) -> float:
    return max(cycles / target.mpe_clock_hz, nbytes / target.mpe_copy_Bps)


def mpe_seconds(n: Node, graph: Graph, target: Target, item: int) -> float:
    """Simulated seconds of a step run as plain C on the MPE."""
    return _mpe_step(n, graph, target, item)[0]


def _mpe_step(n: Node, graph: Graph, target: Target, item: int) -> tuple[float, str]:
    if n.op in ("tir", "cpe"):
        work = graph.functions[n.attrs["function"]].work
        cycles = (target.mpe_cycles_per_op * (work.arith + work.loads + work.stores)
                  + target.mpe_transcendental_cycles * work.transcendental)
        touched = sum(t.size for t in [*n.inputs, *n.outputs]) * item
        return _mpe_seconds(target, cycles, touched), f"{work.stores} stores, {work.transcendental} transcendental"
    size = n.output.size
    moved = (sum(t.size for t in n.inputs) + size) * item
    if n.op == "pad_nchw":  # memset + row memcpy: streaming
        return (size * item + moved) / target.mpe_copy_Bps, "zero-pad (memset + row copies)"
    return _mpe_seconds(target, target.mpe_cycles_per_op * size, moved), n.op


def kernel_seconds(space: Any, configs: list[dict[str, Any]]) -> tuple[Any, Any]:
    """(simulated seconds of the kernel under each config, host-side seconds folded into them).

    The host-side work the simulator folds into a kernel's time is a step of its own in the program
    (padding the input: nn.pad; packing a non-constant b: pack_b), so it is taken out here."""
    import numpy as np

    from tuner.measure.simulator import simulate

    tgt = space.target
    index = np.stack([space.encode(dict(c)) for c in configs])
    a = space.analyze(index)
    packs = np.zeros(len(configs)) if a.host_pack_bytes is None else np.asarray(a.host_pack_bytes, float)
    prepass = (space.geometry.prepass_bytes + packs) / tgt.mpe_copy_Bps
    return simulate(space, index, a) - prepass, prepass


def model_time(graph: Graph, target: Target | str, config_of: Callable[[Any], dict[str, Any] | None]
               ) -> ModelTime:
    """Per-step simulated times of ``graph`` (kernel nodes carry ``workload``); ``config_of(workload)``
    gives the tuned program's config of a kernel (None: the baseline schedule, as compile falls back)."""
    import numpy as np

    from tuner.baseline import openacc_baseline
    from tuner.space.factory import space_for

    tgt = get_target(target)
    item = int(np.dtype(graph.dtype).itemsize)
    # workload key -> (tuned s, baseline s, prepass s, tuned split over CGs, baseline split over CGs)
    cache: dict[str, tuple[float, float, float, bool, bool]] = {}

    def kernel(w: Any) -> tuple[float, float, float, bool, bool]:
        if w.key not in cache:
            space = space_for(w, tgt)
            base = openacc_baseline(space)
            config = config_of(w) or base
            times, prepass = kernel_seconds(space, [config, base])
            cache[w.key] = (float(times[0]), float(times[1]), float(prepass[0]), config.get("cgs", 1) > 1,
                            base.get("cgs", 1) > 1)
        return cache[w.key]

    from tuner.aot.launch_groups import phase_seconds

    steps: list[StepTime] = []
    for n in graph.nodes:
        if n.op in ("kernel", "cpe") and n.attrs.get("phase", 0) > 0:
            n_steps = len(steps)
        else:
            n_steps = -1
        tuned_split = base_split = False  # this step's kernel is split over core groups, in each program
        if n.op == "kernel":
            w = n.attrs["workload"]
            t, b, _, tuned_split, base_split = kernel(w)
            ep = n.attrs.get("epilogue")
            if ep is not None:  # its scalar work on each CPE's share of the output (no extra DMA)
                per_elem = ep.work.arith + tgt.cpe_transcendental_cycles * ep.work.transcendental
                extra = -(-n.output.size // tgt.cpes) * per_elem / tgt.clock_hz
                from tuner.measure.simulator import dma_time

                # per-channel vectors: fetched at the kernel's start, overlapping its compute
                extra += max(0.0, sum(dma_time(tgt, "get", v * item) for v in ep.vectors) - (t - tgt.spawn_join_s))
                t, b = t + extra, b + extra
            if "untuned_s" in n.attrs:  # a memory-bound operator's tuned expression kernel: the baseline
                b = n.attrs["untuned_s"]  # program runs its untuned lowering (rule-picked CPE blocks or MPE)
            k = n.attrs.get("kernel")
            steps.append(StepTime(n.source, n.relax_op, CPE, t, b, w.key + (f" + {ep.name}" if ep else ""),
                                  untuned=k is not None and not k.tuned))
        elif n.op == "cpe":  # a memory-bound operator as a CPE kernel (tuner.aot.cpe_ops), same in both programs
            op = n.attrs["cpe"]
            task = getattr(op, "workload", None) is not None  # a CPE kernel task (not a layout copy)
            steps.append(StepTime(n.source, n.relax_op, CPE, op.seconds, op.seconds,
                                  f"{op.blocks} blocks of {op.block} along axis {op.axis}",
                                  untuned=task and not getattr(op, "tuned", False)))
            # blocks spread over several CGs' CPEs (tuner/space/cpe/schedule.py)
            tuned_split = base_split = getattr(op, "active", 0) > tgt.cpes
        else:
            sec, detail = _mpe_step(n, graph, tgt, item)
            steps.append(StepTime(n.source, n.relax_op, MPE, sec, sec, detail, why=mpe_reason(n)))
        if n_steps >= 0:
            s = steps[n_steps]
            # a later phase of a shared spawn: a barrier instead of a spawn + join
            s.tuned_s += phase_seconds(tgt, tuned_split)
            if n.attrs.get("untuned_on_cpe", True):  # the baseline runs it on the CPEs too, sharing the spawn
                s.baseline_s += phase_seconds(tgt, base_split)
            s.detail += f" (phase {n.attrs['phase']} of {n.attrs['group'].name})"
            s.spawned = False
    return ModelTime(steps, tgt.spawn_join_s)


def format_table(mt: ModelTime, limit: int = 20) -> list[tuple[str, ...]]:
    """Rows (op, where, calls, tuned ms, share, baseline ms, share) sorted by tuned time share."""
    base = {(r.relax_op, r.where): r for r in mt.by_operator("baseline")}
    rows: list[tuple[str, ...]] = []
    for r in mt.by_operator("tuned")[:limit]:
        b = base[(r.relax_op, r.where)]
        rows.append((r.relax_op, r.where, str(r.calls), f"{r.seconds * 1e3:.3f}", f"{r.share:.1%}",
                     f"{b.seconds * 1e3:.3f}", f"{b.share:.1%}"))
    return rows
