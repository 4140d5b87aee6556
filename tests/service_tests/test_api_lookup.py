"""Compile-time lookup over HTTP: the best config equals the minimum of the measurements table."""

from __future__ import annotations

import random

from api_helpers import lease
from sqlalchemy import select
from storage_helpers import WORKLOAD, task_with_jobs

from db.orm import MeasurementRow

PARAMS = {"workload_key": WORKLOAD.key, "target": "sw26010"}


def best(api, role="read", **params):
    return api.client.get("/api/v1/schedules/best", params={**PARAMS, **params}, headers=api.headers(role))


def test_nothing_tuned_is_404_with_a_reason(api) -> None:
    r = best(api)
    assert r.status_code == 404
    assert "no tuned schedule for workload 'dense-m16-n64-k128-float32' on sw26010" in r.json()["detail"]
    assert best(api, target="sw9").status_code == 422


def test_lookup_returns_the_minimum_of_the_table(api) -> None:
    task_with_jobs(api.db, 30)
    got = lease(api, max_jobs=30)
    rng = random.Random(3)
    results = [{"job_id": j["id"], "status": "ok", "times": [rng.uniform(1e-4, 1e-2)], "source": "simulator"}
               if i % 5 else {"job_id": j["id"], "status": "ldm_overflow", "source": "simulator", "error": "LDM"}
               for i, j in enumerate(got["jobs"])]
    api.client.post("/api/v1/jobs/results", json={"lease_token": got["lease_token"], "worker": "w1",
                                                  "results": results}, headers=api.headers("worker"))
    with api.db.session() as s:
        rows = s.execute(select(MeasurementRow.mean_time, MeasurementRow.config_hash)
                         .where(MeasurementRow.status == "ok")).all()
    t_min, h_min = min(rows)
    found = best(api).json()
    assert found["mean_time"] == t_min and found["config_hash"] == h_min
    assert found["gflops"] > 0 and found["source"] == "simulator" and found["worker"] == "w1"
    batch = api.client.post("/api/v1/schedules/best/batch",
                            json={"target": "sw26010", "workload_keys": [WORKLOAD.key, "dense-m1-n2-k3-float32"]},
                            headers=api.headers("read")).json()
    assert batch["found"][WORKLOAD.key]["config_hash"] == h_min
    assert batch["missing"] == ["dense-m1-n2-k3-float32"]


def test_the_lookup_cache_serves_fresh_stale_and_drops_on_store(backend_url) -> None:
    import time

    from service.routes.schedules import LookupCache

    cache = LookupCache(ttl=0.1)
    gen = cache.generation
    cache.put(("k", "t"), 200, b"old", gen)
    assert cache.get(("k", "t")) == (200, b"old", True)
    time.sleep(0.15)
    assert cache.get(("k", "t")) == (200, b"old", False)  # stale: served while a refresh runs
    time.sleep(0.35)
    assert cache.get(("k", "t")) is None  # too old to serve
    cache.clear()
    cache.put(("k", "t"), 200, b"read before the clear", gen)
    assert cache.get(("k", "t")) is None

    from api_helpers import make_api

    with make_api(backend_url, lookup_cache_seconds=30) as api:
        task_with_jobs(api.db, 2)
        got = lease(api, max_jobs=2)
        (slow, fast) = got["jobs"]
        post = {"lease_token": got["lease_token"], "worker": "w1"}
        api.client.post("/api/v1/jobs/results", headers=api.headers("worker"), json={**post, "results": [
            {"job_id": slow["id"], "status": "ok", "times": [5e-3], "source": "simulator"}]})
        assert best(api).json()["config_hash"] == slow["config_hash"]
        assert best(api).json()["config_hash"] == slow["config_hash"]  # from the cache
        api.client.post("/api/v1/jobs/results", headers=api.headers("worker"), json={**post, "results": [
            {"job_id": fast["id"], "status": "ok", "times": [1e-3], "source": "simulator"}]})
        assert best(api).json()["config_hash"] == fast["config_hash"]  # the store dropped the cache
