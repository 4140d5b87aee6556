"""Simulator profiles: read a target's active profile and its versions, store a fitted profile (admin), and
choose which stored version simulator workers measure with (admin).

A profile document is checked by its one parse (db.profiles.parse_profile, tuner.profile.Profile.from_json):
a bad document or an unknown target is a 422 naming the problem, and nothing is stored.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query

from db import profiles as profiles_db
from db.refs import target_name
from service.auth import Admin, Reader
from service.deps import AppState, Db
from service.errors import AUTH, BODY, responses
from service.schemas import ProfilesOut, ProfileStoredOut, ProfileVersion, ProfileVersionOut, TargetName

router = APIRouter(prefix="/api/v1/profiles", tags=["profiles"], responses=responses(*AUTH))
TargetPath = Annotated[TargetName, Path(description="sw26010 or sw26010-pro")]


def _stored(profile: Any, active: bool) -> ProfileStoredOut:
    return ProfileStoredOut(target=profile.target, version=profile.version, active=active, profile=profile.to_json())


def _after_change(state: Any) -> None:
    # the lookup serves the active profile's simulated best (db.measurements.best_config): drop cached answers
    state.lookup_cache.clear()
    # the driver rebuilds a task's strategy when its target's active profile changed: let it look now
    if state.driver is not None:
        state.driver.wake()


@router.get("/{target}", response_model=ProfilesOut, responses=responses(422))
def read(target: TargetPath, db: Db, _: Reader) -> ProfilesOut:
    """The target's active profile (the built-in one, version 0, until one is stored) and every stored version."""
    tname = target_name(target)
    with db.session() as s:
        active = profiles_db.active_profile(s, tname)
        stored = profiles_db.list_profiles(s, tname)
    return ProfilesOut(target=tname, active_version=active.version, active=active.to_json(),
                       versions=[ProfileVersionOut(version=p.version, active=p.version == active.version,
                                                   fit=dict(p.fit)) for p in stored])


@router.post("", status_code=201, response_model=ProfileStoredOut, responses=responses(*BODY))
def store(db: Db, state: AppState, _: Admin,
          document: Annotated[dict[str, Any], Body(description="a profile document, as `swtune calibrate --out` "
                                                               "writes it; its version is ignored")],
          activate: bool = Query(True, description="make it the profile simulator workers measure with")
          ) -> ProfileStoredOut:
    """Store a profile as its target's next version (1, 2, ...); 422 and nothing stored for a bad document."""
    profile = profiles_db.parse_profile(document)
    with db.session() as s:
        stored = profiles_db.store_profile(s, profile, activate=activate)
    _after_change(state)
    return _stored(stored, activate)


@router.post("/{target}/{version}/activate", response_model=ProfileStoredOut, responses=responses(404, 422))
def activate(target: TargetPath, version: Annotated[ProfileVersion, Path()], db: Db, state: AppState,
             _: Admin) -> ProfileStoredOut:
    """Make a stored version (or 0, the built-in profile) the one simulator workers measure with."""
    with db.session() as s:
        profile = profiles_db.activate_profile(s, target, version)
    _after_change(state)
    return _stored(profile, True)
