"""Task extraction: a PyTorch module or an ONNX file -> swtune workloads with their weights.

The model is imported into TVM Relax (torch.export -> ``from_exported_program``, or
``relax.frontend.onnx.from_onnx``) and every operator call of the main function is read back:
conv2d (NCHW/OIHW, any stride, padding, dilation, groups), matmul/linear of any rank (dense or
batch_matmul where a reshape is free: tuner.ir.relax_ops.matmul_geometry) become workloads; identical
workloads are merged and counted (their weight). An operator no built-in reader takes (conv1d, conv3d,
a matmul that broadcasts an operand across batch dims, an einsum...) is legalized to its
PrimFunc and, when that is one GEMM-like stage -- a reduction over a product of two or more inputs,
with at least one spatial axis --, becomes an expression operator (tuner/expr, ``ExprWorkload``), so a
model's novel operators are tuned instead of falling back.

Memory-bound operators are expression tasks too (``Routing.MEMORY_BOUND``): an operator whose
legalized PrimFunc is one compute block the expression path takes -- element-wise unary or binary
(broadcast operands included), a single-input reduction (sum, max, max pooling without padding), a
layout copy (transpose) -- is a task in the form the AOT compiler builds the model: read by its reader
(tuner.ir.relax_reader), epilogues fused into their producer (those are no task of their own),
constants folded. Multi-block PrimFuncs (softmax, layer_norm, mean, padded pools, gelu, ...) are not
expressions: those the compiler runs block by block on the CPEs are CPE kernel tasks
(tuner.kinds.cpe_kernel, ``CpeKernelWorkload``); the rest stay listed in ``untuned`` with their count: nothing is
dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.ir.importers import onnx_to_relax as onnx_to_relax  # the bridge's public API too
from tuner.ir.importers import require
from tuner.ir.importers import torch_to_relax as torch_to_relax
from tuner.ir.relax_ops import READERS, Routing, expression_workload
from tuner.models.zoo import Layer
from tuner.targets import Target
from tuner.task_kind import kind_of
from tuner.workloads import Workload, with_epilogue

# Relax ops that are bookkeeping, not computation worth listing as "untuned".
_FREE_OPS = {"relax.reshape", "relax.permute_dims", "relax.flatten", "relax.squeeze", "relax.expand_dims",
             "relax.shape_of", "relax.shape_to_tensor"}


@dataclass
class ExtractedModel:
    layers: list[Layer]
    untuned: dict[str, int] = field(default_factory=dict)  # op name -> occurrences

    @property
    def workloads(self) -> list[Workload]:
        return [layer.workload for layer in self.layers]


def memory_bound(wl: Workload) -> bool:
    """Whether a task moves more than it computes (an element-wise or single-input expression
    operator, a memory-bound CPE kernel): its kind says."""
    return kind_of(wl).memory_bound(wl)


# A memory-bound task adds this share of the per-task trials to a model's one budget (at least
# MEMORY_BOUND_MIN_TRIALS): its space is one operand group and no reduction chunking, and its time
# share is small; on a [1, 64, 56, 56] relu, add, 2x2 max pool and spatial sum, 16 trials came within
# 0-30% of 64 trials (a sum reached its best at 16), where GEMM-like tasks keep improving.
MEMORY_BOUND_TRIAL_SHARE = 0.25
MEMORY_BOUND_MIN_TRIALS = 8


def trial_budget(layers: Sequence[Layer], trials: int) -> int:
    """A model's one trial budget: ``trials`` per GEMM-like task, a share of it per memory-bound task."""
    small = max(MEMORY_BOUND_MIN_TRIALS, round(trials * MEMORY_BOUND_TRIAL_SHARE))
    return sum(min(trials, small) if memory_bound(layer.workload) else trials for layer in layers)


