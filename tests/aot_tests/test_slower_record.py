"""Issue #46: a compile of the tuning log never runs a kernel slower than its baseline. A record the
simulator times above the kind's OpenACC-like baseline gives way to the baseline when it comes from a
tuning log (``TuningLog``); a config handed over by a caller (tests, benchmarks) runs as it is."""

from __future__ import annotations

from typing import Any

from tuner.aot.lookup import SlowerRecord, TuningLog
from tuner.aot.timing import kernel_seconds
from tuner.aot.untuned import Records, choose_config
from tuner.baseline import openacc_baseline
from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Dense

TARGET = get_target("sw26010")


def _slow_record(w: Dense) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the slowest of a few valid configs, the baseline): the first simulates slower than the second."""
    space = space_for(w, TARGET)
    sampled = [space.decode(r) for r in space.sample(16, rng=0)]
    times, _ = kernel_seconds(space, sampled)
    base = openacc_baseline(space)
    slow = sampled[int(times.argmax())]
    assert float(times.max()) > float(kernel_seconds(space, [base])[0][0])
    return slow, base


def test_a_slower_record_of_the_log_gives_way_to_the_baseline() -> None:
    w = Dense(64, 64, 64)
    slow, base = _slow_record(w)
    log = TuningLog(lambda wl: slow if wl.key == w.key else None)
    assert log.slower_record == SlowerRecord.BASELINE
    config, status = choose_config(w, TARGET, Records(log, [w]))
    assert status == "fallback: tuned record slower than the baseline" and config == base


def test_a_config_handed_over_runs_as_it_is() -> None:
    w = Dense(64, 64, 64)
    slow, _ = _slow_record(w)
    config, status = choose_config(w, TARGET, Records(lambda wl: slow, [w]))
    assert status == "tuned" and config == slow
