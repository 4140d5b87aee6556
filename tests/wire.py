"""Reading the service's error bodies in tests: every 422 carries ``detail`` as a list of
{loc, msg, type} (the shared error model), every other error ``detail`` as one sentence."""

from __future__ import annotations

from typing import Any


def detail_text(response: Any) -> str:
    """The error's words, whatever its shape: '<loc>: <msg>' per issue for a 422, else the sentence."""
    detail = response.json()["detail"]
    if isinstance(detail, list):
        return "; ".join(".".join(str(p) for p in d["loc"]) + ": " + d["msg"] for d in detail)
    return str(detail)
