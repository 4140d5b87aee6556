"""A user's expression operator as a layer of a torch model, so a model holding it trains through the
operator's derived gradient.

``expression_layer("ops.py:FUNC", args, torch_twin="ops.py:FUNC_torch", inputs=1)`` is a torch module
whose first ``inputs`` te inputs are the layer's inputs (``forward(*xs)``: a recurrent cell's gates and
its state) and whose other te inputs are its parameters (initialised uniform in ``±1/sqrt(last
dimension)``, as torch's Linear). In torch it runs the twin (so torch trains it by autograd: the
reference); under torch.export it is a custom operator ``swtune::<name>``, which :func:`converters`
turns into the expression itself when TVM imports the exported program (``emit_expression``:
``call_tir_with_grad``, whose gradient is derived from the expression by tuner/expr/autodiff.py).

Inside ``with decomposed():`` the layer exports as its twin instead: the torch primitives a framework
would run one kernel each (the framework-style reference, tuner.train.framework_style).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.expr.workload import load_function, script_hash, tensors_from_op


class MissingTwinError(InvalidWorkloadError):
    """An expression layer without a torch twin was asked to run in torch or framework-style."""


@dataclass(frozen=True)
class _Registered:
    tensors: list[Any]
    name: str


_REGISTRY: dict[str, _Registered] = {}  # custom operator name -> the expression it stands for
_DECOMPOSED: ContextVar[bool] = ContextVar("swtune_decomposed_expressions", default=False)


@contextmanager
def decomposed() -> Iterator[None]:
    """Expression layers exported inside this block are their torch twins' primitives, not one operator."""
    token = _DECOMPOSED.set(True)
    try:
        yield
    finally:
        _DECOMPOSED.reset(token)


def _custom_op(key: str, twin: Any, args: dict[str, Any], out_shape: tuple[int, ...]) -> Any:
    """The torch custom operator ``swtune::<key>`` (registered once per process)."""
    import torch

    existing = getattr(getattr(torch.ops, "swtune", None), key, None)
    if existing is not None:
        return existing

    def run(xs: list[torch.Tensor]) -> torch.Tensor:
        if twin is None:
            raise MissingTwinError(f"{key} has no torch twin: torch cannot run it")
        return twin(*xs, **args)

    # the schema spelled out: this module's annotations are strings (postponed evaluation)
    op = torch.library.custom_op(f"swtune::{key}", run, mutates_args=(), schema="(Tensor[] xs) -> Tensor")
    op.register_fake(lambda xs: xs[0].new_empty(out_shape))
    return getattr(torch.ops.swtune, key)


def expression_layer(op: str, args: dict[str, Any] | None = None, torch_twin: str | None = None,
                     inputs: int = 1) -> Any:
    """The layer of operator ``op`` (FILE.py:FUNC) called with ``args``, its first ``inputs`` tensors
    the layer's inputs; ``torch_twin`` defaults to ``FUNC_torch`` in the same file. A layer without a
    twin compiles (torch.export sees one operator), but torch cannot run it, nor can framework-style
    execution (:class:`MissingTwinError`)."""
    import torch
    from tvm import te

    kwargs: dict[str, Any] = dict(args or {})
    tensors, name = tensors_from_op(op, kwargs)
    if not 1 <= inputs < len(tensors):
        raise ValueError(f"{op}: inputs={inputs}, but the operator has {len(tensors) - 1} input tensors")
    try:
        twin: Any = load_function(torch_twin or f"{op}_torch")
    except InvalidWorkloadError:
        if torch_twin is not None:
            raise
        twin = None
    key = f"{name}_{script_hash(te.create_prim_func(tensors).script())}"
    _REGISTRY[key] = _Registered(tensors, name)
    out_shape = tuple(int(d) for d in tensors[-1].shape)
    custom = _custom_op(key, twin, kwargs, out_shape)
    shapes = [tuple(int(d) for d in t.shape) for t in tensors[inputs:-1]]
    names = [str(t.op.name) for t in tensors[inputs:-1]]

    class ExpressionLayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.names = names
            for n, shape in zip(names, shapes):
                bound = 1.0 / math.sqrt(shape[-1])
                self.register_parameter(n, torch.nn.Parameter(torch.empty(shape).uniform_(-bound, bound)))

        def forward(self, *xs: Any) -> Any:
            if len(xs) != inputs:
                raise TypeError(f"{name}: expected {inputs} input tensors, got {len(xs)}")
            params = [getattr(self, n) for n in self.names]
            if torch.compiler.is_exporting() and not _DECOMPOSED.get():
                return custom([*xs, *params])
            if twin is None:
                why = ("framework-style execution composes a new operator from its twin's torch primitives"
                       if _DECOMPOSED.get() else "torch runs the layer through it")
                raise MissingTwinError(f"{op} has no torch twin {op}_torch: {why}")
            return twin(*xs, *params, **kwargs)

        def extra_repr(self) -> str:
            return f"{op} {kwargs}"

    return ExpressionLayer()


def converters() -> dict[str, Any]:
    """``custom_convert_map`` entries of TVM's torch importer for every expression layer built so far."""
    from tuner.ir.expr_gradients import emit_expression

    def convert(reg: _Registered) -> Any:
        def run(node: Any, importer: Any) -> Any:
            values = [importer.env[a] for a in node.args[0]]
            return emit_expression(importer.block_builder, reg.tensors, values, reg.name)
        return run

    return {f"{key}.default": convert(reg) for key, reg in _REGISTRY.items()}
