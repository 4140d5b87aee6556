"""Model functions for simulator profiles: store a fitted profile as a target's next version, activate one,
read the active one (the built-in profile, version 0, when none is stored or active).

A profile is validated by its one parse (``tuner.profile.Profile.from_json``) before anything is written;
storing and activating are one transaction each, so a refused profile changes nothing. Profiles belong
to a preset (``sw26010``): its core-group counts (``sw26010-4cg``) read and store the preset's.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from db.errors import InvalidInputError, NotFoundError
from db.orm import ProfileRow, TargetRow
from db.refs import is_postgres, preset_name, target_id
from tuner.errors import UnknownTargetError
from tuner.profile import DEFAULT_VERSION, Profile, ProfileError, default_profile


def parse_profile(document: Any) -> Profile:
    """A profile document from the wire or a file; InvalidInputError (HTTP 422) naming what is wrong."""
    try:
        profile = Profile.from_json(document)
        # stored and served as JSON: its free 'fit' object too must be plain JSON (no NaN or infinity)
        json.dumps(profile.to_json(), allow_nan=False)
    except (ProfileError, UnknownTargetError, ValueError, TypeError, OverflowError) as exc:
        raise InvalidInputError(f"invalid profile: {exc}") from None
    return profile


def _profile(row: ProfileRow) -> Profile:
    return Profile.from_json({**row.document, "version": row.version})


def store_profile(session: Session, profile: Profile, *, activate: bool = True, target: str | None = None) -> Profile:
    """Store ``profile`` as its target's next version (1, 2, ...), the active one if ``activate``.

    ``target``, when given, is the target the caller means: a profile of another target is refused
    (InvalidInputError) rather than stored where nobody expects it. The version ``profile`` carries is
    ignored: the tuning log numbers versions."""
    profile = parse_profile(profile.to_json())  # the one validation, whatever built the object
    if target is not None and preset_name(target) != profile.target:
        raise InvalidInputError(f"invalid profile: it describes {profile.target}, not {preset_name(target)}")
    tid = _locked_target_id(session, profile.target)
    version = (session.scalar(select(func.max(ProfileRow.version)).where(ProfileRow.target_id == tid)) or 0) + 1
    stored = Profile(profile.target, profile.parameters, version, profile.fit)
    if activate:
        session.execute(update(ProfileRow).where(ProfileRow.target_id == tid).values(active=False))
    session.add(ProfileRow(target_id=tid, version=version, document=stored.to_json(), active=activate))
    session.flush()
    return stored


def list_profiles(session: Session, target: str) -> list[Profile]:
    """Every stored profile of ``target``, oldest version first (the built-in version 0 is not stored)."""
    tid = _existing_target_id(session, target)
    if tid is None:
        return []
    rows = session.scalars(select(ProfileRow).where(ProfileRow.target_id == tid).order_by(ProfileRow.version))
    return [_profile(r) for r in rows]


def _active_stmt(target: str, column: Any) -> Any:
    # one query from the target's name: no target row, or none active, is the built-in profile
    return (select(column).join(TargetRow, TargetRow.id == ProfileRow.target_id)
            .where(TargetRow.name == preset_name(target), ProfileRow.active.is_(True)))


def active_version(session: Session, target: str) -> int:
    """The version of ``target``'s active profile (0: the built-in one)."""
    version = session.scalar(_active_stmt(target, ProfileRow.version))
    return DEFAULT_VERSION if version is None else int(version)


def active_profile(session: Session, target: str) -> Profile:
    """``target``'s active profile: the stored one marked active, else the built-in profile."""
    row = session.scalars(_active_stmt(target, ProfileRow)).first()
    return default_profile(preset_name(target)) if row is None else _profile(row)


def get_profile(session: Session, target: str, version: int) -> Profile:
    """One version of ``target``'s profiles (0: the built-in one); NotFoundError for an unknown version."""
    tname = preset_name(target)
    if version == DEFAULT_VERSION:
        return default_profile(tname)
    tid = _existing_target_id(session, tname)
    row = None if tid is None else session.scalars(select(ProfileRow).where(
        ProfileRow.target_id == tid, ProfileRow.version == version)).first()
    if row is None:
        raise NotFoundError(f"{tname} has no profile version {version}")
    return _profile(row)


def activate_profile(session: Session, target: str, version: int) -> Profile:
    """Make one stored version (or 0, the built-in profile) ``target``'s active profile."""
    profile = get_profile(session, target, version)  # NotFoundError before anything changes
    tid = _existing_target_id(session, target)
    if tid is not None:
        _locked_target_id(session, target)  # serialized with a concurrent store or activation
        session.execute(update(ProfileRow).where(ProfileRow.target_id == tid)
                        .values(active=ProfileRow.version == version))
    return profile


def _locked_target_id(session: Session, target: str) -> int:
    """The target's row id (created if new), its row locked on PostgreSQL: two writers of one target's
    profiles take turns, so versions are numbered without gaps or clashes and one stays active. (SQLite's
    immediate transactions already admit one writer at a time.)"""
    tid = target_id(session, preset_name(target))
    if is_postgres(session):
        session.execute(select(TargetRow.id).where(TargetRow.id == tid).with_for_update())
    return tid


def _existing_target_id(session: Session, target: str) -> int | None:
    """The target's row id, None when nothing of it is stored yet (nothing to read, nothing to create)."""
    try:
        return target_id(session, preset_name(target), create=False)
    except NotFoundError:
        return None
