"""A training step with the derived data gradients' element-wise epilogues fused, against the same step
without them, simulated.

Usage: python benchmarks/fused_gradients.py [--model resnet18_small] [--batch 32] [--trials 8] [--log URL]

The step (SGD, cross-entropy) of a trainable model (tuner.models.trainable) is extracted twice: in the
form the compiler builds (a derived conv data gradient taking the backward's relu mask or a residual
block's gradient sum as its epilogue: an ``-ep_residual_multiply`` / ``-ep_residual_add`` task) and
unfused (the plain data gradients). Every task of both is tuned once, at ``--trials`` per GEMM-like task,
in one submission to an embedded service with simulator workers (or ``--log`` reuses a tuning log).
The step is then lowered twice against that log: with every tuned form (``fused``), and with the fused
expression forms hidden so the compiler undoes those fusions (``plain``); both keep the built-in GEMMs'
epilogues. Same log, same trial cap per task for both forms. Figures per form: ``step_ms`` (simulated),
``mpe_time_fraction``, ``fused_expression_kernels``; and ``fused_over_plain``.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from _common import emit

TARGET = "sw26010"


def _tune(step: Any, url: str, trials: int) -> int:
    import swtune
    from tuner.bridge.extract import extract_relax

    both = [*extract_relax(step.module).layers, *extract_relax(step.module, fused=False).layers]
    layers = list({layer.workload.key: layer for layer in both}.values())
    swtune.tune_layers(layers, url, name="fused-gradients", target=TARGET, trials=trials, timeout=7200.0)
    return len(layers)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18_small")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--log", default="", help="a tuning log URL holding both forms' tasks (skips tuning)")
    args = ap.parse_args()

    import swtune
    from tuner.aot.compiler import lower_model
    from tuner.expr.workload import ExprWorkload
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.train_modules import Loss
    from tuner.ir.training import training_step
    from tuner.models.trainable import build_trainable

    module, inputs = build_trainable(args.model, args.batch)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, Optimizer(OptimizerKind.SGD, 0.01))
    with tempfile.TemporaryDirectory() as tmp:
        url = args.log or f"sqlite:///{Path(tmp) / 'log.db'}"
        tasks = None if args.log else _tune(step, url, args.trials)
        with swtune.open_log(url, TARGET) as lookup:
            def plain(w: Any) -> Any:  # the fused expression forms hidden: the compiler undoes those fusions
                fused_expression = isinstance(w, ExprWorkload) and w.epilogue != "none"
                return None if fused_expression else lookup(w)

            figures: dict[str, Any] = {}
            for form, lk in (("fused", lookup), ("plain", plain)):
                low = lower_model(step.module, TARGET, lk)
                timing = low.timing()
                figures[form] = {
                    "step_ms": round(timing.tuned_s * 1e3, 4), "mpe_time_fraction": round(timing.mpe_fraction, 4),
                    "fused_expression_kernels": sum(1 for k in low.kernels if isinstance(k.workload, ExprWorkload)
                                                    and k.workload.epilogue != "none")}
    emit({"model": args.model, "batch": args.batch, "trials": args.trials, "tasks_tuned": tasks,
          "tuning_log_reused": bool(args.log), **figures,
          "fused_over_plain": round(figures["fused"]["step_ms"] / figures["plain"]["step_ms"], 4)})


if __name__ == "__main__":
    main()
