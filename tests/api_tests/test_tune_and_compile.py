"""``swtune.tune_model`` then ``swtune.compile_model`` as a Python caller runs them: a tiny torch model
tuned on an embedded service with a few trials, and compiled from that log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import swtune
from tuner.aot.untuned import TUNED, Fallback

torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_a_tiny_model_is_tuned_and_compiled_from_its_log(tmp_path: Path, recorder) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())
    x = torch.randn(1, 64)
    log = tmp_path / "log.db"
    tuned = swtune.tune_model(model, example_inputs=[x], trials=4, workers=1, db=str(log), timeout=300.0,
                              progress=recorder)
    assert isinstance(tuned, swtune.ModelTuning) and tuned.model == "Sequential" and tuned.target == "sw26010"
    [layer] = tuned.layers  # one dense layer, its relu fused as the epilogue
    assert layer.calls == 1 and layer.trials >= 1 and layer.baseline_s > 0
    assert layer.tuned_s is not None and layer.tuned_s > 0 and layer.config is not None
    assert tuned.untuned == [] and tuned.tuned_s == layer.tuned_s and tuned.timing.tuned_s > 0
    # the stages were reported: the plan before tuning, then the submission followed to its end
    [plan] = recorder.calls["tuning_planned"]
    assert plan.layers[0].workload.key == layer.workload.key and plan.budget >= 4 and plan.log_url.endswith("log.db")
    assert recorder.calls["following"] and recorder.calls["tasks"][-1]
    assert log.exists()

    out = tmp_path / "program"
    program = swtune.compile_model(model, out, example_inputs=[x], db=str(log), progress=recorder)
    assert program.out_dir == out and {"host.c", "slave.c", "Makefile", "weights.bin"} <= set(program.files)
    assert all((out / name).exists() for name in program.files)
    [kernel] = json.loads((out / "manifest.json").read_text())["kernels"]
    # the log's record was found: it runs, or (4 trials) the simulator times it above the baseline, which runs
    assert kernel["status"] in (TUNED, Fallback.SLOWER.status()), kernel["status"]
    assert program.timing.summary()["tuned_ms"] > 0


def test_compiling_without_a_tuning_log_warns_and_runs_every_kernel_untuned(tmp_path: Path, recorder) -> None:
    model = torch.nn.Linear(16, 8)
    program = swtune.compile_model(model, tmp_path / "p", example_inputs=[torch.randn(1, 16)],
                                   db=str(tmp_path / "missing.db"), progress=recorder)
    [warning] = recorder.calls["warning"]
    assert "no tuning log" in warning and "missing.db" in warning
    assert not (tmp_path / "missing.db").exists()  # looking a schedule up creates no log
    kernels = json.loads((program.out_dir / "manifest.json").read_text())["kernels"]
    assert kernels and all(k["status"] != TUNED for k in kernels)
