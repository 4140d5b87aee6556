"""Tuning tasks: submit (one task per workload), list, read with progress, cancel (owner or admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from db import tasks as tasks_db
from db.states import TaskState
from service.auth import Reader, Submitter
from service.deps import AppState, Db
from service.errors import AUTH, BODY, responses
from service.schemas import MAX_TASK_ID, TaskCreate, TaskCreated, TaskOut
from service.strategies import available, default_strategy
from service.views import task_out

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], responses=responses(*AUTH))
TaskIdPath = Annotated[int, Path(ge=1, le=MAX_TASK_ID, description="task id")]


# OpenAPI links: clients (and schemathesis' stateful phase) learn that the ids returned here name tasks.
_TASK_LINKS = {
    "ReadTask": {"operationId": "read_api_v1_tasks__task_id__get",
                 "parameters": {"task_id": "$response.body#/task_ids/0"}},
    "CancelTask": {"operationId": "cancel_api_v1_tasks__task_id__cancel_post",
                   "parameters": {"task_id": "$response.body#/task_ids/0"}},
}


@router.post("", status_code=201, response_model=TaskCreated,
             responses={201: {"description": "one task per workload", "links": _TASK_LINKS}, **responses(*BODY)})
def submit(body: TaskCreate, db: Db, state: AppState, principal: Submitter) -> TaskCreated:
    strategy = body.strategy or default_strategy(state.settings.default_strategy)
    with db.session() as s:
        created = tasks_db.create_tasks(s, body.workloads, body.target, body.trials, strategy, labels=body.labels,
                                        seed=body.seed, submitter=principal.name, known_strategies=available(),
                                        submitter_token_id=principal.token_id)
    if state.driver is not None:
        state.driver.wake()
    return TaskCreated(task_ids=[t.id for t in created], workload_keys=[t.workload_key for t in created],
                       batch=created[0].batch, strategy=strategy)


@router.get("", response_model=list[TaskOut], responses=responses(422))
def list_tasks(db: Db, _: Reader, state: TaskState | None = None,
               batch: str | None = Query(None, max_length=64), limit: int = Query(100, ge=1, le=1000)
               ) -> list[TaskOut]:
    with db.session() as s:
        return [task_out(t) for t in tasks_db.list_tasks(s, state=state, batch=batch, limit=limit)]


@router.get("/{task_id}", response_model=TaskOut, responses=responses(404, 422))
def read(task_id: TaskIdPath, db: Db, _: Reader) -> TaskOut:
    with db.session() as s:
        return task_out(tasks_db.get_task(s, task_id))


@router.post("/{task_id}/cancel", response_model=TaskOut, responses=responses(404, 409, 422))
def cancel(task_id: TaskIdPath, db: Db, principal: Submitter) -> TaskOut:
    """Cancel a task: allowed to the token that submitted it and to admins (403 otherwise)."""
    with db.session() as s:
        return task_out(tasks_db.cancel_task(s, task_id, token_id=principal.token_id,
                                             admin=principal.role == "admin"))
