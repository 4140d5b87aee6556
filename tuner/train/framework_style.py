"""The library calls of a training step run framework-style (tuner.aot.framework_style).

A framework runs a training step as its autograd engine does: the forward one primitive at a time (a
linear layer one GEMM call), then each primitive's backward as one call (TVM's ``Gradient`` writes the
steps of one adjoint and then binds ``<var>_adjoint``: the steps up to and including that binding are
one call, as ``tanh_backward`` is in torch), then the optimizer's update as one multi-tensor call
(torch's ``foreach`` implementation). Expression layers must be exported decomposed
(``tuner.ir.expr_layer.decomposed``): their twins' torch primitives, not one expression operator.
"""

from __future__ import annotations

from tuner.aot.framework_style import LibraryCalls, bindings_of, forward_calls
from tuner.ir.training import Phase, TrainingStep


def library_calls(step: TrainingStep) -> LibraryCalls:
    """Which library call runs each binding of ``step``'s program."""
    bindings = bindings_of(step.module["main"])
    forward = [b for b in bindings if step.phases.get(b.var.name) == Phase.FORWARD]
    calls = forward_calls(forward)
    n = max(calls.values(), default=-1) + 1
    for b in bindings:
        phase, name = step.phases.get(b.var.name), b.var.name
        if phase == Phase.BACKWARD:
            calls[name] = n
            if name.endswith("_adjoint"):  # the last step of one primitive's backward
                n += 1
        elif phase == Phase.UPDATE:
            calls[name] = n + 1  # every parameter's update: one multi-tensor call
    return LibraryCalls(calls)
