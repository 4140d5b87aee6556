"""The measurement backends by name: what a worker's ``--backend`` and in-process tuning construct.

Each name maps to the one source its results carry (the service refuses a result whose source does
not match the backend its worker leased with) and to a factory; the backends' modules are imported
only when built, so a worker on the simulator never imports codegen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tuner.measure.base import MeasureBackend, Source
from tuner.measure.noise import DEFAULT_NOISE
from tuner.profile import Profile
from tuner.targets import Target, get_target


class BackendName(StrEnum):
    """A measurement backend a worker or ``tune`` can run (the worker's ``--backend``)."""

    SIMULATOR = "simulator"
    EMULATOR = "emulator"
    SUNWAY = "sunway"


# The source each backend's results carry. A Sunway backend pointed at a stand-in (the athread emulator
# in tests) states "emulator" itself; a worker leasing as "sunway" may only report hardware times.
BACKEND_SOURCE: dict[BackendName, Source] = {
    BackendName.SIMULATOR: Source.SIMULATOR,
    BackendName.EMULATOR: Source.EMULATOR,
    BackendName.SUNWAY: Source.HARDWARE,
}


@dataclass(frozen=True)
class BackendOptions:
    """Every backend's construction options; each backend reads its own and ignores the rest."""

    noise: float = DEFAULT_NOISE  # simulator: relative std-dev of each repeat
    seed: int = 0  # simulator noise, emulator inputs
    profile: Profile | None = None  # simulator: the target's uncertain costs (None: the built-in profile)
    compile_cmd: str = ""  # sunway: build command template ({dir}, {queue}); default make + sw5cc/swgcc
    run_cmd: str = ""  # sunway: run command template; default the target's bsub line
    queue: str = "q_sw_expr"  # sunway: bsub queue
    time_pattern: str = ""  # sunway: regex with one group, the kernel seconds; default the host's timing line


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


_FACTORIES: dict[BackendName, Callable[[str, BackendOptions], MeasureBackend]] = {
    BackendName.SIMULATOR: _simulator,
    BackendName.EMULATOR: _emulator,
    BackendName.SUNWAY: _sunway,
}


def backend_names() -> tuple[str, ...]:
    return tuple(n.value for n in BackendName)


def parse_backend_name(name: str) -> BackendName:
    """The BackendName ``name`` spells; ValueError listing the choices otherwise."""
    try:
        return BackendName(name)
    except ValueError:
        raise ValueError(f"unknown backend {name!r}; expected {', '.join(backend_names()[:-1])} or "
                         f"{backend_names()[-1]}") from None


def backend_for(name: str, target: Target | str, options: BackendOptions | None = None) -> MeasureBackend:
    """A new backend ``name`` measuring on ``target`` (not yet preflighted)."""
    return _FACTORIES[parse_backend_name(name)](get_target(target).name, options or BackendOptions())
