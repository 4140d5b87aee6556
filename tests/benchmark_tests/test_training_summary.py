"""Issue #46: benchmarks/training.py reports every optimizer's step, and each summary field of a model
is the worst over its optimizers (not momentum's, the one tuned)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from training import model_summary  # noqa: E402


def _run(step_ms: float, mpe: float, speedup: float, loss: float) -> dict[str, Any]:
    return {"loss_max_rel_err": loss, "param_max_rel_err": loss, "worst_param": "w", "float64_floor": 0.0,
            "step_ms": step_ms, "baseline_step_ms": step_ms * speedup, "mpe_time_fraction": mpe,
            "step_speedup_vs_baseline": speedup, "phases_ms": {"forward": step_ms}, "tasks": {"forward": 1}}


def test_every_field_is_the_worst_over_the_optimizers() -> None:
    per_opt = {"momentum": _run(1.34, 0.01, 3.0, 1e-6), "sgd": _run(12.65, 0.9, 1.0, 2e-6),
               "adam": _run(12.7, 0.89, 1.1, 5e-7)}
    s = model_summary(per_opt)
    assert s["step_ms"] == 12.7 and s["mpe_time_fraction"] == 0.9 and s["step_speedup_vs_baseline"] == 1.0
    assert s["loss_max_rel_err"] == 2e-6 and s["slowest_step"] == "adam" and s["phases_ms"] == {"forward": 12.7}
    assert {k: v["step_ms"] for k, v in s["per_optimizer"].items()} == {"momentum": 1.34, "sgd": 12.65, "adam": 12.7}
    assert s["per_optimizer"]["sgd"]["mpe_time_fraction"] == 0.9
