"""Simulator profiles through the service: the REST round trip and its refusals, a simulator worker measuring
with the active profile its lease carries, results naming an unknown version refused, the compile-time lookup
preferring hardware times and saying so, and the driver never training on two profiles' times at once.
SQLite always, PostgreSQL when configured."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from api_helpers import Api, lease
from sqlalchemy import func, select
from storage_helpers import TARGET, WORKLOAD, task_with_jobs

from db import measurements as measurements_db
from db.orm import MeasurementRow, ProfileRow
from service.client import ServiceClient, ServiceError
from service.driver import TuningDriver
from service.lookup import ScheduleLookup
from service.settings import Settings
from service.worker import Worker
from tuner.backends.registry import BackendOptions, backend_for
from tuner.measure.simulator import Simulator
from tuner.profile import Profile, default_profile
from tuner.workloads import Dense

# ServiceClient passes per-request timeouts, which starlette's TestClient ignores (and warns about).
pytestmark = pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")

FITTED = default_profile(TARGET).with_values(
    {"block_overhead_cycles": 300.0, "dma_overlap": 0.0, "dma_wait_cycles": 2500.0},
    intervals={"dma_wait_cycles": (2000.0, 3000.0)}, fit={"source": "test", "cv_median_abs_log_err": 0.05})


def _post_profile(api: Api, document: Any, role: str = "admin", **params: Any) -> Any:
    return api.client.post("/api/v1/profiles", json=document, params=params, headers=api.headers(role))


def _stored_profiles(api: Api) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(ProfileRow)) or 0


def _post_results(api: Api, got: dict[str, Any], results: list[dict[str, Any]]) -> Any:
    return api.client.post("/api/v1/jobs/results", headers=api.headers("worker"),
                           json={"lease_token": got["lease_token"], "worker": "w1", "results": results})


def test_a_profile_goes_in_and_comes_back_with_its_version(api: Api) -> None:
    r = api.client.get(f"/api/v1/profiles/{TARGET}", headers=api.headers("read"))
    assert r.status_code == 200, r.text
    assert r.json() == {"target": TARGET, "active_version": 0, "active": default_profile(TARGET).to_json(),
                        "versions": []}
    r = _post_profile(api, FITTED.to_json())
    assert r.status_code == 201, r.text
    assert (r.json()["version"], r.json()["active"]) == (1, True)
    kept = _post_profile(api, FITTED.with_values({"dma_overlap": 0.5}).to_json(), activate=False)
    assert (kept.json()["version"], kept.json()["active"]) == (2, False)
    got = api.client.get(f"/api/v1/profiles/{TARGET}", headers=api.headers("read")).json()
    assert got["active_version"] == 1
    assert Profile.from_json(got["active"]) == FITTED.with_values({}, version=1)  # values, intervals and fit
    assert [(v["version"], v["active"]) for v in got["versions"]] == [(1, True), (2, False)]
    assert got["versions"][0]["fit"] == {"source": "test", "cv_median_abs_log_err": 0.05}
    r = api.client.post(f"/api/v1/profiles/{TARGET}/2/activate", headers=api.headers("admin"))
    assert r.status_code == 200 and r.json()["version"] == 2
    assert api.client.get(f"/api/v1/profiles/{TARGET}", headers=api.headers("read")).json()["active_version"] == 2
    assert api.client.post(f"/api/v1/profiles/{TARGET}/9/activate", headers=api.headers("admin")).status_code == 404
    # the other target is untouched: still the built-in profile
    pro = api.client.get("/api/v1/profiles/sw26010-pro", headers=api.headers("read")).json()
    assert (pro["active_version"], pro["versions"]) == (0, [])


def test_the_service_client_speaks_the_profile_routes(api: Api) -> None:
    admin = ServiceClient("http://testserver", api.tokens["admin"], http=api.client)
    stored = admin.post_profile(FITTED.to_json())
    assert stored["version"] == 1
    assert admin.get_profile(TARGET)["active"]["parameters"] == FITTED.to_json()["parameters"]
    assert admin.activate_profile(TARGET, 0)["version"] == 0
    assert admin.get_profile(TARGET)["active_version"] == 0
    with pytest.raises(ServiceError) as err:
        admin.post_profile({"target": "sw9", "parameters": {}})
    assert err.value.status == 422 and "invalid profile" in err.value.detail


BAD = [
    ({**FITTED.to_json(), "parameters": {**FITTED.to_json()["parameters"], "dma_overlap": {"value": 3.0}}},
     "dma_overlap = 3.0 is outside its bounds"),
    ({**FITTED.to_json(), "parameters": {"dma_overlap": {"value": 0.5}}}, "must set exactly the parameters"),
    ({**FITTED.to_json(), "target": "sw9"}, "sw9"),
    ({"target": TARGET}, "a profile is an object with"),
    ({**FITTED.to_json(), "version": "1"}, "'version' an integer"),
]


@pytest.mark.parametrize(("document", "reason"), BAD)
def test_a_bad_document_is_a_422_that_says_why_and_stores_nothing(api: Api, document: Any, reason: str) -> None:
    r = _post_profile(api, document)
    assert r.status_code == 422, r.text
    (issue,) = r.json()["detail"]
    assert issue["msg"].startswith("invalid profile") and reason in issue["msg"]
    assert _stored_profiles(api) == 0
    assert _post_profile(api, [FITTED.to_json()]).status_code == 422  # not an object at all
    assert api.client.get("/api/v1/profiles/sw9", headers=api.headers("read")).status_code == 422
    assert _stored_profiles(api) == 0


def test_only_an_admin_token_stores_or_activates_a_profile(api: Api) -> None:
    assert api.client.post("/api/v1/profiles", json=FITTED.to_json()).status_code == 401
    assert api.client.post("/api/v1/profiles", json=FITTED.to_json(),
                           headers={"Authorization": "Bearer not-a-token"}).status_code == 401
    for role in ("read", "submit", "worker"):
        assert _post_profile(api, FITTED.to_json(), role=role).status_code == 403
        assert api.client.post(f"/api/v1/profiles/{TARGET}/0/activate", headers=api.headers(role)).status_code == 403
    assert _stored_profiles(api) == 0
    assert api.client.get(f"/api/v1/profiles/{TARGET}").status_code == 401
    assert api.client.get(f"/api/v1/profiles/{TARGET}", headers=api.headers("worker")).status_code == 403


@pytest.mark.slow
def test_a_simulator_worker_measures_with_the_active_profile_of_its_lease(api: Api) -> None:
    _post_profile(api, FITTED.with_values({"dma_overlap": 0.9}).to_json())  # version 1, soon inactive
    assert _post_profile(api, FITTED.to_json()).json()["version"] == 2
    task_with_jobs(api.db, 6)
    client = ServiceClient("http://testserver", api.tokens["worker"], http=api.client)
    options = BackendOptions(noise=0.0)
    worker = Worker(client, TARGET, backend_for("simulator", TARGET, options), name="w-sim", batch=3,
                    wait_seconds=0.2, max_jobs=6, idle_exit=2.0, options=options)
    runner = threading.Thread(target=worker.run)
    runner.start()
    runner.join(60)
    assert not runner.is_alive() and worker.counts["posted"] == 6 and worker.fatal is None
    with api.db.session() as s:
        rows = s.execute(select(MeasurementRow.config, MeasurementRow.times, MeasurementRow.profile_version)).all()
    assert len(rows) == 6 and {version for *_, version in rows} == {2}
    # the times are the active profile's: the built-in profile times these configs differently
    fitted = Simulator(noise=0.0, profile=FITTED.with_values({}, version=2))
    builtin = Simulator(noise=0.0)
    for config, times, _ in rows:
        (mine,) = fitted.measure(WORKLOAD, TARGET, [config])
        (other,) = builtin.measure(WORKLOAD, TARGET, [config])
        assert times == pytest.approx(list(mine.times)) and times != pytest.approx(list(other.times))


def test_a_profile_a_worker_cannot_read_hands_the_jobs_back(api: Api) -> None:
    task_with_jobs(api.db, 2)
    client = ServiceClient("http://testserver", api.tokens["worker"], http=api.client)
    options = BackendOptions()
    worker = Worker(client, TARGET, backend_for("simulator", TARGET, options), name="w1", options=options)
    got = lease(api, max_jobs=2, backend="simulator")
    assert got["profile"] == default_profile(TARGET).to_json()
    worker._process({**got, "profile": {**got["profile"], "parameters": {"newer_cost": {"value": 1.0}}}})
    assert worker.fatal is not None and "cannot be read" in worker.fatal
    assert worker.counts["released"] == 2  # nothing measured with the wrong costs, nothing blamed
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 0


def test_a_result_naming_a_profile_its_target_lacks_is_refused_and_stores_nothing(api: Api) -> None:
    task_with_jobs(api.db, 2)
    _post_profile(api, default_profile("sw26010-pro").to_json())  # version 1 exists, but for the other target
    got = lease(api, max_jobs=2)
    a, b = (j["id"] for j in got["jobs"])
    r = _post_results(api, got, [
        {"job_id": a, "status": "ok", "times": [1e-3], "source": "simulator", "details": {"profile_version": 0}},
        {"job_id": b, "status": "ok", "times": [1e-3], "source": "simulator", "details": {"profile_version": 1}}])
    assert r.status_code == 422 and f"{TARGET} has no profile version 1" in r.text
    r = _post_results(api, got, [
        {"job_id": a, "status": "ok", "times": [1e-3], "source": "simulator", "details": {"profile_version": -1}}])
    assert r.status_code == 422
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 0
    r = _post_results(api, got, [
        {"job_id": a, "status": "ok", "times": [1e-3], "source": "simulator", "details": {"profile_version": 0}}])
    assert r.status_code == 200 and r.json()["results"][0]["outcome"] == "stored"


def _best(api: Api) -> dict[str, Any]:
    r = api.client.get("/api/v1/schedules/best", params={"workload_key": WORKLOAD.key, "target": TARGET},
                       headers=api.headers("read"))
    assert r.status_code == 200, r.text
    return r.json()


def test_the_lookup_prefers_a_hardware_time_and_says_which_it_served(api: Api) -> None:
    _post_profile(api, FITTED.to_json())
    task_with_jobs(api.db, 4)
    got = lease(api, max_jobs=4)
    sim_fast, sim_slow, hw_slow, hw_fast = got["jobs"]
    _post_results(api, got, [
        {"job_id": sim_fast["id"], "status": "ok", "times": [1e-4], "source": "simulator",
         "details": {"profile_version": 1}},
        {"job_id": sim_slow["id"], "status": "ok", "times": [9e-4], "source": "simulator"}])
    found = _best(api)
    assert (found["config_hash"], found["source"], found["profile_version"]) == (sim_fast["config_hash"],
                                                                                 "simulator", 1)
    _post_results(api, got, [
        {"job_id": hw_slow["id"], "status": "ok", "times": [8e-3], "source": "hardware"},
        {"job_id": hw_fast["id"], "status": "ok", "times": [4e-3], "source": "hardware"}])
    found = _best(api)
    # the simulator's 0.1 ms is faster on paper; a Sunway node timed this workload, and its best is served
    assert (found["config_hash"], found["source"], found["profile_version"]) == (hw_fast["config_hash"],
                                                                                 "hardware", None)
    assert found["mean_time"] == pytest.approx(4e-3)
    batch = api.client.post("/api/v1/schedules/best/batch", json={"target": TARGET, "workload_keys": [WORKLOAD.key]},
                            headers=api.headers("read")).json()
    assert batch["found"][WORKLOAD.key]["source"] == "hardware"
    assert batch["found"][WORKLOAD.key]["config_hash"] == hw_fast["config_hash"]
    # and so does the compiler's lookup client
    compiler = ScheduleLookup("http://testserver", TARGET, token=api.tokens["read"], http=api.client)
    assert compiler.best(WORKLOAD) == hw_fast["config"]
    assert compiler.source_of(WORKLOAD) == {"source": "hardware", "profile_version": None}


def test_the_driver_trains_on_one_profile_at_a_time(api: Api) -> None:
    other = Dense(32, 64, 128, "float32")
    task_id = task_with_jobs(api.db, 9)
    task_with_jobs(api.db, 4, workload=other)
    _post_profile(api, FITTED.with_values({"dma_overlap": 0.9}).to_json())  # version 1
    _post_profile(api, FITTED.to_json())  # version 2, active
    got = lease(api, max_jobs=13)
    mine = [j for j in got["jobs"] if j["workload_key"] == WORKLOAD.key]
    theirs = [j for j in got["jobs"] if j["workload_key"] == other.key]
    v1, v2, hw = [1e-4, 2e-4, 3e-4], [2e-3, 3e-3, 4e-3], [5e-3, 6e-3, 7e-3]

    def result(job: dict[str, Any], seconds: float, version: int | None) -> dict[str, Any]:
        if version is None:
            return {"job_id": job["id"], "status": "ok", "times": [seconds], "source": "hardware"}
        return {"job_id": job["id"], "status": "ok", "times": [seconds], "source": "simulator",
                "details": {"profile_version": version}}

    r = _post_results(api, got, [result(j, t, 1) for j, t in zip(mine[:3], v1)]
                      + [result(j, t, 2) for j, t in zip(mine[3:6], v2)]
                      + [result(j, t, None) for j, t in zip(mine[6:], hw)]
                      + [result(j, 1e-3, v) for j, v in zip(theirs, (1, 1, 2, None))])
    assert r.status_code == 200 and {o["outcome"] for o in r.json()["results"]} == {"stored"}

    driver = TuningDriver(api.db, Settings(database_url=api.db.url, driver_enabled=False))
    told = driver.strategy(task_id)
    # version 2 is active: its three simulated times and the three hardware ones, never version 1's
    assert sorted(told.measured_time) == pytest.approx(sorted(v2 + hw))
    assert told.best_time == pytest.approx(2e-3)
    assert api.client.post(f"/api/v1/profiles/{TARGET}/1/activate", headers=api.headers("admin")).status_code == 200
    retold = driver.strategy(task_id)
    assert retold is not told  # rebuilt: what the old one learnt came from another profile's times
    assert sorted(retold.measured_time) == pytest.approx(sorted(v1 + hw))
    # the same cut for the transfer history (the target's other workloads)
    with api.db.session() as s:
        wid = s.scalar(select(MeasurementRow.workload_id).where(MeasurementRow.job_id == mine[0]["id"]))
        tid = s.scalar(select(MeasurementRow.target_id).where(MeasurementRow.job_id == mine[0]["id"]))
        everything = measurements_db.measured_elsewhere(s, tid, wid, 100)
        one = measurements_db.measured_elsewhere(s, tid, wid, 100, profile_version=2)
    assert len(everything) == 4 and len(one) == 2  # version 2's row and the hardware row


def test_a_submissions_task_weights_are_baselines_under_the_active_profile(api: Api) -> None:
    from tuner.baseline import baseline_time

    stored = Profile.from_json(_post_profile(api, FITTED.to_json()).json()["profile"])
    layer = Dense(1, 256, 512, "float32")
    body = {"model": "m", "target": TARGET, "budget": 8, "strategy": "random",
            "layers": [{"name": "fc", "workload": layer.to_json(), "calls": 3}]}
    r = api.client.post("/api/v1/submissions", json=body, headers=api.headers("submit"))
    assert r.status_code == 201, r.text
    TuningDriver(api.db, Settings(database_url=api.db.url, driver_enabled=False)).run_once()
    report = api.client.get(f"/api/v1/submissions/{r.json()['id']}", headers=api.headers("read")).json()
    fitted = baseline_time(layer, TARGET, stored)
    assert fitted is not None and fitted != pytest.approx(baseline_time(layer, TARGET))
    # the driver's weight (3 calls x one baseline call), which the report's baseline is read from, was
    # simulated with the profile the tuned times are measured with
    assert report["layers"][0]["baseline_time"] == pytest.approx(fitted)
    assert report["baseline_total"] == pytest.approx(3 * fitted)


def test_a_time_simulated_under_a_fitted_profile_is_served_with_its_interval(api: Api) -> None:
    from tuner.calibrate.intervals import simulated_seconds

    draws = [{**FITTED.values, "dma_wait_cycles": w} for w in (2000.0, 2250.0, 2500.0, 2750.0, 3000.0)]
    _post_profile(api, FITTED.to_json())  # version 1: no fit draws
    _post_profile(api, FITTED.with_values({}, fit={"draws": draws}).to_json())  # version 2, active
    task_with_jobs(api.db, 2)
    got = lease(api, max_jobs=2)
    under_1, under_2 = got["jobs"]
    _post_results(api, got, [{"job_id": under_1["id"], "status": "ok", "times": [1e-4], "source": "simulator",
                              "details": {"profile_version": 1}}])
    assert _best(api)["interval_s"] is None  # its profile has no draws to take an interval over
    _post_results(api, got, [{"job_id": under_2["id"], "status": "ok", "times": [5e-5], "source": "simulator",
                              "details": {"profile_version": 2}}])
    found = _best(api)
    assert (found["config_hash"], found["profile_version"]) == (under_2["config_hash"], 2)
    lo, hi = found["interval_s"]
    exact = simulated_seconds(FITTED, WORKLOAD, under_2["config"])  # the profile's own (middle) wait
    assert lo < exact < hi


def test_activating_a_profile_changes_the_served_simulated_best_at_once(api: Api) -> None:
    _post_profile(api, FITTED.to_json())  # version 1, active
    task_with_jobs(api.db, 2)
    got = lease(api, max_jobs=2)
    under_0, under_1 = got["jobs"]
    _post_results(api, got, [
        {"job_id": under_0["id"], "status": "ok", "times": [1e-4], "source": "simulator",
         "details": {"profile_version": 0}},
        {"job_id": under_1["id"], "status": "ok", "times": [9e-4], "source": "simulator",
         "details": {"profile_version": 1}}])
    assert _best(api)["profile_version"] == 1  # the active profile's time, though the built-in one's is faster
    r = api.client.post(f"/api/v1/profiles/{TARGET}/0/activate", headers=api.headers("admin"))
    assert r.status_code == 200, r.text
    assert (_best(api)["profile_version"], _best(api)["config_hash"]) == (0, under_0["config_hash"])
