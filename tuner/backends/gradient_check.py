"""Derived gradients checked end to end: ``swtune check-grad``'s core.

Two halves. Numerically, the whole gradient program against central finite differences in float64
and, given a torch reference, against torch autograd (tuner/codegen/grad_check.py). On the emulator,
each derived operator (tuner/expr/autodiff.py) as ``check-op`` checks any expression operator:
random valid configs generated as athread C, built against swemu and run, outputs against TVM's llvm
run of the same operator, DMA counts against the analysis (tuner/backends/expr_check.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.backends.expr_check import EmulatorSummary, emulator_check

_COUNTS = ("configs_checked", "wrong_results", "dma_count_mismatches", "tir_mismatches", "compile_failures",
           "runtime_errors")


@dataclass
class GradientCheck:
    fd: dict[str, float]  # input -> relative error against finite differences
    autograd: dict[str, float] | None  # input -> max relative error against torch, when given one
    operators: list[tuple[Any, EmulatorSummary]] = field(default_factory=list)  # (GradientOperator, summary)

    def total(self, count: str) -> int:
        return sum(int(getattr(s, count)) for _, s in self.operators)

    @property
    def problems(self) -> list[str]:
        return [f"{op.name}: {p}" for op, s in self.operators for p in s.problems]

    @property
    def failed(self) -> bool:
        return any(self.total(c) for c in _COUNTS[1:])

    def as_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"operators_checked": len(self.operators),
                                "configs_checked": self.total("configs_checked"),
                                "fd_max_rel_err": max(self.fd.values(), default=0.0)}
        if self.autograd is not None:
            line["autograd_max_rel_err"] = max(self.autograd.values(), default=0.0)
        line.update({c: self.total(c) for c in _COUNTS[1:]})
        line["operators"] = [{"name": op.name, "wrt": op.wrt, "macs": op.macs,
                              **{c: int(getattr(s, c)) for c in _COUNTS}} for op, s in self.operators]
        return line


def check_gradient(tensors: Sequence[Any], target: str, configs: int, seed: int = 0,
                   reference: Callable[..., Any] | None = None, name: str | None = None) -> GradientCheck:
    """Check the gradient of the operator ``tensors`` (inputs, then output): numerically, and
    ``configs`` random valid configs of each derived operator on the emulator."""
    from tuner.codegen.grad_check import autograd_errors, fd_errors
    from tuner.expr.autodiff import differentiate
    from tuner.space import space_for

    check = GradientCheck(fd=fd_errors(tensors, seed),
                          autograd=autograd_errors(tensors, reference, seed) if reference is not None else None)
    for op in differentiate(tensors, name).operators:
        check.operators.append((op, emulator_check(space_for(op.workload(), target), configs, seed=seed,
                                                   discrete_inputs=op.compares)))
    return check
