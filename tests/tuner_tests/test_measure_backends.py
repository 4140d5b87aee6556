"""Every registered measurement backend satisfies the one protocol (source, chunk, preflight, measure),
and a machine that cannot measure raises InfrastructureError instead of blaming a config."""

from __future__ import annotations

import shutil

import pytest

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.backends.registry import BackendName, BackendOptions, backend_for, backend_names, source_of
from tuner.measure.base import STATUSES, InfrastructureError, MeasureBackend, MeasureResult, Source, Status
from tuner.space import ScheduleSpace
from tuner.tune import tune_workloads
from tuner.workloads import Dense

SPACE = ScheduleSpace(Dense(8, 32, 16), "sw26010")
VALID = SPACE.decode(SPACE.sample(1, 1)[0])
NO_TOOLCHAIN = shutil.which("sw5cc") is None or shutil.which("bsub") is None
NO_GCC = shutil.which("gcc") is None


def test_the_stored_status_and_source_names_are_unchanged() -> None:
    # the database rows and the wire carry these strings: renaming one orphans stored measurements
    assert STATUSES == ("ok", "ldm_overflow", "invalid_config", "compile_error", "runtime_error", "timeout",
                        "wrong_result")
    assert [s.value for s in Source] == ["simulator", "emulator", "hardware", "host"]
    r = MeasureResult(config={}, status="timeout", source="hardware")  # as read back from the wire
    assert r.status is Status.TIMEOUT and r.source is Source.HARDWARE and not r.ok
    with pytest.raises(ValueError, match="unknown status"):
        MeasureResult(config={}, status="infra")


@pytest.mark.parametrize("name", backend_names())
def test_each_registered_backend_follows_the_protocol(name: str) -> None:
    backend = backend_for(name, "sw26010")
    assert isinstance(backend, MeasureBackend)
    assert backend.source is source_of(name)
    # one config per call for the backends that build and run it; many for the model
    assert backend.chunk == (16 if name == BackendName.SIMULATOR else 1)
    (outside,) = backend.measure(SPACE.workload, "sw26010", [{"tile_m": 1}])
    assert outside.status in (Status.INVALID_CONFIG, Status.COMPILE_ERROR) and outside.source is backend.source
    machine_can = {BackendName.SIMULATOR: True, BackendName.EMULATOR: not NO_GCC,
                   BackendName.SUNWAY: not NO_TOOLCHAIN}[BackendName(name)]
    if not machine_can:
        with pytest.raises(InfrastructureError):
            backend.preflight()
        with pytest.raises(InfrastructureError) as err:
            backend.measure(SPACE.workload, "sw26010", [VALID])
        assert err.value.completed == ()
        return
    backend.preflight()
    (r,) = backend.measure(SPACE.workload, "sw26010", [VALID])
    assert r.status is Status.OK and r.source is backend.source and r.mean_time > 0


def test_an_unknown_backend_name_lists_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown backend 'gpu'; expected one of \['emulator', 'simulator', 'sun"):
        backend_for("gpu", "sw26010")


def test_backend_options_reach_the_backend() -> None:
    sim = backend_for("simulator", "sw26010-pro", BackendOptions(noise=0.0, seed=7))
    assert (sim.measure(SPACE.workload, "sw26010", [VALID])[0].times[0]
            == sim.measure(SPACE.workload, "sw26010", [VALID])[0].times[-1])
    sunway = backend_for("sunway", "sw26010-pro", BackendOptions(run_cmd="{dir}/kernel", queue="q_x"))
    assert (sunway.run_cmd, sunway.queue, sunway.compile_cmd) == ("{dir}/kernel", "q_x", "make -C {dir} kernel")


@pytest.mark.needs("gcc")
def test_the_emulator_without_a_compiler_is_the_machines_failure_not_the_configs(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    backend = EmulatorBackend(workdir=tmp_path)
    with pytest.raises(InfrastructureError, match="cannot build the athread emulator"):
        backend.preflight()
    with pytest.raises(InfrastructureError) as err:  # not a compile_error stored against VALID
        backend.measure(SPACE.workload, "sw26010", [VALID])
    assert err.value.completed == ()


@pytest.mark.needs("gcc")
def test_in_process_tuning_preflights_its_backend_before_searching(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(InfrastructureError, match="no C compiler"):
        tune_workloads([SPACE.workload], "sw26010", trials=4, strategy="random",
                       backend=EmulatorBackend(workdir=tmp_path))
