"""Bearer-token auth with roles (read, submit, worker, admin) as FastAPI dependencies.

Tokens are checked against their SHA-256 hash in the database; a positive answer is cached for
``token_cache_seconds`` so authentication costs no query on the hot paths (revocation therefore
takes effect within that time). With auth disabled (the embedded single-user mode) every request
acts as a local admin.
"""

from __future__ import annotations

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


class TokenCache:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[float, Principal]] = {}

    def get(self, token: str) -> Principal | None:
        entry = self._entries.get(token)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, token: str, principal: Principal) -> None:
        if len(self._entries) > 10_000:
            self._entries.clear()  # bounded: random junk tokens are never cached, real ones are few
        self._entries[token] = (time.monotonic() + self.ttl, principal)


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
    cache: TokenCache = state.token_cache
    principal = cache.get(token)
    if principal is None:
        def lookup() -> Any:
            with state.db.session() as s:
                return tokens_db.find_token(s, token)

        info = await run_in_threadpool(lookup)
        if info is None:
            raise _unauthorized("invalid or revoked token")
        principal = Principal(token_id=info.id, role=info.role, name=info.name or f"token-{info.id}")
        cache.put(token, principal)
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
