"""One registration mechanism (tuner.registry.Registry) for the three extension points: kinds of task,
search strategies and measurement backends. Built-ins are listed without being imported, another
package's plug-ins come from entry points, and tests register and unregister their own."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

import tuner.registry
from tuner.backends.registry import BACKENDS, BackendOptions, BackendSpec, backend_for, backend_names, source_of
from tuner.measure.base import MeasureBackend, Source
from tuner.measure.simulator import Simulator
from tuner.registry import Registry
from tuner.search import STRATEGIES, RandomSearch, create_strategy, register, strategy_names, unregister
from tuner.space import ScheduleSpace
from tuner.task_kind import KINDS
from tuner.workloads import Dense

SPACE = ScheduleSpace(Dense(8, 32, 16), "sw26010")


def test_the_three_extension_points_are_registries_with_the_names_users_type() -> None:
    assert all(isinstance(r, Registry) for r in (KINDS, STRATEGIES, BACKENDS))
    assert strategy_names() == ["model", "random"]
    assert backend_names() == ["emulator", "simulator", "sunway"]
    assert KINDS.names() == ["builtin", "cpe_kernel", "expr"]
    assert source_of("simulator") is Source.SIMULATOR and source_of("sunway") is Source.HARDWARE


def test_listing_imports_nothing_and_a_plugin_is_imported_when_first_asked_for() -> None:
    # a fresh interpreter: importing the search package no longer registers "model" by importing it
    code = ("import sys\nfrom tuner.search import strategy_names, create_strategy\n"
            "assert strategy_names() == ['model', 'random']\n"
            "assert 'tuner.search.model_guided' not in sys.modules\n"
            "from tuner.space import ScheduleSpace\nfrom tuner.workloads import Dense\n"
            "create_strategy('model', ScheduleSpace(Dense(8, 32, 16), 'sw26010'))\n"
            "assert 'tuner.search.model_guided' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown search strategy 'nope'; expected one of \['model', 'random'\]"):
        create_strategy("nope", SPACE)
    with pytest.raises(ValueError, match=r"unknown backend 'gpu'; expected one of \['emulator', 'simulator'"):
        backend_for("gpu", "sw26010")


def test_a_registered_strategy_is_offered_until_unregistered() -> None:
    class Greedy(RandomSearch):
        name = "test_greedy"

    register("test_greedy", Greedy)
    try:
        assert "test_greedy" in strategy_names() and isinstance(create_strategy("test_greedy", SPACE), Greedy)
    finally:
        unregister("test_greedy")
    assert "test_greedy" not in strategy_names()


def test_a_registration_wins_over_a_builtin_until_unregistered() -> None:
    made: list[str] = []

    def quiet(target: str, o: BackendOptions) -> MeasureBackend:
        made.append(target)
        return Simulator(noise=0.0, seed=o.seed)

    BACKENDS.register("simulator", BackendSpec(Source.SIMULATOR, quiet))
    try:
        backend_for("simulator", "sw26010")
    finally:
        BACKENDS.unregister("simulator")
    assert made == ["sw26010"]
    backend_for("simulator", "sw26010")  # the built-in again
    assert made == ["sw26010"]


def test_an_object_that_is_not_a_plugin_of_the_point_is_refused() -> None:
    with pytest.raises(TypeError, match="BackendSpec"):
        BACKENDS.register("bad", object())  # type: ignore[arg-type]
    assert "bad" not in BACKENDS


def test_another_packages_plugins_come_from_its_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = [EntryPoint("tpe", "tuner.search.base:RandomSearch", "test.group"),
                EntryPoint("mine", "tuner.search.base:SearchStrategy", "test.group")]  # a built-in's name
    monkeypatch.setattr(tuner.registry, "entry_points", lambda group: [ep for ep in declared if ep.group == group])
    registry: Registry[object] = Registry("thing", "test.group", {"mine": "tuner.search.base:RandomSearch"})
    assert registry.names() == ["mine", "tpe"] and "tpe" in registry
    assert registry.get("tpe") is RandomSearch
    assert registry.get("mine") is RandomSearch  # a package cannot replace a built-in
    assert [name for name, _ in registry.items()] == ["mine", "tpe"]
