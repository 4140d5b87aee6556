"""The built-in measurement backends as registry entries (tuner.backends.registry.BUILTIN_BACKENDS).

``simulator`` (tuner.measure.simulator: the analysis timed on a modelled core group), ``emulator`` (the
athread C run on the x86 emulator: tuner.backends.emulator_backend) and ``sunway`` (a Sunway node through
bsub: tuner.backends.sunway). Each module is imported only when its backend is built.
"""

from __future__ import annotations

from tuner.backends.registry import BackendOptions, BackendSpec
from tuner.measure.base import MeasureBackend, Source


def _simulator(target: str, o: BackendOptions) -> MeasureBackend:
    from tuner.measure.simulator import Simulator

    return Simulator(noise=o.noise, seed=o.seed, profile=o.profile)


def _emulator(target: str, o: BackendOptions) -> MeasureBackend:
    from tuner.backends.emulator_backend import EmulatorBackend

    return EmulatorBackend(seed=o.seed)


def _sunway(target: str, o: BackendOptions) -> MeasureBackend:
    from tuner.backends.sunway import SunwayBackend

    return SunwayBackend(target=target, compile_cmd=o.compile_cmd, run_cmd=o.run_cmd, queue=o.queue,
                         time_pattern=o.time_pattern)


SIMULATOR = BackendSpec(Source.SIMULATOR, _simulator)
EMULATOR = BackendSpec(Source.EMULATOR, _emulator)
SUNWAY = BackendSpec(Source.HARDWARE, _sunway)
