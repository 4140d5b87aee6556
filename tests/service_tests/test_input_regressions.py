"""Regression tests of issue #13, one or more per numbered defect, each on SQLite and PostgreSQL:
bad input is refused with a 4xx (never a 500 or a retryable 503), stores nothing, and leaves the
lookup serving the real best schedule."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
import yaml
from api_helpers import lease, make_api
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError, OperationalError
from storage_helpers import task_with_jobs
from wire import detail_text

from db.orm import MeasurementRow, TaskRow
from db.records import Importer
from db.validation import mean, time_floor
from tuner.space.ops import tile_choices
from tuner.workloads import MAX_EXTENT, workload_from_json

ROOT = Path(__file__).resolve().parents[2]
WL_KEY = "dense-m16-n64-k128-float32"


def n_measurements(api) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(MeasurementRow))


def stored_record(api) -> dict:
    """One valid exported record (a measured job of the test workload)."""
    task_with_jobs(api.db, 2)
    got = lease(api, max_jobs=1, backend="simulator")
    job = got["jobs"][0]
    r = api.client.post(f"/api/v1/jobs/{job['id']}/result", headers=api.headers("worker"), json={
        "status": "ok", "times": [1e-3], "source": "simulator", "lease_token": got["lease_token"], "worker": "w1"})
    assert r.status_code == 200, r.text
    lines = api.client.get("/api/v1/records/export", headers=api.headers("read")).text.splitlines()
    return json.loads(lines[0])


def import_(api, body: bytes | str):
    data = body.encode() if isinstance(body, str) else body
    return api.client.post("/api/v1/records/import", content=data, headers=api.headers("admin"))


def best(api):
    return api.client.get("/api/v1/schedules/best", params={"workload_key": WL_KEY, "target": "sw26010"},
                          headers=api.headers("read"))


def post_times(api, times_json: str, *, backend: str = "simulator", source: str = "simulator"):
    task_with_jobs(api.db, 1)
    got = lease(api, backend=backend)
    raw = (f'{{"status": "ok", "source": "{source}", "lease_token": "{got["lease_token"]}", "worker": "w1", '
           f'"times": {times_json}}}')
    return api.client.post(f"/api/v1/jobs/{got['jobs'][0]['id']}/result", content=raw,
                           headers={**api.headers("worker"), "Content-Type": "application/json"})


# 1. import accepts any config --------------------------------------------------------------------
@pytest.mark.parametrize("config", [{"bogus": 1}, "missing_one", "wrong_type", "not_a_choice"])
def test_1_import_refuses_configs_outside_the_space(api, config) -> None:
    rec = stored_record(api)
    good = rec["config"]
    if config == "missing_one":
        config = {k: v for k, v in good.items() if k != "simd"}
    elif config == "wrong_type":
        config = {**good, "unroll": float(good["unroll"])}  # 4.0 is not the integer choice 4
    elif config == "not_a_choice":
        config = {**good, "tile_m": 3}
    before = best(api).json()
    r = import_(api, json.dumps({**rec, "config": config, "config_hash": None, "times": [1e-6]}) + "\n")
    assert r.status_code == 422 and "config" in detail_text(r)
    assert n_measurements(api) == 1 and best(api).json() == before


# 2. a huge size stalls the driver ----------------------------------------------------------------
def test_2_huge_workloads_are_a_clear_422(api) -> None:
    r = api.client.post("/api/v1/tasks", headers=api.headers("submit"), json={
        "workloads": [{"op": "dense", "m": 200_000_000, "n": 1, "k": 1}], "target": "sw26010", "trials": 4})
    assert r.status_code == 422 and "maximum extent" in detail_text(r)
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TaskRow)) == 0


def test_2_tile_choices_do_not_loop_over_the_extent() -> None:
    # divisors come from the factorisation; 256 of them are thinned to 16 choices incl. the extent
    extent = 2 * 3 * 5 * 7 * 11 * 13 * 17 * 19  # 9699690, 256 divisors
    choices = tile_choices(extent)
    assert len(choices) == 16 and choices[-1] == extent and all(c <= extent for c in choices)
    assert tile_choices(MAX_EXTENT)[-1] == MAX_EXTENT
    assert tile_choices(200_000_000)[-1] == 200_000_000  # fast even beyond the bound
    assert tile_choices(12) == (1, 2, 3, 4, 6, 8, 12)


# 3. an overflowing mean breaks export ------------------------------------------------------------
def test_3_times_that_overflow_the_mean_are_refused_and_export_stays_json(api) -> None:
    r = post_times(api, "[1e308, 1e308]")
    assert r.status_code == 422 and "ceiling" in detail_text(r)
    rec = stored_record(api)
    r = import_(api, json.dumps({**rec, "times": [1e308, 1e308], "mean_time": None}) + "\n")
    assert r.status_code == 422
    exported = api.client.get("/api/v1/records/export", headers=api.headers("read")).text
    assert "Infinity" not in exported and all(json.loads(line) for line in exported.splitlines())
    assert mean((1e308, 1e308)) == 1e308  # the mean itself cannot overflow


# 4. a deeply nested imported config breaks lookups -----------------------------------------------
def test_4_deeply_nested_configs_and_details_are_refused_and_lookups_keep_working(api) -> None:
    rec = stored_record(api)
    nested: object = 1
    for _ in range(200):
        nested = {"a": nested}
    for bad in ({**rec, "config": {**rec["config"], "tile_m": nested}, "config_hash": None},
                {**rec, "details": nested}):
        r = import_(api, json.dumps(bad) + "\n")
        assert r.status_code == 422
    assert best(api).status_code == 200


# 5. out-of-range integers ------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/v1/tasks/{n}", "/api/v1/tasks/{n}/cancel"])
@pytest.mark.parametrize("n", [2**31, 2**63, 2**64, -1, 0])
def test_5_out_of_range_task_ids_are_422(api, path, n) -> None:
    method = api.client.post if path.endswith("cancel") else api.client.get
    r = method(path.format(n=n), headers=api.headers("admin"))
    assert r.status_code == 422, r.text
    assert isinstance(r.json()["detail"], list)


@pytest.mark.parametrize("n", [2**63, 2**64])
def test_5_out_of_range_job_ids_are_422(api, n) -> None:
    body = {"status": "ok", "times": [1e-3], "source": "simulator", "lease_token": "x" * 16, "worker": "w1"}
    r = api.client.post(f"/api/v1/jobs/{n}/result", json=body, headers=api.headers("worker"))
    assert r.status_code == 422
    r = api.client.post("/api/v1/jobs/results", headers=api.headers("worker"), json={
        "lease_token": "x" * 16, "worker": "w1", "results": [{**{k: body[k] for k in ("status", "times", "source")},
                                                              "job_id": n}]})
    assert r.status_code == 422
    r = api.client.post("/api/v1/jobs/release", headers=api.headers("worker"),
                        json={"lease_token": "x" * 16, "worker": "w1", "job_ids": [n]})
    assert r.status_code == 422


def test_5_workloads_whose_flops_overflow_int64_are_422(api) -> None:
    r = api.client.post("/api/v1/tasks", headers=api.headers("submit"), json={
        "workloads": [{"op": "batch_matmul", "b": 2**24, "m": 2**24, "n": 2**24, "k": 2**24}],
        "target": "sw26010", "trials": 4})
    assert r.status_code == 422 and "FLOPs" in detail_text(r)


def test_5_a_refused_request_is_not_retried_by_the_client(api) -> None:
    from service.client import ServiceClient, ServiceError

    calls = []
    with ServiceClient("http://testserver", api.tokens["admin"], http=api.client, backoff=0.01) as client:
        client.http.event_hooks = {"request": [calls.append], "response": []}
        with pytest.raises(ServiceError) as err:
            client.task(2**31)
    assert err.value.status == 422 and len(calls) <= 1


def test_5_database_errors_map_to_4xx_and_only_outages_to_503(api) -> None:
    import asyncio

    from sqlalchemy.exc import DataError, IntegrityError

    from service.errors import _storage_handler

    def status(exc: Exception) -> int:
        return asyncio.run(_storage_handler(None, exc)).status_code  # type: ignore[arg-type]

    if api.db.dialect == "postgresql":  # a real "integer out of range" from the server
        with pytest.raises(DataError) as err, api.db.session() as s:
            s.execute(text("SELECT CAST(:v AS INTEGER)"), {"v": 2**40})
        assert status(err.value) == 422
    assert status(IntegrityError("INSERT", {}, Exception("duplicate key"))) == 409
    assert status(DataError("INSERT", {}, Exception("value too long"))) == 422
    lost = OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))
    lost.connection_invalidated = True
    assert status(lost) == 503


# 6. wrong JSON types in workloads ----------------------------------------------------------------
@pytest.mark.parametrize("workload", [
    {"op": ["dense"], "m": 1, "n": 1, "k": 1}, {"op": {"x": 1}, "m": 1, "n": 1, "k": 1},
    {"op": "dense", "m": 1, "n": 1, "k": 1, "dtype": ["float32"]}, {"op": "dense", "m": "1", "n": 1, "k": 1},
    {"op": "dense", "m": 1.0, "n": 1, "k": 1}, {"op": "dense", "m": True, "n": 1, "k": 1}, {"op": None}])
def test_6_wrongly_typed_workloads_are_422(api, workload) -> None:
    r = api.client.post("/api/v1/tasks", headers=api.headers("submit"),
                        json={"workloads": [workload], "target": "sw26010", "trials": 4})
    assert r.status_code == 422, r.text
    assert "unhashable" not in detail_text(r)


# 7. export with an unknown target ----------------------------------------------------------------
def test_7_export_checks_its_arguments_before_the_first_byte(api) -> None:
    stored_record(api)
    r = api.client.get("/api/v1/records/export", params={"target": "sw99"}, headers=api.headers("read"))
    assert r.status_code == 422 and "unknown target" in detail_text(r)
    ok = api.client.get("/api/v1/records/export", params={"target": "SW26010"}, headers=api.headers("read"))
    assert ok.status_code == 200 and len(ok.text.splitlines()) == 1


def test_7b_export_with_a_nul_in_the_workload_key_is_a_422_not_a_cut_stream(api) -> None:
    # schemathesis found this on PostgreSQL: the query failed after the stream's headers were sent
    stored_record(api)
    r = api.client.get("/api/v1/records/export", params={"workload_key": "conv2d\x00"},
                       headers=api.headers("read"))
    assert r.status_code == 422 and "NUL" in detail_text(r)
    empty = api.client.get("/api/v1/records/export", params={"workload_key": "no-such-key"},
                           headers=api.headers("read"))
    assert empty.status_code == 200 and empty.text == ""


# 8. other bad import lines -----------------------------------------------------------------------
@pytest.mark.parametrize("change", ["details_list", "details_str", "worker_300", "times_str", "status_list",
                                    "target_list", "created_at_int"])
def test_8_bad_import_fields_are_422_and_store_nothing(api, change) -> None:
    rec = stored_record(api)
    bad = {"details_list": {"details": [1, 2]}, "details_str": {"details": "abc"},
           "worker_300": {"worker": "w" * 300}, "times_str": {"times": ["1"]}, "status_list": {"status": ["ok"]},
           "target_list": {"target": ["sw26010"]}, "created_at_int": {"created_at": 5}}[change]
    other = {**rec, "config": {**rec["config"], "unroll": 1 if rec["config"]["unroll"] != 1 else 2},
             "config_hash": None}
    r = import_(api, json.dumps({**other, **bad}) + "\n")
    assert r.status_code == 422, r.text
    assert n_measurements(api) == 1


def test_8_deep_brackets_and_junk_lines_are_422(api) -> None:
    for body in ("[" * 50_000 + "\n", "\x00\xff\n", b"\xff\xfe\n", '{"version": "1"}\n', "[]\n", "1e999\n"):
        r = import_(api, body)
        assert r.status_code == 422, (body[:10], r.text)


def test_8_import_is_all_or_nothing(api) -> None:
    rec = stored_record(api)
    other = {**rec, "config": {**rec["config"], "unroll": 1 if rec["config"]["unroll"] != 1 else 2},
             "config_hash": None}
    r = import_(api, json.dumps(other) + "\n" + json.dumps({**other, "details": [1]}) + "\n")
    assert r.status_code == 422 and "line 2" in detail_text(r)
    assert n_measurements(api) == 1
    assert import_(api, json.dumps(other) + "\n").json() == {"imported": 1, "skipped": 0}


# 9. any submit token can cancel any task ---------------------------------------------------------
def test_9_only_the_submitter_or_an_admin_cancels_a_task(api) -> None:
    from db import tokens as tokens_db

    with api.db.session() as s:
        other = tokens_db.create_token(s, "submit", "other-submitter")[1]
    body = {"workloads": [{"op": "dense", "m": 1, "n": 64, "k": 64}], "target": "sw26010", "trials": 4}
    ids = [api.client.post("/api/v1/tasks", json=body, headers=api.headers("submit")).json()["task_ids"][0]
           for _ in range(2)]
    r = api.client.post(f"/api/v1/tasks/{ids[0]}/cancel", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 403 and "another submitter" in detail_text(r)
    assert api.client.get(f"/api/v1/tasks/{ids[0]}", headers=api.headers("read")).json()["state"] == "active"
    assert api.client.post(f"/api/v1/tasks/{ids[0]}/cancel", headers=api.headers("submit")).json()["state"] \
        == "cancelled"
    assert api.client.post(f"/api/v1/tasks/{ids[1]}/cancel", headers=api.headers("admin")).json()["state"] \
        == "cancelled"


# 10. impossible or wrongly typed results ---------------------------------------------------------
@pytest.mark.parametrize("times", ["[1e-300]", '["1"]', "[true]", "[1e-12]"])
def test_10_impossible_or_mistyped_times_are_422(api, times) -> None:
    r = post_times(api, times)
    assert r.status_code == 422, r.text
    assert n_measurements(api) == 0


def test_10_the_floor_is_the_workloads_flops_at_peak() -> None:
    wl = workload_from_json({"op": "dense", "m": 16, "n": 64, "k": 128})
    assert time_floor(wl, "sw26010") == pytest.approx(max(1e-9, wl.flops / 742.4e9), rel=1e-3)


def test_10_trials_as_a_string_is_422(api) -> None:
    r = api.client.post("/api/v1/tasks", headers=api.headers("submit"), json={
        "workloads": [{"op": "dense", "m": 1, "n": 64, "k": 64}], "target": "sw26010", "trials": "10"})
    assert r.status_code == 422


def test_10_a_simulator_worker_cannot_claim_hardware(api) -> None:
    r = post_times(api, "[1e-3]", backend="simulator", source="hardware")
    assert r.status_code == 422 and "hardware" in detail_text(r)
    assert n_measurements(api) == 0


# 11. the worker token in ps ----------------------------------------------------------------------
def test_11_compose_passes_no_token_in_argv_and_the_worker_reads_a_token_file(tmp_path) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        command = service.get("command", "")
        command = " ".join(command) if isinstance(command, list) else command
        assert "--token" not in command and "--value" not in command, name
        assert "TOKEN" not in command, name
    assert compose["services"]["worker"]["environment"]["SWTUNE_TOKEN"].startswith("${SWTUNE_WORKER_TOKEN")
    from cli.service_commands import read_token

    path = tmp_path / "token"
    path.write_text("swt_secret_value\n")
    assert read_token(None, path) == "swt_secret_value"
    with pytest.raises(ValueError):
        read_token("x", path)


# 12. lease tokens in the server log --------------------------------------------------------------
def test_12_storage_errors_log_no_sql_parameters(api, caplog) -> None:
    import asyncio

    from service.errors import _storage_handler

    secret = "lease-token-SECRET-42"
    with api.db.session() as s:
        with pytest.raises(DBAPIError) as raised:  # no such table: the engine must raise
            s.execute(text("SELECT * FROM no_such_table WHERE x = :p"), {"p": secret})
        assert secret not in str(raised.value)  # engines hide parameters
        with caplog.at_level(logging.DEBUG, logger="service.errors"):
            asyncio.run(_storage_handler(None, raised.value))  # type: ignore[arg-type]
        assert secret not in caplog.text
    fake = OperationalError("UPDATE measure_jobs SET x=1 WHERE lease_token = %(t)s", {"t": secret},
                            Exception("server closed the connection unexpectedly"))
    with caplog.at_level(logging.DEBUG, logger="service.errors"):
        r = asyncio.run(_storage_handler(None, fake))  # type: ignore[arg-type]
    assert r.status_code == 503
    assert caplog.records and secret not in caplog.text and "measure_jobs" not in caplog.text


# 13. the OpenAPI schema differs from the responses -----------------------------------------------
def test_13_every_422_has_the_documented_detail_list(api) -> None:
    r = post_times(api, "[NaN]")
    domain = api.client.post("/api/v1/tasks", headers=api.headers("submit"), json={
        "workloads": [{"op": "nope"}], "target": "sw26010", "trials": 4})
    lookup = api.client.get("/api/v1/schedules/best", params={"workload_key": "x", "target": "nope"},
                            headers=api.headers("read"))
    for resp in (r, domain, lookup):
        assert resp.status_code == 422
        detail = resp.json()["detail"]
        assert isinstance(detail, list) and {"loc", "msg", "type"} <= set(detail[0])


def test_13_openapi_documents_every_status_and_metrics_as_text(api) -> None:
    spec = api.client.get("/openapi.json").json()
    assert "text/plain" in spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if "dashboard" in op.get("tags", []) or not path.startswith("/api/v1"):
                continue
            codes = set(op["responses"])
            assert {"401", "403", "503"} <= codes, (method, path, codes)
            if "requestBody" in op:
                assert {"413", "422"} <= codes, (method, path, codes)
    assert spec["components"]["schemas"]["ErrorOut"]["properties"]["detail"]["type"] == "string"


# 14. misleading messages -------------------------------------------------------------------------
def test_14_another_tokens_heartbeat_is_told_so(api) -> None:
    task_with_jobs(api.db, 1)
    got = lease(api)
    r = api.client.post("/api/v1/jobs/heartbeat", json={"lease_token": got["lease_token"], "worker": "w1"},
                        headers=api.headers("worker2"))
    assert r.status_code == 403 and "another API token" in detail_text(r)
    assert "not 'w1'" not in detail_text(r)


def test_14_a_heartbeat_racing_the_final_post_logs_no_lost_lease(caplog) -> None:
    from service.client import LeaseLostError
    from service.worker import _Heartbeat

    entered, release = threading.Event(), threading.Event()

    class RacingClient:
        def heartbeat(self, token: str, worker: str) -> None:
            entered.set()
            release.wait(5)  # the post happens meanwhile; the jobs are done when this answers
            raise LeaseLostError(409, "lease lost: it holds no job any more")

    beat = _Heartbeat(RacingClient(), "t", "w1", interval=0.01)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="swtune.worker"):
        beat.start()
        assert entered.wait(5)
        beat.stop()
        release.set()
        beat.join(5)
    assert "lease lost" not in caplog.text and not beat.lost.is_set()


# 15. tracebacks in the CLI -----------------------------------------------------------------------
def test_15_cli_errors_are_one_line_with_exit_2(backend_url, tmp_path) -> None:
    from typer.testing import CliRunner

    from cli.app import build_app

    app = build_app()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"bogus": 1}\n')
    runner = CliRunner()
    for args in (["db", "import", str(bad)], ["db", "import", str(tmp_path / "missing.jsonl")],
                 ["token", "revoke", "987654"], ["token", "revoke", str(2**70)],
                 ["db", "export", "--target", "sw99"], ["token", "create", "--role", "nope"]):
        result = runner.invoke(app, [*args, "--database-url", backend_url])
        out = (result.stdout or "") + (result.stderr or "")
        assert result.exit_code == 2, (args, out)
        assert "Traceback" not in out and out.strip().startswith("error:") and len(out.strip().splitlines()) == 1


# 16. no limits -----------------------------------------------------------------------------------
def test_16_long_polls_beyond_the_cap_answer_at_once(backend_url) -> None:
    import time

    with make_api(backend_url, max_long_polls=0) as api:
        started = time.monotonic()
        got = lease(api, wait_seconds=5)
        assert got["jobs"] == [] and time.monotonic() - started < 3


def test_16_unknown_tokens_are_cached_for_a_moment(api, monkeypatch) -> None:
    from db import tokens as tokens_db

    calls = []
    real = tokens_db.find_token
    monkeypatch.setattr(tokens_db, "find_token", lambda s, t: calls.append(t) or real(s, t))
    for _ in range(5):
        r = api.client.get("/api/v1/tasks", headers={"Authorization": "Bearer junk-token-value"})
        assert r.status_code == 401
    assert len(calls) == 1
    r = api.client.get("/api/v1/tasks", headers={"Authorization": "Bearer " + "x" * 5000})
    assert r.status_code == 401 and len(calls) == 1  # absurdly long: refused unhashed


def test_16_per_token_rate_limit_answers_429_with_retry_after(backend_url) -> None:
    with make_api(backend_url, rate_limit_per_second=0.5, rate_limit_burst=3) as api:
        codes = [api.client.get("/api/v1/workers", headers=api.headers("read")).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3] == 429
        r = api.client.get("/api/v1/workers", headers=api.headers("read"))
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert api.client.get("/api/v1/workers", headers=api.headers("admin")).status_code == 200  # per token


def test_16_import_streams_lines_cut_anywhere(api) -> None:
    rec = stored_record(api)
    data = "".join(json.dumps({**rec, "config": {**rec["config"], "unroll": u}, "config_hash": None}) + "\n"
                   for u in (1, 2, 4, 8, 16) if u != rec["config"]["unroll"]).encode()
    whole, pieces = Importer(), Importer()
    whole.feed(data)
    for i in range(0, len(data), 7):
        pieces.feed(data[i:i + 7])
    whole.finish()
    pieces.finish()
    rows = [r[2] for r in whole.records()]
    assert rows == [r[2] for r in pieces.records()] and len(rows) == whole.count == 4


def test_16_no_auth_on_a_public_address_warns(monkeypatch) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from cli.app import build_app

    app = build_app()

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    for name in ("SWTUNE_DATABASE_URL", "SWTUNE_AUTH_ENABLED", "SWTUNE_DRIVER_ENABLED"):
        monkeypatch.setenv(name, "")  # serve sets these for uvicorn: restored after the test
    monkeypatch.setenv("SWTUNE_DATABASE_URL", "sqlite:///unused.db")
    result = CliRunner().invoke(app, ["serve", "--no-auth", "--host", "0.0.0.0"])
    assert result.exit_code == 0 and "warning: --no-auth on 0.0.0.0" in (result.stderr or result.output)
    quiet = CliRunner().invoke(app, ["serve", "--no-auth", "--host", "127.0.0.1"])
    assert "warning" not in (quiet.stderr or quiet.output)