class _Legalized:
    """The module's PrimFuncs by the name of the binding that calls them (legalized once, on demand)."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        self._funcs: dict[str, tuple[Any, str]] | None = None

    def func(self, var_name: str) -> tuple[Any, str] | None:
        """(PrimFunc, its name) of the binding ``var_name``, or None when it calls no PrimFunc."""
        if self._funcs is None:
            from tvm import relax

            from tuner.ir.legalizations import register

            register()  # cumsum and the other operators this TVM does not legalize itself
            legal = relax.transform.LegalizeOps()(self.mod)
            funcs: dict[str, tuple[Any, str]] = {}
            for block in legal["main"].body.blocks:
                for binding in block.bindings:
                    call = binding.value
                    if isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.call_tir":
                        funcs[str(binding.var.name)] = (legal[call.args[0]], str(call.args[0].name_hint))
            self._funcs = funcs
        return self._funcs.get(var_name)


def extract_relax(mod: Any, reductions: bool = False, fused: bool = True,
                  target: Target | str = "sw26010") -> ExtractedModel:
    """Workloads of a Relax IRModule's main function (before legalization); ``fused``: in the form
    the compiler builds them for ``target`` (an epilogue that is part of the workload gives a task of its
    own, an element-wise operator fused into its producer none; a group norm in the steps its LDM
    splits it into). Memory-bound expression tasks come from the compiled graph; ``reductions``: when
    the compiler cannot read the model, single-input reductions are still taken from the Relax calls,
    like the GEMM-like operators."""
    from tvm import relax

    from tuner.ir.relax_reader import reader_form
    from tuner.space.cpe.task import has_kernel_task

    # the bindings the compiler reads, so each binding below finds the tasks the compiled graph routed
    # to it by name
    mod = reader_form(mod)
    legal = _Legalized(mod)
    graph = _compiled_graph(mod, fused, target)
    # memory-bound operators as the compiler builds them: binding name -> their expression or CPE kernel tasks
    routed: dict[str, list[Workload]] = {}
    for n in graph.nodes if graph is not None else []:
        w = n.attrs.get("expr_workload")
        if w is not None and memory_bound(w):
            routed.setdefault(n.source, []).append(w)
        elif has_kernel_task(n):
            kernel = _cpe_kernel(n, graph, target)
            if kernel is not None:
                routed.setdefault(n.source, []).append(kernel)
    counts: Counter[str] = Counter()
    by_key: dict[str, Workload] = {}
    names: dict[str, str] = {}
    untuned: Counter[str] = Counter()

    def add(workload: Workload) -> None:
        counts[workload.key] += 1
        if workload.key not in by_key:
            by_key[workload.key] = workload
            names[workload.key] = f"{getattr(workload, 'name', workload.op)}_{len(by_key) - 1}"

    routing = Routing.REDUCTIONS if reductions else Routing.GEMM_LIKE
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            call = binding.value
            if not isinstance(call, relax.Call) or not hasattr(call.op, "name"):
                continue
            op, var = str(call.op.name), str(binding.var.name)
            reader = READERS.get(op)
            workload: Workload | None = None
            why = ""
            if reader is not None:
                try:
                    workload = reader(call)
                except InvalidWorkloadError as exc:
                    why = f" ({exc})"
            if workload is None and var in routed:
                for w in routed.pop(var):
                    add(w)
                continue
            if op in _FREE_OPS:
                continue
            if workload is None:
                found = legal.func(var)
                try:
                    if found is None:
                        raise InvalidWorkloadError("no PrimFunc")
                    workload = expression_workload(found[0], found[1], routing)
                except InvalidWorkloadError:
                    untuned[op.removeprefix("relax.") + why] += 1
                    continue
            add(workload)
    for extra in routed.values():  # the compiler's own steps under a binding (a matmul's transposed b)
        for w in extra:
            add(w)
    layers = [Layer(names[k], by_key[k], counts[k]) for k in by_key]
    if fused and graph is not None:
        layers = _fused_forms(graph, layers)
    return ExtractedModel(layers, dict(untuned))


def _cpe_kernel(n: Any, graph: Any, target: Target | str) -> Workload | None:
    """The CPE kernel task of a multi-block generic node (tuner.space.cpe.task), when it cuts into
    blocks on ``target`` (the one its graph is built for; the space checks its plans again)."""
    from tuner.errors import SwtuneError
    from tuner.space.cpe.task import kernel_workload, workload_plans

    try:
        wl = kernel_workload(n, graph.dtype)
        return wl if wl is not None and workload_plans(wl, target) else None
    except (SwtuneError, ValueError, TypeError):  # no task: the operator stays on the compile-time path
        return None


def _compiled_graph(mod: Any, fused: bool, target: Target | str) -> Any:
    """The graph the ahead-of-time compiler builds (epilogues fused when ``fused``), or None when it
    cannot read the model (its built-in and GEMM-like tasks are still listed)."""
    from tuner.aot.fusion import fuse_epilogues
    from tuner.ir.cprint.dtypes import ctype
    from tuner.ir.graph import AotError
    from tuner.ir.relax_reader import read_relax

    try:
        graph = read_relax(mod, target)
        if fused:
            fuse_epilogues(graph, ctype(graph.dtype))
    except AotError:
        return None
    return graph


def _fused_forms(graph: Any, layers: list[Layer]) -> list[Layer]:
    """Split each layer by the form the ahead-of-time compiler builds it in: where an epilogue that is
    part of the workload (a residual add, tuner/space/epilogue.py) fuses into some of its calls, those
    calls are a task of their own under the fused workload's key, so `compile` finds them tuned."""
    from tuner.aot.fusion import producer_workload

    built: Counter[str] = Counter()
    fused: dict[str, list[Workload]] = {}
    for n in graph.nodes:
        if n.op == "kernel" or "unfused" in n.attrs:  # a kernel, or an expression that took an epilogue
            w = producer_workload(n)
            built[w.key] += 1
            if getattr(w, "epilogue", "none") != "none":
                fused.setdefault(with_epilogue(w, "none").key, []).append(w)
    out: list[Layer] = []
    for layer in layers:
        forms = fused.get(layer.workload.key, [])
        plain = layer.weight - len(forms)
        if not forms or plain < 0:
            out.append(layer)
            continue
        if plain:
            out.append(Layer(layer.name, layer.workload, plain))
        for w in {f.key: f for f in forms}.values():
            out.append(Layer(f"{layer.name}_{getattr(w, 'epilogue', '')}", w, built[w.key]))
    return out


