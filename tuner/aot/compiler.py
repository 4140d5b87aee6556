"""compile_model: a whole model -> a directory with host.c, slave.c, headers, weights.bin, Makefile.

The caller injects ``lookup(workload) -> config | None`` (the tuning log); ``None`` means untuned and
a GEMM-like kernel (a built-in or an expression operator) falls back to a near record or the
OpenACC-like default schedule (tuner.aot.untuned) with a logged warning naming the workload.
This package never imports service or db.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuner.aot.cpe_ops import CpeMode
from tuner.aot.framework_style import LibraryCalls
from tuner.aot.host import Driver, host_file, model_header
from tuner.aot.kernels import Kernel, Untuned, UntunedSeconds, kernel_header, resolve_kernels, slave_file
from tuner.aot.launch_groups import assign_groups
from tuner.aot.lookup import Lookup
from tuner.aot.makefile import makefile
from tuner.aot.memory import MemoryPlan, plan_memory
from tuner.aot.mpe import describe
from tuner.aot.timing import ModelTime, model_time
from tuner.aot.weights import write_weights
from tuner.ir.graph import AotError, Graph, Node, Note, Where
from tuner.targets import Target, get_target

EMULATOR_DIR = Path(__file__).resolve().parent.parent / "codegen" / "emulator"


@dataclass
class OpRow:
    """One line of the report: a Relax binding and where it runs."""

    source: str
    relax_op: str
    where: Where
    detail: str = ""


@dataclass
class AotResult:
    out_dir: Path
    target: str
    rows: list[OpRow]
    kernels: list[Kernel]
    graph: Graph
    memory: MemoryPlan
    files: list[str] = field(default_factory=list)
    timing: ModelTime | None = None  # simulated end-to-end time, tuned vs baseline program
    cpe_ops: list[Any] = field(default_factory=list)  # the memory-bound and layout kernels (tuner.aot.cpe_ops)

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return [t.shape for t in self.graph.inputs]

    @property
    def output_shapes(self) -> list[tuple[int, ...]]:
        return [t.shape for t in self.graph.outputs]

    def counts(self) -> dict[Where, int]:
        out: dict[Where, int] = {}
        for r in self.rows:
            out[r.where] = out.get(r.where, 0) + 1
        return out

    def format_table(self) -> str:
        w1 = max([len(r.source) for r in self.rows] + [7])
        w2 = max([len(r.relax_op) for r in self.rows] + [2])
        w3 = max([len(r.where) for r in self.rows] + [5])
        lines = [f"{'binding':<{w1}}  {'op':<{w2}}  {'where':<{w3}}  detail"]
        lines += [f"{r.source:<{w1}}  {r.relax_op:<{w2}}  {r.where:<{w3}}  {r.detail}" for r in self.rows]
        return "\n".join(lines)


def to_relax(model: Any, example_inputs: Sequence[Any] | None = None) -> Any:
    """A Relax IRModule from a Relax module, a torch module (with example inputs) or an .onnx path."""
    from tuner.ir.importers import onnx_to_relax, torch_to_relax

    if isinstance(model, (str, Path)):
        if not str(model).endswith(".onnx"):
            raise AotError(f"{model}: expected an .onnx file")
        return onnx_to_relax(model)
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        if example_inputs is None:
            raise AotError("a torch module needs example_inputs (their shapes fix the compiled model)")
        return torch_to_relax(model, example_inputs)
    return model


def _rows(graph: Graph) -> list[OpRow]:
    rows: list[OpRow] = []
    for s in graph.steps:
        if isinstance(s, Note):
            rows.append(OpRow(s.source, s.relax_op, Where(s.where), s.detail))
        elif isinstance(s, Node) and s.op == "cpe":
            op = s.attrs["cpe"]
            how = ("tuned" if getattr(op, "tuned", False) else "untuned") + \
                (f", simd {op.lanes}" if getattr(op, "lanes", 1) > 1 else "")
            detail = f"{op.name}: {op.blocks} blocks of {op.block} along axis {op.axis}, {op.ldm_bytes} B LDM ({how})"
            members = s.attrs.get("members", [s])  # a fused kernel: a row per operator it runs
            fused = f"fused, {len(members)} operators in one kernel: " if len(members) > 1 else ""
            rows += [OpRow(m.source, m.relax_op, Where.CPE_MEMORY_BOUND, fused + detail) for m in members]
        elif isinstance(s, Node) and s.op == "kernel":
            k: Kernel = s.attrs["kernel"]
            where = Where.TUNED_KERNEL if k.tuned else Where.FALLBACK_KERNEL
            detail = f"{k.name} {k.workload.key}" + ("" if k.tuned else f" ({k.status.removeprefix('fallback: ')})")
            if k.epilogue is not None:
                detail += f" + fused {k.epilogue.name}"
            rows.append(OpRow(s.source, s.relax_op, where, detail))
        else:
            assert isinstance(s, Node)
            rows.append(OpRow(s.source, s.relax_op, Where.MPE, describe(s)))
    return rows


def assign_cpe_kernels(graph: Graph, target: Target, first_index: int, mode: CpeMode = CpeMode.FASTER,
                       lookup: Lookup | None = None, fuse: bool = True,
                       calls: LibraryCalls | None = None) -> list[Any]:
    """Move memory-bound operators to the CPEs (tuner.aot.cpe_ops; by default where that is faster),
    at their tuned configs where ``lookup`` has them, consecutive ones of one cut fused into one kernel
    (``fuse``: tuner.aot.cpe_fusion; ``calls``: only within one library call, framework-style);
    number the distinct CPE kernels after the GEMM-like ones."""
    from tuner.aot.cpe_fusion import fuse_runs
    from tuner.aot.cpe_ops import offload
    from tuner.aot.placement import place

    same_call = calls.same_call if calls is not None else None
    offload(graph, target, mode, lookup)
    if fuse:
        fuse_runs(graph, target, same_call)
    if mode == CpeMode.FASTER:  # offload placed every one it could tentatively: keep the least-time placement
        place(graph, target, same_call)
    ops: list[Any] = []
    for n in graph.nodes:
        op = n.attrs.get("cpe") if n.op == "cpe" else None
        if op is not None and all(op is not o for o in ops):
            op.index = first_index + len(ops)
            ops.append(op)
    return ops


def untuned_seconds(graph: Graph, target: Target, mode: CpeMode) -> UntunedSeconds:
    """How a generic node runs untuned (simulated seconds, and whether on the CPEs): its CPE kernel
    when tuner.aot.cpe_ops.offload moves it there (``mode``), else plain C on the MPE. Planned on a
    copy of the node in a one-step graph, so the node itself is untouched; cached per function and
    operand kinds."""
    from tuner.aot.cpe_ops import offload
    from tuner.aot.timing import mpe_seconds

    item = int(np.dtype(graph.dtype).itemsize)
    cache: dict[str, Untuned] = {}

    def seconds(n: Node) -> Untuned:
        what = n.attrs.get("function") or (f"{n.op}:{[t.shape for t in n.inputs]}:{n.attrs.get('axes')}:"
                                            f"{n.attrs.get('pitch')}")
        key = f"{what}:{''.join('c' if t.kind == 'const' else 't' for t in n.inputs)}"
        if key not in cache:
            probe = Node(n.op, list(n.inputs), n.output, dict(n.attrs), n.relax_op, n.source)
            one = Graph(graph.inputs, graph.outputs, [probe], graph.dtype, graph.last_id, graph.functions)
            offload(one, target, mode)
            on_cpe = probe.op == "cpe" and (mode == CpeMode.ALL or Untuned(probe.attrs["cpe"].seconds, True).in_a_run(
                target) < probe.attrs["mpe_alt_s"])
            if probe.op == "cpe" and not on_cpe:
                probe.op = probe.attrs["mpe_op"]
            cache[key] = Untuned(probe.attrs["cpe"].seconds if on_cpe else mpe_seconds(probe, one, target, item),
                                 on_cpe)
        return cache[key]

    return seconds


@dataclass
class LoweredModel:
    """A model's graph after fusion, kernel resolution, CPE offload and launch grouping: what the
    program will run, before any file is written."""

    graph: Graph
    target: Target
    kernels: list[Kernel]
    cpe_ops: list[Any]
    groups: list[Any]

    def timing(self) -> ModelTime:
        """The simulated end-to-end time of this program (and of its baseline counterpart)."""
        configs = {k.workload.key: k.config for k in self.kernels}
        return model_time(self.graph, self.target, lambda w: configs.get(w.key))


def lower_model(mod: Any, target: Target | str, lookup: Lookup | None, *, cpe_mode: CpeMode | str = "faster",
                fuse: bool = True, group_launches: bool = True, fuse_cpe: bool = True,
                framework_style: LibraryCalls | None = None) -> LoweredModel:
    """Read a Relax module and decide everything compile_model emits: fused epilogues, each kernel's
    config (``lookup``; None: the current ``apply_best`` block), CPE kernels (``fuse_cpe``: runs of
    one cut fused) and launch groups. ``framework_style``: the module run one library call at a time
    (tuner.aot.framework_style): no epilogue fused, CPE kernels fused and spawns shared only within
    a call.
    ``swtune compile`` writes the program from it; ``swtune tune-model`` times it."""
    from tuner.ir.cprint.dtypes import ctype
    from tuner.ir.relax_reader import read_relax

    tgt = get_target(target)
    graph = read_relax(mod, tgt)
    if lookup is None:  # inside `with apply_best(...)`: the block's schedules
        from tuner.aot.context import current_lookup

        lookup = current_lookup()
    calls = framework_style  # the library calls of the reference, or None: swtune's own program
    if fuse and calls is None:
        from tuner.aot.fusion import fuse_epilogues

        fuse_epilogues(graph, ctype(graph.dtype))
    kernels = resolve_kernels(graph, tgt, lookup, untuned_seconds(graph, tgt, CpeMode(cpe_mode)),
                              untuned_to_cpe=CpeMode(cpe_mode) != CpeMode.NONE)
    cpe_ops = assign_cpe_kernels(graph, tgt, len(kernels), CpeMode(cpe_mode), lookup, fuse_cpe, calls)
    groups = assign_groups(graph, calls.same_call if calls else None) if group_launches else []
    return LoweredModel(graph, tgt, kernels, cpe_ops, groups)


def compile_model(model: Any, target: Target | str, out_dir: str | Path, lookup: Lookup | None, *,
                  example_inputs: Sequence[Any] | None = None, name: str = "model",
                  cpe_mode: CpeMode | str = "faster", fuse: bool = True, group_launches: bool = True,
                  driver: Driver | None = None, fuse_cpe: bool = True,
                  framework_style: LibraryCalls | None = None) -> AotResult:
    """Compile ``model`` ahead of time for ``target`` into ``out_dir`` (created if needed);
    ``driver`` writes the program's main (default: one inference, tuner.aot.host.inference_main);
    ``cpe_mode`` says which memory-bound operators become CPE kernels (tuner.aot.cpe_ops.CpeMode);
    ``group_launches``: consecutive CPE steps share one spawn (tuner.aot.launch_groups); ``fuse_cpe``:
    consecutive memory-bound CPE steps of one cut run as one kernel (tuner.aot.cpe_fusion);
    ``framework_style``: the reference that runs one library call at a time (tuner.aot.framework_style)."""
    from tuner.codegen.host import SLAVE_API
    from tuner.ir.cprint.dtypes import ctype

    get_target(target).require_one_cg("compile")

    low = lower_model(to_relax(model, example_inputs), target, lookup, cpe_mode=cpe_mode, fuse=fuse,
                      group_launches=group_launches, fuse_cpe=fuse_cpe, framework_style=framework_style)
    graph, tgt, kernels = low.graph, low.target, low.kernels
    ty = ctype(graph.dtype)
    plan = plan_memory(graph)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    layout = write_weights(graph, out / "weights.bin")
    files = {
        "host.c": host_file(graph, kernels, plan, name, tgt.name, ty, driver),
        "slave.c": slave_file(kernels, low.cpe_ops, ty, low.groups),
        "swtune_kernel.h": kernel_header(ty, kernels),
        "swtune_slave_api.h": SLAVE_API,
        "model.h": model_header(graph, layout, plan, name, tgt.name),
        "Makefile": makefile(tgt.name, EMULATOR_DIR),
    }
    for fname, text in files.items():
        (out / fname).write_text(text)
    result = AotResult(out, tgt.name, _rows(graph), kernels, graph, plan, [*files, "weights.bin", "manifest.json"],
                       low.timing(), low.cpe_ops)
    (out / "manifest.json").write_text(json.dumps(_manifest(result, name), indent=1))
    return result


def _manifest(r: AotResult, name: str) -> dict[str, Any]:
    g = r.graph
    return {
        "model": name, "target": r.target, "dtype": g.dtype,
        "inputs": [{"name": t.name, "shape": list(t.shape)} for t in g.inputs],
        "outputs": [{"shape": list(t.shape)} for t in g.outputs],
        "kernels": [{"name": k.name, "workload": k.workload.to_json(), "workload_key": k.workload.key,
                     "config": k.config, "status": k.status, "calls": k.calls,
                     "epilogue": k.epilogue.name if k.epilogue else None} for k in r.kernels],
        "cpe_kernels": [{"name": op.name, "workload": op.workload.to_json(), "workload_key": op.workload.key,
                         "config": op.config, "status": "tuned" if op.tuned else "untuned"}
                        for op in r.cpe_ops if getattr(op, "workload", None) is not None],
        "fused_epilogues": r.counts().get(Where.FUSED_EPILOGUE, 0),
        "steps": [r.__dict__ for r in r.rows],
        "intermediate_bytes": r.memory.total_elems * (4 if g.dtype == "float32" else 8),
        "simulated_time": r.timing.summary() if r.timing else None,
        "time_by_operator": [o.__dict__ for o in r.timing.by_operator()] if r.timing else [],
    }
