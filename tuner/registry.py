"""Named plug-ins of one extension point: the one registration mechanism of kinds, strategies and backends.

Each extension point of swtune (kinds of task, search strategies, measurement backends) is a
:class:`Registry`. A plug-in is named by a reference ``"module:attribute"``: swtune's built-ins in the
code of the extension point (``builtins``), another package's as entry points, one line each in its
``pyproject.toml``::

    [project.entry-points."swtune.strategies"]
    tpe = "my_package.tpe:TpeSearch"

The registry lists the names without importing anything and imports a plug-in the first time it is
asked for (the plugin mechanism of pytest, TVM and Optuna's integrations). A built-in cannot be
replaced by an installed package of the same name. Tests and notebooks register their own with
:meth:`Registry.register`, which wins over a declared plug-in of the same name until it is unregistered.

This module is domain-level: it imports nothing of swtune.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The plug-ins of one extension point by name: ``what`` names one in messages ("search strategy"),
    ``group`` is its entry-point group, ``builtins`` maps swtune's own to their references, and ``check``
    (optional) refuses an object that is not one (TypeError) when it is registered or loaded."""

    def __init__(self, what: str, group: str, builtins: Mapping[str, str] | None = None,
                 check: Callable[[T], None] | None = None) -> None:
        self.what = what
        self.group = group
        self.builtins = dict(builtins or {})
        self._check = check
        self._lock = threading.RLock()
        self._declared: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, T] = {}  # declared plug-ins imported so far
        self._registered: dict[str, T] = {}  # explicit registrations, in order
        self.version = 0  # changes with every registration: a derived index (ops -> kind) rebuilds on it

    def _entry_points(self) -> dict[str, EntryPoint]:
        with self._lock:
            if self._declared is None:
                declared = {name: EntryPoint(name, ref, self.group) for name, ref in self.builtins.items()}
                for ep in entry_points(group=self.group):
                    declared.setdefault(ep.name, ep)  # a built-in, or the first package declaring the name
                self._declared = declared
            return self._declared

    def register(self, name: str, obj: T) -> T:
        """Make ``name`` answer with ``obj`` (replacing an earlier registration or a declared plug-in)."""
        if self._check is not None:
            self._check(obj)
        with self._lock:
            self._registered.pop(name, None)  # a replacement moves to the end: the latest one is last
            self._registered[name] = obj
            self.version += 1
        return obj

    def unregister(self, name: str) -> None:
        """Forget what :meth:`register` put under ``name`` (a declared plug-in of that name returns)."""
        with self._lock:
            if self._registered.pop(name, None) is not None:
                self.version += 1

    def names(self) -> list[str]:
        """Every name the registry answers to, sorted; nothing is imported."""
        return sorted({*self._entry_points(), *self._registered})

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._registered or name in self._entry_points())

    def get(self, name: str) -> T:
        """The plug-in ``name`` (imported on first use); ValueError listing the names otherwise."""
        if name in self._registered:
            return self._registered[name]
        if name in self._loaded:
            return self._loaded[name]
        declared = self._entry_points()
        if name not in declared:
            raise ValueError(f"unknown {self.what} {name!r}; expected one of {self.names()}")
        with self._lock:
            if name not in self._loaded:
                obj = declared[name].load()
                if self._check is not None:
                    self._check(obj)
                self._loaded[name] = obj
            return self._loaded[name]

    def items(self) -> list[tuple[str, T]]:
        """Every plug-in, each imported: the built-ins and the installed ones in their order, then the
        registered ones in the order they were registered."""
        declared = [name for name in self._entry_points() if name not in self._registered]
        return [(name, self.get(name)) for name in [*declared, *self._registered]]