def extract_torch(module: Any, example_inputs: Sequence[Any]) -> ExtractedModel:
    """Tasks of a PyTorch module for the given example inputs (their shapes fix the workloads)."""
    return extract_relax(torch_to_relax(module, example_inputs))


def extract_onnx(path: str | Path, shapes: dict[str, list[int]] | None = None) -> ExtractedModel:
    """Tasks of an ONNX model file (input shapes from the file unless given)."""
    return extract_relax(onnx_to_relax(path, shapes))


def load_relax(spec: str, batch: int = 1, width: float = 1.0, image: int = 224) -> Any:
    """The Relax module of a model named on the command line: a zoo model (tuner.models.torch_models,
    random weights) or a path to an .onnx file."""
    if spec.endswith(".onnx"):
        if not Path(spec).exists():
            raise FileNotFoundError(f"no ONNX file at {spec}")
        return onnx_to_relax(spec)
    from tuner.models.torch_models import TORCH_MODELS, build

    require("torch")
    if spec not in TORCH_MODELS:
        raise ValueError(f"unknown model {spec!r}: expected one of {sorted(TORCH_MODELS)} or a path to an .onnx file")
    module, inputs = build(spec, batch=batch, width=width, image=image)
    return torch_to_relax(module, inputs)


def extract_model(spec: str, batch: int = 1, width: float = 1.0, image: int = 224) -> ExtractedModel:
    """Tasks of a model named on the command line (see ``load_relax``)."""
    return extract_relax(load_relax(spec, batch, width, image))
