"""Records export/import over HTTP between two sites; importing twice changes nothing."""

from __future__ import annotations

from api_helpers import lease, make_api
from storage_helpers import task_with_jobs
from wire import detail_text


def test_export_import_round_trip(api, backend_factory) -> None:
    task_with_jobs(api.db, 5)
    got = lease(api, max_jobs=5)
    results = [{"job_id": j["id"], "status": "ok", "times": [1e-3 * (i + 1)], "source": "simulator"}
               for i, j in enumerate(got["jobs"])]
    api.client.post("/api/v1/jobs/results", json={"lease_token": got["lease_token"], "worker": "w1",
                                                  "results": results}, headers=api.headers("worker"))
    exported = api.client.get("/api/v1/records/export", headers=api.headers("read"))
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    lines = exported.text.splitlines()
    assert len(lines) == 5
    with make_api(backend_factory()) as other:
        first = other.client.post("/api/v1/records/import", content=exported.content, headers=other.headers("admin"))
        second = other.client.post("/api/v1/records/import", content=exported.content, headers=other.headers("admin"))
        assert first.json() == {"imported": 5, "skipped": 0}
        assert second.json() == {"imported": 0, "skipped": 5}
        again = other.client.get("/api/v1/records/export", headers=other.headers("read")).text
        assert again == exported.text
        bad = other.client.post("/api/v1/records/import", content=b'{"version": 1}\n',
                                headers=other.headers("admin"))
        assert bad.status_code == 422 and "line 1" in detail_text(bad)
