"""Derived gradients checked numerically: central finite differences in float64, and torch autograd.

``swtune check-grad``'s numerical half (its emulator half is ``check-op``'s, run on each derived
operator). The operator is rebuilt in float64 (tuner.expr.autodiff.with_dtype), its gradient program
and forward are built for llvm, and for the loss ``L(x) = sum(head * f(x))`` each input's gradient is
compared along a random direction v with central differences ``(L(x + h v) - L(x - h v)) / 2h``,
Richardson-extrapolated, the step shrunk until two successive estimates agree (kinks of max, abs). Inputs are drawn in
[0.5, 1.5] so that logs, roots and quotients stay inside their domains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tuner.ir import llvm

# Richardson-extrapolated central differences: (4 D(h/2) - D(h)) / 3 has an O(h^4) truncation error,
# so a step this large keeps the rounding error (eps |L| / h) far below the 1e-6 the check asks for
FD_STEP = 1e-3
FD_MIN_STEP = 1e-7  # below it rounding (eps |L| / h) dominates
FD_AGREEMENT = 1e-7  # relative agreement of two successive estimates


def _prim_func(tensors: Sequence[Any]) -> Any:
    from tvm import te

    return te.create_prim_func(list(tensors))


def _run(func: Any, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """``func``'s float64 outputs on ``inputs``, built for llvm once (tuner.ir.llvm)."""
    return llvm.run(func, inputs, [(s, "float64") for s in out_shapes])


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def gradients_float64(tensors: Sequence[Any], seed: int = 0) -> tuple[list[np.ndarray], np.ndarray,
                                                                      dict[str, np.ndarray], Any]:
    """(inputs, head, derived gradient per input, the float64 forward PrimFunc) at random points."""
    from tuner.expr.autodiff import with_dtype

    t64 = with_dtype(tensors, "float64")
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(0.5, 1.5, _shape(t)) for t in t64[:-1]]
    head = rng.standard_normal(_shape(t64[-1]))
    return inputs, head, derived_gradients(t64, inputs, head), _prim_func(t64)


def derived_gradients(tensors: Sequence[Any], inputs: Sequence[np.ndarray], head: np.ndarray) -> dict[str, np.ndarray]:
    """Each input's derived gradient at ``inputs`` for the output gradient ``head``, run by llvm in
    float64 (the operator rebuilt in float64 first)."""
    from tuner.expr.autodiff import differentiate, with_dtype

    grad = differentiate(with_dtype(tensors, "float64"))
    values = _run(_prim_func(grad.program()), [*inputs, head], [_shape(t) for t in grad.outputs.values()])
    return dict(zip(grad.outputs, values))


def _converged(central: Callable[[float], float]) -> float:
    """The extrapolated difference at the first step whose estimate agrees with the next smaller
    step's: a max, min or abs in the body has kinks, and a step that crosses one (two candidates
    within h of each other) gives a wrong slope; shrinking the step until two estimates agree is
    the standard remedy, and it never looks at the derived gradient."""
    def richardson(h: float) -> float:
        return (4 * central(h / 2) - central(h)) / 3

    h = FD_STEP
    estimate = richardson(h)
    while h > FD_MIN_STEP:
        smaller = richardson(h / 8)
        if abs(smaller - estimate) <= FD_AGREEMENT * max(abs(smaller), abs(estimate), 1e-12):
            return smaller
        h, estimate = h / 8, smaller
    return estimate


def fd_errors(tensors: Sequence[Any], seed: int = 0) -> dict[str, float]:
    """Relative error of each input's derived gradient against central finite differences."""
    inputs, head, grads, forward = gradients_float64(tensors, seed)
    out_shape = head.shape
    rng = np.random.default_rng(seed + 1)

    def loss(xs: list[np.ndarray]) -> float:
        return float(np.sum(head * _run(forward, xs, [out_shape])[0]))

    errors = {}
    for n, (name, g) in enumerate(grads.items()):
        v = rng.standard_normal(inputs[n].shape)

        def central(h: float, n: int = n, v: np.ndarray = v) -> float:
            plus = [x + h * v if i == n else x for i, x in enumerate(inputs)]
            minus = [x - h * v if i == n else x for i, x in enumerate(inputs)]
            return (loss(plus) - loss(minus)) / (2 * h)

        fd = _converged(central)
        analytic = float(np.sum(g * v))
        errors[name] = abs(fd - analytic) / max(abs(analytic), abs(fd), 1e-12)
    return errors


def autograd_errors(tensors: Sequence[Any], reference: Callable[..., Any], seed: int = 0) -> dict[str, float]:
    """Max relative error of each input's derived gradient against torch autograd of ``reference``
    (a function of torch tensors in the operator's input order returning its output)."""
    import torch

    inputs, head, grads, _ = gradients_float64(tensors, seed)
    xs = [torch.tensor(x, requires_grad=True) for x in inputs]
    out = reference(*xs)
    (out * torch.tensor(head)).sum().backward()
    errors = {}
    for x, (name, g) in zip(xs, grads.items()):
        want = x.grad.numpy() if x.grad is not None else np.zeros_like(g)
        errors[name] = float(np.abs(g - want).max() / max(np.abs(want).max(), 1e-12))
    return errors
