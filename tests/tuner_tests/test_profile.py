"""Simulator profiles (tuner/profile.py): the one parse of a profile document, its bounds, and that each
parameter moves the simulated time the way its meaning says while the built-in profile changes nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.errors import UnknownTargetError
from tuner.measure.simulator import Simulator, simulate
from tuner.profile import CHIP_PARAMETERS, SPECS, Profile, ProfileError, default_profile
from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense

WORKLOADS = [Dense(256, 512, 512), Conv2d(1, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1)]


@pytest.mark.parametrize("target", ["sw26010", "sw26010-pro"])
def test_the_built_in_profile_is_the_target_preset_and_round_trips(target: str) -> None:
    p = default_profile(target)
    assert p.version == 0 and {s.name for s in SPECS} == set(p.values)
    assert p.apply(target) == get_target(target)
    fitted = p.with_values({"dma_overlap": 0.25}, intervals={"dma_overlap": (0.1, 0.4)}, version=3,
                           fit={"cv_median_abs_log_err": 0.05})
    back = Profile.from_json(fitted.to_json())
    assert back.values == fitted.values and back.version == 3 and back.fit == {"cv_median_abs_log_err": 0.05}
    assert [q.interval for q in back.parameters if q.name == "dma_overlap"] == [(0.1, 0.4)]


def _doc(**changes: object) -> dict[str, object]:
    doc = default_profile("sw26010").to_json()
    params = dict(doc["parameters"])
    for name, entry in changes.items():
        if entry is None:
            params.pop(name)
        else:
            params[name] = entry
    return {**doc, "parameters": params}


@pytest.mark.parametrize(("doc", "says"), [
    (_doc(dma_overlap={"value": 1.5}), "outside its bounds"),
    (_doc(dma_overlap={"value": math.nan}), "outside its bounds"),
    (_doc(dma_overlap={"value": "1"}), "numeric 'value'"),
    (_doc(dma_overlap={"value": 0.5, "interval": [0.6, 0.9]}), "does not contain"),
    (_doc(dma_overlap={"value": 0.5, "interval": [0.1]}), "two numbers"),
    (_doc(dma_overlap=None), "missing"),
    (_doc(warp_drive={"value": 1.0}), "unknown"),
    ({"target": "sw26010", "parameters": []}, "an object"),
    ("not a profile", "an object"),
    ({**_doc(), "version": -1}, "version"),
    ({**_doc(), "version": True}, "integer"),
])
def test_a_bad_document_is_refused_with_the_reason(doc: object, says: str) -> None:
    with pytest.raises(ProfileError, match=says):
        Profile.from_json(doc)


def test_a_profile_applies_to_its_own_target_only() -> None:
    with pytest.raises(ProfileError, match="cannot be applied"):
        default_profile("sw26010").apply("sw26010-pro")
    with pytest.raises(UnknownTargetError):
        Profile.from_json({**_doc(), "target": "sw99"})


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.op)
def test_measuring_with_the_built_in_profile_is_measuring_as_before(workload: object) -> None:
    space = space_for(workload, "sw26010")
    configs = [space.decode(row) for row in space.sample(40, np.random.default_rng(1))]
    plain = Simulator(seed=3).measure(workload, "sw26010", configs)
    profiled = Simulator(seed=3, profile=default_profile("sw26010")).measure(workload, "sw26010", configs)
    assert [r.times for r in plain] == [r.times for r in profiled]
    assert {r.details["profile_version"] for r in profiled} == {0}
    v7 = Simulator(seed=3, profile=default_profile("sw26010").with_values({}, version=7))
    assert {r.details["profile_version"] for r in v7.measure(workload, "sw26010", configs[:3])} == {7}


# each parameter moved up from the preset: the simulated time of every valid config may only grow, and
# grows for some (for dma_overlap, moving it down: less of the transfers hidden)
MOVES = {"p0_cycles_per_fma": 1.5, "block_overhead_cycles": 180.0, "tile_overhead_cycles": 1500.0,
         "dma_overlap": 0.0, "dma_wait_cycles": 2000.0, "spawn_join_s": 90e-6}


@pytest.mark.parametrize("name", sorted(MOVES))
@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.op)
def test_each_parameter_moves_the_simulated_time_as_its_meaning_says(name: str, workload: object) -> None:
    # the chip's parameters act only on a kernel split over core groups: tests/tuner_tests/test_chip.py
    assert set(MOVES) | set(CHIP_PARAMETERS) == {s.name for s in SPECS}
    base = space_for(workload, "sw26010")
    moved = space_for(workload, default_profile("sw26010").with_values({name: MOVES[name]}).apply("sw26010"))
    index = base.sample(400, np.random.default_rng(2))
    before, after = simulate(base, index), simulate(moved, index)
    ok = np.isfinite(before)
    assert ok.sum() > 100 and np.array_equal(ok, np.isfinite(after))
    assert np.all(after[ok] >= before[ok]) and np.any(after[ok] > before[ok] * 1.001)
    if name == "spawn_join_s":  # a fixed cost per kernel: every config pays the same 60 us more
        np.testing.assert_allclose(after[ok] - before[ok], 60e-6, rtol=1e-9)
