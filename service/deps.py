"""Annotated FastAPI dependencies: the app's settings, database and driver (set by create_app)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from db.engine import Database
from service.settings import Settings


def get_state(request: Request) -> Any:
    return request.app.state


def get_db(request: Request) -> Database:
    return request.app.state.db


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


AppState = Annotated[Any, Depends(get_state)]
Db = Annotated[Database, Depends(get_db)]
Config = Annotated[Settings, Depends(get_settings)]
