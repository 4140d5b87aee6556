"""A whole program on several core groups (issue #43): memory-bound CPE kernels spread over the chip's
CPEs, one-CG records seed the chip's search, and a model lowered for the chip is timed but not compiled."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.baseline import baseline_config
from tuner.errors import NotBuiltYetError
from tuner.measure.simulator import simulate
from tuner.profile import default_profile
from tuner.space.chip import chip_seeds
from tuner.space.factory import space_for
from tuner.tune import tune_workloads
from tuner.workloads import Conv2d

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.compiler import lower_model  # noqa: E402
from tuner.bridge.extract import extract_relax, torch_to_relax  # noqa: E402
from tuner.space.cpe.space import CpeKernelSpace  # noqa: E402


class _Net(torch.nn.Module):
    """A conv, a batch norm and a softmax over rows: a GEMM-like kernel and memory-bound CPE kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x: Any) -> Any:
        y = self.conv(x).permute(0, 2, 3, 1)
        return torch.softmax(self.norm(y), dim=-1)


@pytest.fixture(scope="module")
def relax() -> Any:
    torch.manual_seed(0)
    return torch_to_relax(_Net().eval(), (torch.randn(2, 16, 32, 32),))


def _cpe_workload(relax: Any) -> Any:
    return next(l.workload for l in extract_relax(relax).layers if l.workload.key.startswith("cpe-"))


def test_a_memory_bound_kernel_spreads_its_blocks_over_the_chip(relax: Any) -> None:
    w = _cpe_workload(relax)
    one, chip = CpeKernelSpace(w, "sw26010"), CpeKernelSpace(w, "sw26010-4cg")
    actives = chip.knobs[chip.knob_index["active"]].choices
    assert max(one.knobs[one.knob_index["active"]].choices) <= 64 and {128, 192, 256} <= set(actives)
    rows = chip.valid_rows
    a = chip.analyze(rows)
    active = chip.codes[chip.knob_index["active"]][rows[:, chip.knob_index["active"]]]
    best_one = float(one.analyze(one.valid_rows).seconds.min())
    best_chip = float(a.seconds[active > 64].min())
    assert best_chip < best_one  # four memories stream more than one
    # a config on one CG is the same kernel, the same time, as in the one-CG space
    for row in rows[active <= 64][:20]:
        config = chip.decode(row)
        assert a.seconds[np.flatnonzero((rows == row).all(axis=1))[0]] == pytest.approx(
            float(one.analyze(one.encode(config)[None, :]).seconds[0]))


def test_one_cg_records_seed_the_chip_search_within_its_trials() -> None:
    w = Conv2d(1, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1)
    one = tune_workloads([w], "sw26010", trials=16, batch=8)[0]
    seeds = chip_seeds(one.best_config, 4)
    assert seeds[0] == one.best_config and [s["cg_split"] for s in seeds[1:]] == ["rows", "cols", "reduction"]
    chip = tune_workloads([w], "sw26010-4cg", trials=16, batch=8, seed_configs=[seeds])[0]
    # the one-CG record is measured in the chip space (as cgs = 1: the same kernel), so the chip's best
    # is never slower than it, within the measurement noise
    assert chip.best_time <= one.best_time * 1.05
    assert chip.trials == 16 and len(chip.curve) == 16
    # the baseline is still the first measurement, the seeds come after it
    space = space_for(w, "sw26010-4cg")
    baseline = space.encode(baseline_config(space))[None, :]
    assert chip.baseline_time == pytest.approx(float(simulate(space, baseline)[0]), rel=0.2)


def test_a_model_for_the_chip_is_timed_not_compiled(relax: Any, tmp_path: Path) -> None:
    layers = extract_relax(relax).layers
    timed = {}
    for target in ("sw26010", "sw26010-4cg"):
        results = tune_workloads([l.workload for l in layers], target, trials=8, batch=8)
        configs = {l.workload.key: r.best_config for l, r in zip(layers, results)}
        program = lower_model(relax, target, lambda w, c=configs: c.get(w.key))
        assert all(k.slave == "" for k in program.kernels) == (target != "sw26010")
        timed[target] = program.timing().summary()
    assert timed["sw26010-4cg"]["tuned_ms"] < timed["sw26010"]["tuned_ms"]
    # a phase after the first in a shared spawn waits at a barrier across the CGs: each costs cg_sync_s
    slow_sync = default_profile("sw26010").with_values({"cg_sync_s": 30e-6}).apply("sw26010-4cg")
    moved = dataclasses.replace(program, target=slow_sync).timing()  # the same program, re-timed
    phases = sum(1 for s in moved.steps if not s.spawned)
    assert phases >= 1
    assert moved.summary()["tuned_ms"] - timed["sw26010-4cg"]["tuned_ms"] == pytest.approx(
        phases * (30e-6 - slow_sync.__class__.cg_sync_s) * 1e3, rel=1e-6)
    with pytest.raises(NotBuiltYetError, match="not yet compiled"):
        compile_model(relax, "sw26010-4cg", tmp_path / "chip", lambda w: None)
