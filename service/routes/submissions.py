"""Model submissions: one POST creates a model's tasks under one trial budget (db.submissions),
which the driver spreads over them with the gradient task scheduler (service.budget).

Reading a submission is the dashboard's view (GET /api/v1/submissions/{batch}, whose batch is the
id returned here), so a model's progress has one home.
"""

from __future__ import annotations

from dataclasses import fields

from fastapi import APIRouter

from db import submissions as submissions_db
from db.submissions import LayerSpec, Submission, SubmissionHead
from service.auth import Submitter
from service.budget import thin_budget_warning
from service.deps import AppState, Db
from service.errors import AUTH, BODY, responses
from service.schemas import SubmissionCreate, SubmissionRecordOut, SubmissionTaskOut
from service.strategies import available, default_strategy

router = APIRouter(prefix="/api/v1/submissions", tags=["submissions"], responses=responses(*AUTH))

# OpenAPI links: the id returned names the submission the dashboard view reads.
_LINKS = {"ReadSubmission": {"operationId": "submission_api_v1_submissions__batch__get",
                             "parameters": {"batch": "$response.body#/id"}}}


def submission_out(sub: Submission) -> SubmissionRecordOut:
    head = {f.name: getattr(sub, f.name) for f in fields(SubmissionHead)}
    return SubmissionRecordOut(
        **head, trials_done=sub.trials_done, trials_queued=sub.trials_queued,
        tasks=[SubmissionTaskOut(task_id=t.task_id, label=t.label, layer_names=list(t.layer_names),
                                 call_count=t.call_count, weight=t.weight, workload_key=t.workload.key,
                                 workload_label=t.workload.label, workload=t.workload.to_json(), state=t.state,
                                 untuned_reason=t.untuned_reason, trial_budget=t.granted,
                                 trials_done=t.trials_done, queued=t.queued, best_time=t.best_time)
               for t in sub.tasks])


@router.post("", status_code=201, response_model=SubmissionRecordOut,
             responses={201: {"description": "the submission, one task per distinct workload", "links": _LINKS},
                        **responses(*BODY)})
def create(body: SubmissionCreate, db: Db, state: AppState, principal: Submitter) -> SubmissionRecordOut:
    """Submit a model: its layers (with call counts) tuned under one trial budget. Layers that run
    the same workload become one task; bad input is refused (422) and nothing is written."""
    strategy = body.strategy or default_strategy(state.settings.default_strategy)
    layers = [LayerSpec(name=layer.name, workload=layer.workload, calls=layer.calls) for layer in body.layers]
    with db.session() as s:
        created = submissions_db.create_submission(
            s, body.model, layers, body.target, body.whole_budget, strategy, per_round=body.per_round,
            early_stop=body.early_stop, seed=body.seed, submitter=principal.name,
            submitter_token_id=principal.token_id, known_strategies=available())
    if state.driver is not None:
        state.driver.wake()
    out = submission_out(created)
    if body.trials is not None:
        out.warnings.append("'trials' of a submission is deprecated: it is the whole model's budget; send 'budget'")
    thin = thin_budget_warning(created.trial_budget, len(created.tasks))
    if thin:
        out.warnings.append(thin)
    return out
