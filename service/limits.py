"""Limits that keep one client from exhausting the service: the request body size (a pure ASGI
middleware: 413 before the body is read when it says its length, and as soon as a streamed body
passes the limit), a cap on concurrent long-polls, and a per-token request rate (token bucket)."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int, overrides: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = overrides or {}  # path prefix -> limit (the records import takes big files)

    def _limit(self, path: str) -> int:
        for prefix, limit in self.overrides.items():
            if path.startswith(prefix):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope.get("path", ""))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > limit
                except ValueError:
                    too_big = False
                if too_big:
                    await _reject(send, limit)
                    return
        seen = 0

        async def limited() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # FastAPI lets HTTPException through its body parsing; the app answers 413.
                    raise HTTPException(413, f"request body larger than {limit} bytes")
            return message

        await self.app(scope, limited, send)


async def _reject(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class LongPolls:
    """Counts the lease requests currently waiting for work; at most ``cap`` may wait at once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.active = 0

    def enter(self) -> bool:
        """Take a waiting slot if one is free (the event loop is single-threaded: no lock needed)."""
        if self.active >= self.cap:
            return False
        self.active += 1
        return True

    def leave(self) -> None:
        self.active -= 1


class RateLimiter:
    """A token bucket per API token: ``rate`` requests a second on average, bursts of ``burst``.
    ``rate`` 0 turns it off. Buckets of idle tokens are dropped when the table grows large."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)

    def allow(self, key: str) -> float:
        """0 when the request may go ahead, else the seconds to wait before the next one."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
        if len(self._buckets) > 10_000:
            self._buckets.clear()
        self._buckets[key] = (tokens - 1.0, now)
        return 0.0
