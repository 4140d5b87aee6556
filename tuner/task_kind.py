"""The one interface of a kind of tuning task, and the registry every layer asks for a workload's kind.

A *kind* is everything the system asks of a family of workloads: built-in GEMM-like operators
(conv2d, dense, batch_matmul), operators written as tensor expressions, memory-bound CPE kernels, and
later backward operators and training steps. Each kind implements :class:`TaskKind` in one module of
``tuner/kinds/`` and is registered once, by one line: swtune's own in :data:`BUILTIN_KINDS` below,
another package's as an entry point in its ``pyproject.toml``::

    [project.entry-points."swtune.kinds"]
    my_kind = "my_package.kind:KIND"

The layers below the kinds (workload parsing, spaces, the simulator, codegen, the backends, the
compiler, the driver) never import a kind and never ask which kind they hold: they call
:func:`kind_of` and then the protocol. The kinds are a :class:`tuner.registry.Registry` (``KINDS``, the
mechanism of the search strategies and the backends too), which loads the declared kinds the first time
it is asked, so a module that only needs the simulator still finds every kind. Tests register their own
kinds with :func:`register`.

This module is domain-level: it imports nothing of swtune but the errors and the registry
(tuner.workloads builds on it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tuner.errors import InvalidWorkloadError
from tuner.registry import Registry

ENTRY_POINT_GROUP = "swtune.kinds"
# swtune's kinds, by reference: imported when first asked for (this module never imports a kind)
BUILTIN_KINDS = {
    "builtin": "tuner.kinds.builtin:KIND",
    "cpe_kernel": "tuner.kinds.cpe_kernel:KIND",
    "expr": "tuner.kinds.expr:KIND",
}

Workload = Any  # a tuner.workloads.Workload (that module builds on this one)
Config = dict[str, Any]  # a knob assignment (tuner.space.space.Config)
Factors = Callable[[Config], Any]  # a config's measurement noise: an array of one factor per repeat


@runtime_checkable
class TaskKind(Protocol):
    """What the system asks of one kind of workload. Spaces, strategies and results are typed ``Any``
    here because their classes live in higher layers; each kind documents what it returns."""

    name: str  # the kind's name in messages and docs
    ops: tuple[str, ...]  # the workload ``op`` values this kind owns (JSON ``"op"``)
    feature_family: str  # kinds whose cost-model features share columns may share a transfer base

    # --- identity --------------------------------------------------------------------------------
    def from_json(self, op: str, spec: Mapping[str, Any]) -> Workload:
        """The validated workload of ``spec`` (``op`` already resolved, the other fields as given);
        InvalidWorkloadError naming what is wrong."""
        ...

    def memory_bound(self, workload: Workload) -> bool:
        """Whether the workload moves more than it computes (it gets a memory-bound task's budget)."""
        ...

    # --- space, analysis, simulated time, baseline ------------------------------------------------
    def space(self, workload: Workload, target: Any, restrict: Mapping[str, Sequence[Any]] | None) -> Any:
        """The schedule space of ``workload`` on ``target`` (encode/decode/analyze/sample ...)."""
        ...

    def simulate(self, space: Any, configs: Sequence[Config], factors: Factors, source: Any) -> list[Any]:
        """One simulated MeasureResult per config, its repeats scaled by ``factors(config)``; a bad
        config is a failed result, never an exception."""
        ...

    def baseline(self, space: Any) -> Config:
        """The configuration a tuned one is compared with (RuntimeError when the space has none)."""
        ...

    def baseline_seconds(self, space: Any, config: Config) -> float | None:
        """The noise-free simulated seconds of the baseline config (None when it is invalid)."""
        ...

    def why_not_applied(self, space: Any, config: Config) -> str | None:
        """Why a compile cannot run a looked-up ``config`` (it falls back to the baseline), or None
        when it runs it as it is."""
        ...

    # --- search ---------------------------------------------------------------------------------
    def takes_transfer(self, requested: str) -> bool:
        """Whether ``strategy(space, requested, ...)`` uses a transfer base model."""
        ...

    def runs_strategy(self, requested: str) -> bool:
        """Whether its tasks run the registered strategy ``requested`` as asked: a submission asking for
        one they do not is refused, and ``strategy`` raises UnsupportedStrategyError for it."""
        ...

    def strategy(self, space: Any, requested: str, seed: int, base_model: Any = None) -> Any:
        """The search strategy ``requested`` over ``space`` (UnsupportedStrategyError unless
        ``runs_strategy(requested)``)."""
        ...

    # --- builds ---------------------------------------------------------------------------------
    def tensor_program(self, workload: Workload) -> Any:
        """The kernel's TVM PrimFunc with its operands' roles (tuner.codegen.te_ops.OpDef)."""
        ...

    def geometry(self, workload: Workload) -> Any:
        """The tiled geometry the GEMM-like analysis reads (tuner.space.ops.OpGeometry); TypeError for
        a kind that is not analysed as an output-stationary GEMM."""
        ...

    def emulate(self, backend: Any, space: Any, config: Config) -> Any:
        """One config built and run on the athread emulator by ``backend`` (an EmulatorBackend),
        checked against TVM's llvm build: a MeasureResult. Raises only InfrastructureError."""
        ...

    def sunway_job(self, workload: Workload, target: Any, config: Config, directory: str, build_template: str,
                   run_template: str | None, queue: str) -> Any:
        """Write the Sunway sources and Makefile of one config to ``directory``: a NodeJob with its
        build and run commands (tuner.codegen.sunway)."""
        ...


def check_failure(space: Any, config: Config) -> str | None:
    """Why ``space.check(config)`` refuses a config (a knob outside the space, a rule it breaks), or None:
    the usual ``why_not_applied`` of a kind whose compile runs a valid config as it is."""
    try:
        space.check(dict(config))
    except (ValueError, KeyError) as exc:
        return str(exc)
    return None


def _check_kind(kind: TaskKind) -> None:
    if not isinstance(kind, TaskKind):
        raise TypeError(f"{kind!r} does not implement the TaskKind protocol")


KINDS: Registry[TaskKind] = Registry("task kind", ENTRY_POINT_GROUP, BUILTIN_KINDS, check=_check_kind)
_by_op: tuple[int, dict[str, TaskKind]] | None = None  # (KINDS.version it was built at, op -> kind)


def register(kind: TaskKind) -> TaskKind:
    """Make ``kind`` answer for its ops (a later registration of the same op replaces it: tests)."""
    return KINDS.register(kind.name, kind)


def unregister(kind: TaskKind) -> None:
    """Forget ``kind`` (tests that registered their own)."""
    KINDS.unregister(kind.name)


def kinds() -> tuple[TaskKind, ...]:
    """Every registered kind, each once."""
    return tuple(dict.fromkeys(kind for _, kind in KINDS.items()))


def _owners() -> dict[str, TaskKind]:
    """Which kind owns each op: the declared kinds, then the registered ones (a later one wins an op)."""
    global _by_op
    index = _by_op
    if index is None or index[0] != KINDS.version:
        version = KINDS.version
        owners = {op: kind for kind in kinds() for op in kind.ops}
        index = _by_op = (version, owners)
    return index[1]


def kind_of_op(op: str) -> TaskKind:
    """The kind that owns workloads of ``op``; InvalidWorkloadError listing the known ops otherwise."""
    owners = _owners()
    try:
        return owners[op]
    except KeyError:
        raise InvalidWorkloadError(f"unknown op {op!r}; expected one of {sorted(owners)}") from None


def kind_of(workload: Workload) -> TaskKind:
    """The kind of ``workload``."""
    return kind_of_op(workload.op)
