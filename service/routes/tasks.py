"""Tuning tasks: submit (one task per workload), list, read with progress, cancel."""

from __future__ import annotations

from fastapi import APIRouter, Query

from db import tasks as tasks_db
from service.auth import Reader, Submitter
from service.deps import AppState, Db
from service.schemas import TaskCreate, TaskCreated, TaskOut
from service.strategies import available, default_strategy
from service.views import task_out

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])


@router.post("", status_code=201, response_model=TaskCreated)
def submit(body: TaskCreate, db: Db, state: AppState, principal: Submitter) -> TaskCreated:
    strategy = body.strategy or default_strategy(state.settings.default_strategy)
    with db.session() as s:
        created = tasks_db.create_tasks(s, body.workloads, body.target, body.trials, strategy, labels=body.labels,
                                        seed=body.seed, submitter=principal.name, known_strategies=available())
    if state.driver is not None:
        state.driver.wake()
    return TaskCreated(task_ids=[t.id for t in created], workload_keys=[t.workload_key for t in created],
                       batch=created[0].batch, strategy=strategy)


@router.get("", response_model=list[TaskOut])
def list_tasks(db: Db, _: Reader, state: str | None = Query(None, pattern="^(active|done|cancelled)$"),
               batch: str | None = None, limit: int = Query(100, ge=1, le=1000)) -> list[TaskOut]:
    with db.session() as s:
        return [task_out(t) for t in tasks_db.list_tasks(s, state=state, batch=batch, limit=limit)]


@router.get("/{task_id}", response_model=TaskOut)
def read(task_id: int, db: Db, _: Reader) -> TaskOut:
    with db.session() as s:
        return task_out(tasks_db.get_task(s, task_id))


@router.post("/{task_id}/cancel", response_model=TaskOut)
def cancel(task_id: int, db: Db, _: Submitter) -> TaskOut:
    with db.session() as s:
        return task_out(tasks_db.cancel_task(s, task_id))
