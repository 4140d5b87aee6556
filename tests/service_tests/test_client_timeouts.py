"""The client's timeouts: a submission (validated whole on the server, not retried) waits longer than
an ordinary request, so a slow but correct answer under load is not turned into a failure."""

from __future__ import annotations

import httpx

from service.client import SUBMIT_TIMEOUT_S, ServiceClient


def test_submissions_wait_longer_than_ordinary_requests() -> None:
    seen: dict[str, float] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = request.extensions["timeout"]["read"]
        return httpx.Response(201 if request.method == "POST" else 200, json={"id": "s1", "tasks": []})

    http = httpx.Client(base_url="http://swtune", transport=httpx.MockTransport(answer), timeout=5.0)
    with ServiceClient("http://swtune", None, timeout=5.0, http=http) as client:
        client.submit_model("m", [], "sw26010", 8)
        client.submit([], "sw26010", 8)
        client.submission("s1")
    assert seen == {"/api/v1/submissions": SUBMIT_TIMEOUT_S, "/api/v1/tasks": SUBMIT_TIMEOUT_S,
                    "/api/v1/submissions/s1": 5.0}
    assert SUBMIT_TIMEOUT_S > 5.0
