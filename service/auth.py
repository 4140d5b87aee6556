"""Bearer-token auth with roles (read, submit, worker, admin) as FastAPI dependencies.

Tokens are checked against their SHA-256 hash in the database; a positive answer is cached for
``token_cache_seconds`` so authentication costs no query on the hot paths (revocation therefore
takes effect within that time), and a negative one for ``invalid_token_cache_seconds`` so a flood
of junk tokens costs no query either. Each token's request rate is limited (429 with Retry-After).
With auth disabled (the embedded single-user mode) every request acts as a local admin.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from db import tokens as tokens_db

# What each role may do. Workers only lease and post; submitters also read; admins do everything.
ROLE_SCOPES: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "submit": frozenset({"read", "submit"}),
    "worker": frozenset({"worker"}),
    "admin": frozenset({"read", "submit", "worker", "admin"}),
}


@dataclass(frozen=True)
class Principal:
    token_id: int | None
    role: str
    name: str

    def can(self, scope: str) -> bool:
        return scope in ROLE_SCOPES.get(self.role, frozenset())


LOCAL_ADMIN = Principal(token_id=None, role="admin", name="local")
MAX_TOKEN_CHARS = 512  # far above any issued token; longer headers are junk and never hashed


INVALID = Principal(token_id=None, role="", name="")  # the cached answer "no such token"


class TokenCache:
    """Answers per token value: a Principal for ``ttl`` seconds, INVALID for ``negative_ttl``."""

    def __init__(self, ttl: float, negative_ttl: float = 0.0) -> None:
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._invalid: dict[str, float] = {}

    def get(self, token: str) -> Principal | None:
        entry = self._entries.get(token)
        if entry is not None and entry[0] >= time.monotonic():
            return entry[1]
        expiry = self._invalid.get(token)
        if expiry is not None and expiry >= time.monotonic():
            return INVALID
        return None

    def put(self, token: str, principal: Principal) -> None:
        if len(self._entries) > 10_000:
            self._entries.clear()  # bounded: real tokens are few
        self._entries[token] = (time.monotonic() + self.ttl, principal)

    def put_invalid(self, token: str) -> None:
        if self.negative_ttl <= 0:
            return
        if len(self._invalid) > 10_000:
            self._invalid.clear()  # bounded: junk is forgotten rather than hoarded
        self._invalid[token] = time.monotonic() + self.negative_ttl


def _unauthorized(msg: str) -> HTTPException:
    return HTTPException(401, msg, headers={"WWW-Authenticate": "Bearer"})


async def authenticate(request: Request) -> Principal:
    state: Any = request.app.state
    if not state.settings.auth_enabled:
        return LOCAL_ADMIN
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("missing bearer token (Authorization: Bearer <token>)")
    token = token.strip()
    if len(token) > MAX_TOKEN_CHARS:
        raise _unauthorized("invalid or revoked token")
    cache: TokenCache = state.token_cache
    principal = cache.get(token)
    if principal is None:
        def lookup() -> Any:
            with state.db.session() as s:
                return tokens_db.find_token(s, token)

        info = await run_in_threadpool(lookup)
        if info is None:
            cache.put_invalid(token)
            raise _unauthorized("invalid or revoked token")
        principal = Principal(token_id=info.id, role=info.role, name=info.name or f"token-{info.id}")
        cache.put(token, principal)
    if principal is INVALID:
        raise _unauthorized("invalid or revoked token")
    wait = state.rate_limiter.allow(str(principal.token_id))
    if wait > 0:
        raise HTTPException(429, f"more than {state.settings.rate_limit_per_second:g} requests a second with "
                                 "this token", headers={"Retry-After": str(max(1, math.ceil(wait)))})
    return principal


def require(scope: str) -> Any:
    """A dependency that authenticates and checks the principal's role allows ``scope``."""

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not principal.can(scope):
            raise HTTPException(403, f"a {principal.role!r} token may not {scope}; "
                                     f"roles allowed: {[r for r, s in ROLE_SCOPES.items() if scope in s]}")
        return principal

    return Depends(check)


Reader = Annotated[Principal, require("read")]
Submitter = Annotated[Principal, require("submit")]
WorkerAuth = Annotated[Principal, require("worker")]
Admin = Annotated[Principal, require("admin")]
