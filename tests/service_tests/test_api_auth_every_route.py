"""Every route of the app refuses a missing or a wrong bearer token (401), except the routes that are
public on purpose, listed here. The routes are read from the app itself, so a route added without its
auth dependency fails this test (schemathesis' ``ignored_auth`` check is left out of benchmarks/fuzz.py
because this test is that check, over every route rather than the ones the fuzzer reaches)."""

from __future__ import annotations

import re

import pytest
from starlette.routing import Mount

# public on purpose: probes (liveness, readiness, Prometheus scraping), the OpenAPI schema and its
# viewers, and the dashboard's static page (it asks for a token and sends it with every API call)
PUBLIC = {
    ("GET", "/health"), ("GET", "/ready"), ("GET", "/metrics"),
    ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"),
    ("GET", "/"), ("GET", "/ui/"),
}
WRONG = {"Authorization": "Bearer swt_not_a_token"}


def _routes(routes, prefix: str = ""):
    """(method, path) of every route, into included routers (FastAPI keeps one as its
    ``original_router`` with the include's prefix) and static mounts (GET of the mount's root)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes, prefix + route.include_context.prefix)
        elif isinstance(route, Mount):
            yield "GET", prefix + route.path + "/"
        else:
            yield from (("GET" if m == "HEAD" else m, prefix + route.path) for m in route.methods)


def _operations(app) -> list[tuple[str, str]]:
    """Every route of the app, and every documented operation (the two must not disagree)."""
    ops = set(_routes(app.routes))
    documented = {(m.upper(), path) for path, item in app.openapi()["paths"].items() for m in item}
    assert documented <= ops, documented - ops
    return sorted(ops)


@pytest.mark.slow
def test_every_route_but_the_public_ones_refuses_a_missing_or_wrong_token(api) -> None:
    ops = _operations(api.app)
    assert PUBLIC <= set(ops), PUBLIC - set(ops)  # the list names no route that is gone
    assert ("POST", "/api/v1/tasks") in ops and ("POST", "/api/v1/jobs/lease") in ops  # the walk sees the API
    assert len([op for op in ops if op not in PUBLIC]) >= 20
    for method, path in ops:
        url = re.sub(r"\{[^}]+\}", "1", path)
        for headers in ({}, WRONG):
            r = api.client.request(method, url, headers=headers, json={} if method != "GET" else None)
            if (method, path) in PUBLIC:
                assert r.status_code < 400 or path == "/ready", (method, path, r.status_code)
            else:
                assert r.status_code == 401, (method, path, headers, r.status_code, r.text[:200])
