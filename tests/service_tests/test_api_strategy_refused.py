"""A strategy that a kind cannot honour is refused with a clear error, never swapped for another: a CPE
kernel task asked for a registered strategy it does not run (here one a test registers) is a 422 naming
the kind from the service, an UnsupportedStrategyError naming the kind and the strategies it runs from
in-process tuning, and one line on stderr from the command line. The cpe_kernel kind used to run its own
model-guided search whatever was asked for."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cpe_samples import POOL_SCRIPT
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from typer.testing import CliRunner

from cli.app import build_app
from db.orm import TaskRow
from service import errors
from tuner.errors import UnsupportedStrategyError
from tuner.search import RandomSearch, register, unregister
from tuner.tune import tune_workloads
from tuner.workloads import workload_from_json

POOL = {"op": "cpe_kernel", "name": "nn_max_pool2d", "script": POOL_SCRIPT}
OTHER = "test_other"


class OtherSearch(RandomSearch):
    name = OTHER


@pytest.fixture(autouse=True)
def other_strategy() -> Iterator[None]:
    register(OTHER, OtherSearch)  # registered, so offered: only the kind can refuse it
    yield
    unregister(OTHER)


def test_the_service_refuses_it_and_stores_nothing(api) -> None:
    with api.db.session() as s:
        before = s.scalar(select(func.count()).select_from(TaskRow))
    r = api.client.post("/api/v1/tasks", json={"workloads": [POOL], "target": "sw26010", "trials": 4,
                                               "strategy": OTHER}, headers=api.headers("submit"))
    assert r.status_code == 422, r.text
    # the refusal names what the kind runs, so the caller can ask again
    assert f"cpe_kernel task does not run the search strategy '{OTHER}'; it runs ['model', 'random']" in r.text, r.text
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TaskRow)) == before
    ok = api.client.post("/api/v1/tasks", json={"workloads": [{"op": "dense", "m": 8, "n": 32, "k": 32}],
                                                "target": "sw26010", "trials": 4, "strategy": OTHER},
                         headers=api.headers("submit"))
    assert ok.status_code == 201, ok.text  # a GEMM-like task runs every registered strategy


def test_in_process_tuning_refuses_it_naming_the_kind_and_its_strategies() -> None:
    with pytest.raises(UnsupportedStrategyError, match=rf"cpe_kernel task runs the search strategies "
                                                       rf"\['model', 'random'\], not '{OTHER}'"):
        tune_workloads([workload_from_json(POOL)], "sw26010", trials=4, strategy=OTHER, noise=0.0)


def test_the_command_line_says_so_in_one_line() -> None:
    result = CliRunner().invoke(build_app(), ["tune", "-w", json.dumps(POOL), "--strategy", OTHER, "--trials", "4"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: a cpe_kernel task runs the search strategies ['model', 'random'], "
                                          f"not '{OTHER}'"]


def test_the_service_maps_the_kinds_error_to_422() -> None:
    app = FastAPI()
    errors.install(app)

    @app.get("/refuse")
    def refuse() -> None:
        raise UnsupportedStrategyError("a cpe_kernel task runs the search strategies ['model', 'random'], not 'x'")

    r = TestClient(app).get("/refuse")
    assert r.status_code == 422 and "cpe_kernel" in r.json()["detail"][0]["msg"]
