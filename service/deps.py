"""Annotated FastAPI dependencies: the app's settings, database and driver (set by create_app)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from db.engine import Database
from service.settings import Settings


# async on purpose: FastAPI runs a plain `def` dependency in the thread pool, a thread hand-off
# per request that costs more than everything else on the lookup path.
async def get_state(request: Request) -> Any:
    return request.app.state


async def get_db(request: Request) -> Database:
    return request.app.state.db


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


AppState = Annotated[Any, Depends(get_state)]
Db = Annotated[Database, Depends(get_db)]
Config = Annotated[Settings, Depends(get_settings)]
