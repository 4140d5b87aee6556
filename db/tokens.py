"""Model functions for API tokens: random bearer tokens stored as SHA-256 hashes, with a role.

SHA-256 (not a slow password hash) is enough because the tokens are 32 random bytes: there is no
dictionary to attack, and authentication stays cheap on every request.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.domain import TokenInfo
from db.errors import ConflictError, InvalidInputError, NotFoundError
from db.orm import ROLES, TokenRow
from db.timeutil import as_utc, utcnow

TOKEN_PREFIX = "swt_"
MIN_TOKEN_LENGTH = 24


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _info(row: TokenRow) -> TokenInfo:
    return TokenInfo(id=row.id, name=row.name, role=row.role, created_at=as_utc(row.created_at),
                     revoked_at=as_utc(row.revoked_at))


def create_token(session: Session, role: str, name: str = "", value: str | None = None) -> tuple[TokenInfo, str]:
    """A new token (plaintext returned once, only its hash is stored). ``value`` lets deployment
    scripts provision a known secret (e.g. docker-compose workers); it must be long and random."""
    if role not in ROLES:
        raise InvalidInputError(f"unknown role {role!r}; expected one of {list(ROLES)}")
    if value is not None and len(value) < MIN_TOKEN_LENGTH:
        raise InvalidInputError(f"a provisioned token must have at least {MIN_TOKEN_LENGTH} characters")
    plaintext = value or TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(plaintext)
    if session.scalar(select(TokenRow.id).where(TokenRow.token_hash == digest)) is not None:
        raise ConflictError("this token value already exists")
    row = TokenRow(name=name, role=role, token_hash=digest)
    session.add(row)
    session.flush()
    return _info(row), plaintext


def find_token(session: Session, plaintext: str) -> TokenInfo | None:
    """The active token with this value, or None (unknown or revoked)."""
    row = session.scalar(select(TokenRow).where(TokenRow.token_hash == hash_token(plaintext)))
    if row is None or row.revoked_at is not None:
        return None
    return _info(row)


def list_tokens(session: Session) -> list[TokenInfo]:
    return [_info(r) for r in session.scalars(select(TokenRow).order_by(TokenRow.id)).all()]


def revoke_token(session: Session, token_id: int) -> TokenInfo:
    if not 1 <= token_id <= 2**31 - 1:  # api_tokens.id is int4 on PostgreSQL
        raise NotFoundError(f"token {token_id} does not exist")
    result = session.execute(update(TokenRow).where(TokenRow.id == token_id, TokenRow.revoked_at.is_(None))
                             .values(revoked_at=utcnow()))
    row = session.get(TokenRow, token_id)
    if row is None:
        raise NotFoundError(f"token {token_id} does not exist")
    if not result.rowcount:  # type: ignore[attr-defined]
        raise ConflictError(f"token {token_id} is already revoked")
    session.refresh(row)
    return _info(row)
