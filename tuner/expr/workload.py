"""The identity of an expression operator: its TVMScript text, a structural hash, shapes and dtype.

A custom operator travels as the TVMScript of its PrimFunc (comment lines dropped); its workload key
is ``expr-<name>-<sha256 of that text, 16 hex>``. Shapes and dtype are part of the text, so two
instances of one operator at different sizes get different keys, and the same expression written
twice (same names, same structure) gets the same key in any process. A worker rebuilds the operator
from the text alone (:meth:`ExprWorkload.from_json`); its geometry is always derived from the
rebuilt PrimFunc, so the submitter's and the worker's views cannot drift apart. A residual epilogue
fused into the kernel (tuner.aot.fusion) appends ``-ep_<epilogue>`` to the key and ``epilogue`` to the JSON.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from math import prod
from pathlib import Path
from typing import Any, ClassVar

from tuner.errors import InvalidWorkloadError
from tuner.expr.expr import Expr
from tuner.workloads import DTYPE_BYTES, MAX_FLOPS, Workload, check_epilogue

OP = "expr"  # the op of an operator written as a tensor expression (tuner.kinds.expr)


def script_hash(script: str) -> str:
    return hashlib.sha256(script.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ExprWorkload(Workload):
    """A ``te.compute`` operator instance; build it with :meth:`from_tensors`, :meth:`from_script`."""

    op: ClassVar[str] = OP
    name: str
    script: str
    dtype: str = "float32"
    # a residual add or multiply fused into the kernel (tuner.workloads.EPILOGUES): a task of its own,
    # as for the built-in GEMMs (tuner.aot.fusion)
    epilogue: str = "none"
    expr: Expr = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        check_epilogue(self.epilogue)
        if self.expr is None:
            from tuner.expr.parse import describe, prim_func_from_script

            object.__setattr__(self, "expr", describe(prim_func_from_script(self.script), self.name))
        if self.expr.dtype != self.dtype or self.dtype not in DTYPE_BYTES:
            raise InvalidWorkloadError(f"expression dtype {self.expr.dtype} is not the workload's {self.dtype} "
                                       f"(supported: {sorted(DTYPE_BYTES)})")
        if self.flops > MAX_FLOPS:
            raise InvalidWorkloadError(f"{self.name} has {self.flops:.3e} FLOPs, above {MAX_FLOPS:.0e}")

    @classmethod
    def from_script(cls, script: str, name: str | None = None) -> ExprWorkload:
        from tuner.expr.parse import describe, prim_func_from_script, script_text

        func = prim_func_from_script(script)
        text = script_text(func)  # normalise (a hand-edited text prints back canonically)
        expr = describe(prim_func_from_script(text), name)
        return cls(name=expr.name, script=text, dtype=expr.dtype, expr=expr)

    @classmethod
    def from_tensors(cls, tensors: Sequence[Any], name: str | None = None) -> ExprWorkload:
        from tuner.expr.parse import prim_func_from_tensors, script_text

        return cls.from_script(script_text(prim_func_from_tensors(tensors)), name)

    @property
    def flops(self) -> int:
        return self.expr.flops

    @property
    def bytes_moved(self) -> int:
        shapes = {a.tensor: a.shape for a in (*self.expr.inputs, self.expr.output)}
        return sum(prod(shape) for shape in shapes.values()) * DTYPE_BYTES[self.dtype]

    @property
    def key(self) -> str:
        plain = f"{OP}-{self.name}-{script_hash(self.script)}"
        return plain if self.epilogue == "none" else f"{plain}-ep_{self.epilogue}"

    def to_json(self) -> dict[str, Any]:
        out = {"op": OP, "name": self.name, "script": self.script, "dtype": self.dtype}
        return out if self.epilogue == "none" else {**out, "epilogue": self.epilogue}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ExprWorkload:
        unknown = set(spec) - {"op", "name", "script", "dtype", "epilogue"}
        if unknown or not isinstance(spec.get("script"), str):
            raise InvalidWorkloadError(f"an expr workload has a string 'script' and optional 'name', 'dtype', "
                                       f"'epilogue'; unknown fields {sorted(unknown)}")
        wl = cls.from_script(spec["script"], spec.get("name"))
        if "epilogue" in spec:  # checked once, by __post_init__
            wl = replace(wl, epilogue=spec["epilogue"])
        if "dtype" in spec and spec["dtype"] != wl.dtype:
            raise InvalidWorkloadError(f"dtype {spec['dtype']!r} does not match the expression's {wl.dtype!r}")
        return wl


def load_function(ref: str) -> Callable[..., Any]:
    """``path/to/file.py:FUNC`` -> the function (the file is imported as a fresh module)."""
    path, sep, func = ref.rpartition(":")
    if not sep or not path or not func:
        raise InvalidWorkloadError(f"expected FILE.py:FUNCTION, got {ref!r}")
    file = Path(path)
    if not file.is_file():
        raise InvalidWorkloadError(f"no such file: {file}")
    spec = importlib.util.spec_from_file_location(f"swtune_user_ops_{script_hash(str(file.resolve()))}", file)
    if spec is None or spec.loader is None:
        raise InvalidWorkloadError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise InvalidWorkloadError(f"{file} has no function {func!r}")
    return fn


def tensors_from_op(ref: str, args: dict[str, Any] | str | None = None) -> tuple[list[Any], str]:
    """(the te tensors, the function's name) of ``FILE.py:FUNC`` called with ``args`` (a dict or its
    JSON): inputs first, the output last."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            raise InvalidWorkloadError(f"--args is not valid JSON: {exc}") from None
    if args is not None and not isinstance(args, dict):
        raise InvalidWorkloadError("--args must be a JSON object of keyword arguments")
    fn = load_function(ref)
    try:
        tensors = fn(**(args or {}))
    except TypeError as exc:
        raise InvalidWorkloadError(f"{ref}: {exc}") from None
    if not isinstance(tensors, (list, tuple)):
        raise InvalidWorkloadError(f"{ref} must return a list of te tensors (inputs, then the output)")
    return list(tensors), str(getattr(fn, "__name__", ref.rpartition(":")[2]))


def workload_from_op(ref: str, args: dict[str, Any] | str | None = None) -> ExprWorkload:
    """The workload of ``FILE.py:FUNC`` called with ``args`` (a dict or its JSON)."""
    tensors, name = tensors_from_op(ref, args)
    return ExprWorkload.from_tensors(tensors, name=name)
