"""The whole-model simulated time: every step (kernels with spawn/join, MPE work), per-operator
shares, tuned program vs the OpenACC-like baseline program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.timing import CPE, MPE  # noqa: E402
from tuner.baseline import openacc_baseline  # noqa: E402
from tuner.measure.simulator import simulate  # noqa: E402
from tuner.space.space import ScheduleSpace  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"


@pytest.fixture(scope="module")
def resnet() -> Any:
    from tuner.bridge.extract import torch_to_relax
    from tuner.models.torch_models import build

    module, inputs = build("resnet18", width=0.0625, image=32)
    return torch_to_relax(module, inputs)


def _best_of(w: Any, n: int = 64) -> dict[str, Any] | None:
    if w.op in ("expr", "cpe_kernel"):  # memory-bound operators keep their untuned lowering here
        return None
    space = ScheduleSpace(w, TARGET)
    rows = np.concatenate([space.sample(n, rng=1), space.encode(openacc_baseline(space))[None, :]])
    return space.decode(rows[int(np.argmin(simulate(space, rows)))])


@pytest.mark.slow
def test_untuned_program_is_the_baseline_program(resnet: Any, tmp_path: Path) -> None:
    mt = compile_model(resnet, TARGET, tmp_path / "a", lambda w: None).timing
    assert mt is not None
    assert mt.tuned_s == pytest.approx(mt.baseline_s) and mt.speedup == pytest.approx(1.0)


@pytest.mark.slow
def test_every_step_is_timed_and_kernels_match_the_simulator(resnet: Any, tmp_path: Path) -> None:
    # kernels as the simulator sees them, each with its own spawn, everything else on the MPE
    plain: dict[str, Any] = {"cpe_mode": "none", "group_launches": False}
    result = compile_model(resnet, TARGET, tmp_path / "b", _best_of, fuse=False, **plain)
    mt = result.timing
    assert mt is not None and len(mt.steps) == len(result.graph.nodes)
    kernels = [s for s in mt.steps if s.where == CPE]
    assert len(kernels) == sum(k.calls for k in result.kernels) == mt.kernel_launches
    tgt = get_target(TARGET)
    for k in result.kernels:  # each kernel step: the simulator's time of its config minus host padding
        space = ScheduleSpace(k.workload, TARGET)
        expect = simulate(space, space.encode(k.config)[None, :])[0] - space.geometry.prepass_bytes / tgt.mpe_copy_Bps
        step = next(s for s in kernels if s.detail == k.workload.key)
        assert step.tuned_s == pytest.approx(expect) and step.tuned_s > tgt.spawn_join_s
    mpe = [s for s in mt.steps if s.where == MPE]
    assert {"nn.relu", "add", "nn.max_pool2d", "mean"} <= {s.relax_op for s in mpe}
    assert all(s.tuned_s > 0 and s.tuned_s == s.baseline_s for s in mpe)  # the same MPE work in both programs
    assert 0 < mt.mpe_fraction < 1 and mt.mpe_s == pytest.approx(sum(s.tuned_s for s in mpe))
    assert mt.speedup > 1  # best of 64 samples + the baseline beats the baseline on some layer
    shares = mt.by_operator()
    assert [r.seconds for r in shares] == sorted((r.seconds for r in shares), reverse=True)
    assert sum(r.share for r in shares) == pytest.approx(1.0)
    assert sum(r.calls for r in shares) == len(mt.steps)
    fused = compile_model(resnet, TARGET, tmp_path / "c", _best_of, **plain).timing  # bn + relu in the conv kernels
    assert fused is not None and fused.tuned_s < mt.tuned_s and fused.mpe_s < mt.mpe_s
