"""The measurement backends by name: what a worker's ``--backend`` and in-process tuning construct.

A backend is a :class:`BackendSpec` (the one source its results carry, and a factory), a plug-in of the
:class:`tuner.registry.Registry` ``BACKENDS``: swtune's simulator, emulator and sunway in
:data:`BUILTIN_BACKENDS` (tuner.backends.builtin), another package's under the ``swtune.backends``
entry points. The service refuses a result whose source does not match the backend its
worker leased with; the backends' modules are imported only when built, so a worker on the simulator
never imports codegen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tuner.measure.base import MeasureBackend, Source
from tuner.measure.noise import DEFAULT_NOISE
from tuner.profile import Profile
from tuner.registry import Registry
from tuner.targets import Target, get_target

ENTRY_POINT_GROUP = "swtune.backends"


class BackendName(StrEnum):
    """The built-in backends' names, for code that spells one (any registered name is a backend)."""

    SIMULATOR = "simulator"
    EMULATOR = "emulator"
    SUNWAY = "sunway"


# each built-in's spec is the attribute of tuner.backends.builtin named as its member
BUILTIN_BACKENDS = {name.value: f"tuner.backends.builtin:{name.name}" for name in BackendName}


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


@dataclass(frozen=True)
class BackendSpec:
    """One backend as the registry holds it. ``source``: what its results carry (a Sunway backend pointed
    at a stand-in states "emulator" itself; a worker leasing as "sunway" may only report hardware times).
    ``build(target_name, options)``: a new backend, its heavy modules imported there."""

    source: Source
    build: Callable[[str, BackendOptions], MeasureBackend]


def _check_spec(spec: BackendSpec) -> None:
    if not isinstance(spec, BackendSpec):
        raise TypeError(f"{spec!r} is not a BackendSpec")


BACKENDS: Registry[BackendSpec] = Registry("backend", ENTRY_POINT_GROUP, BUILTIN_BACKENDS, check=_check_spec)


def backend_names() -> list[str]:
    """The registered backends' names, sorted."""
    return BACKENDS.names()


def source_of(name: str) -> Source:
    """The source the results of backend ``name`` carry; ValueError listing the backends otherwise."""
    return BACKENDS.get(name).source


def backend_for(name: str, target: Target | str, options: BackendOptions | None = None) -> MeasureBackend:
    """A new backend ``name`` measuring on ``target`` (not yet preflighted); ValueError listing the
    backends when no backend has that name."""
    return BACKENDS.get(name).build(get_target(target).name, options or BackendOptions())
