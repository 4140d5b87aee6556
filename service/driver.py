"""The tuning driver: keeps every active task's job queue filled from its search strategy.

Runs as a background thread of the API process (started by the app's lifespan) or standalone
(``python -m service.driver``). All of its state lives in the database: after a restart each
task's strategy is rebuilt by telling it every stored measurement of the task's (workload, target)
and marking every queued job in flight, so nothing is measured twice and no budget is exceeded.
A model-guided task's cost model starts from a base model of the newest measurements of the
target's other workloads (``transfer_rows``, tuner.search.transfer), so it needs no random warm-up.
Every task measures its baseline first, then the seeds the log holds for it: a task on several core
groups starts from the best one-CG record of its workload on the preset (tuner.space.chip.task_seeds),
all within its trials.
A task's strategy and its transfer base learn from one simulator profile's times only, the target's
active one (db.profiles), plus every hardware time: two profiles time one config differently, and a
model trained on both would learn the difference as noise. When another profile is activated, the
task's strategy is rebuilt from that profile's measurements (configs measured under the old one stay
in flight: the tuning log measures a config once).

Budget rule: a task's trials are its jobs that are done, failed or still queued; the driver never
queues more than ``budget - that``, and a task is done when done + failed reaches its budget (or its
space is exhausted). Strategies ask (and train) here, never in a request handler.

Model submissions (db.submissions) have one budget for all their tasks: each round the driver
grants trials to the tasks the gradient task scheduler picks (service.budget) by raising their
budgets, under a row lock of the submission; a submission's task is never finished for reaching its
budget here (more may be granted), only when the submission ends or the scheduler stops it.

Replicas: on PostgreSQL a task's refill runs under a session advisory lock
(``pg_try_advisory_lock``), so two service replicas never refill the same task at once; the
budget is re-checked under a row lock of the task, and the unique (workload, target, config_hash)
constraint on jobs is the last line: a config is never queued twice whatever happens.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from cost_model import CostModel
from db import jobs as jobs_db
from db import measurements as measurements_db
from db import profiles as profiles_db
from db import submissions as submissions_db
from db import tasks as tasks_db
from db.engine import Database
from db.errors import NotFoundError
from db.refs import workload_of
from db.states import JobState, SubmissionState, TaskState
from service import budget
from service.settings import Settings
from service.strategies import available
from tuner.baseline import baseline_time
from tuner.errors import InvalidConfigError
from tuner.measure.base import MeasureResult, Source, Status
from tuner.search import SearchStrategy
from tuner.space.chip import seed_target, task_seeds
from tuner.space.factory import space_for
from tuner.space.space import Config
from tuner.targets import get_target
from tuner.task_kind import kind_of

if TYPE_CHECKING:
    from tuner.search.transfer import MeasuredRows  # imports xgboost: only for the model strategy

log = logging.getLogger(__name__)
# Keyed by (schema, task): test schemas and deployments sharing one PostgreSQL do not collide.
_LOCK_KEY = "hashtext('swtune.refill.' || current_schema()), CAST(:t AS integer)"
_TRY_LOCK = text(f"SELECT pg_try_advisory_lock({_LOCK_KEY})")
_UNLOCK = text(f"SELECT pg_advisory_unlock({_LOCK_KEY})")
OTHER_SPACES = 1024  # other workloads' spaces a driver keeps for transfer


@dataclass
class DriverStats:
    rounds: int = 0
    enqueued: int = 0
    conflicts: int = 0  # proposals the unique constraint refused (queued elsewhere meanwhile)
    lock_skips: int = 0  # refills skipped because another replica held the task's lock
    finished: int = 0
    granted: int = 0  # trials granted to tasks out of their submissions' budgets
    submissions_finished: int = 0
    reclaimed: int = 0
    errors: int = 0


@dataclass
class _TaskState:
    """A task's strategy and what of the database it has already been told."""

    strategy: SearchStrategy
    # The target's simulator profile the strategy learns from: it is told simulated times of this version
    # only (and every hardware time), never a mix; another version activated means a new strategy.
    profile_version: int = 0
    told: set[int] = field(default_factory=set)  # measurement ids
    last_job_id: int = 0
    started: bool = False  # the strategy has queued its start: the baseline, then the log's seeds


class TuningDriver:
    def __init__(self, db: Database, settings: Settings | None = None, *, queue_depth: int | None = None,
                 on_enqueue: Callable[[], None] | None = None) -> None:
        self.db = db
        self.on_enqueue = on_enqueue  # e.g. wakes long-polling lease requests
        self.settings = settings or Settings()
        self.queue_depth = queue_depth or self.settings.queue_depth
        self.stats = DriverStats()
        self._states: dict[int, _TaskState] = {}
        self._other_spaces: dict[tuple[str, str, str], Any] = {}  # transfer: other workloads' spaces
        self._measured_rows: MeasuredRows | None = None  # transfer: their measurements' rows
        self._weighed: set[int] = set()  # submission tasks whose weight was estimated (or could not be)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- running ------------------------------------------------------------------------------
    def wake(self) -> None:
        """Refill soon (a result was stored, a task submitted)."""
        self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self.run_forever, name="swtune-driver", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_forever(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except OperationalError as exc:  # database away: keep trying, it may come back
                self.stats.errors += 1
                log.warning("driver: database unavailable: %s", exc)
                self._stop.wait(2.0)
            except Exception:  # noqa: BLE001 - the driver thread must survive any single failure
                self.stats.errors += 1
                log.exception("driver round failed")
                self._stop.wait(1.0)
            self._wake.wait(self.settings.driver_interval_seconds)
            self._wake.clear()

    # --- one round ----------------------------------------------------------------------------
    def run_once(self) -> int:
        """Reclaim expired leases, finish used-up tasks, refill the others. Returns jobs queued."""
        self.stats.rounds += 1
        with self.db.session() as s:
            back, failed = jobs_db.reclaim_expired(s)
            self.stats.reclaimed += back + failed
        with self.db.session() as s:
            submission_ids = submissions_db.active_submission_ids(s)
        for sid in submission_ids:
            if self._stop.is_set():
                break
            try:
                self._allocate(sid)
            except OperationalError:
                raise
            except Exception:  # noqa: BLE001 - one broken submission must not starve the others
                self.stats.errors += 1
                log.exception("driver: budget of submission %s failed", sid)
        with self.db.session() as s:
            tasks = tasks_db.active_tasks(s)
            counts = tasks_db.job_counts(s, [t.id for t in tasks])
        active = {t.id for t in tasks}
        for task_id in list(self._states):
            if task_id not in active:
                del self._states[task_id]  # done or cancelled: free its strategy
        queued = 0
        for task in tasks:
            if self._stop.is_set():
                break
            try:
                queued += self._refill(task, counts[task.id])
            except OperationalError:
                raise
            except Exception:  # noqa: BLE001 - one broken task must not starve the others
                self.stats.errors += 1
                log.exception("driver: refill of task %s failed", task.id)
        return queued

    def _room(self, task: tasks_db.TaskSpec, counts: dict[str, int]) -> tuple[int, int, int]:
        """(trials used, jobs queued, jobs to add now). Refills wait until the queue is down to half
        its depth, so a model-guided strategy asks (and searches its model) in batches, not per result."""
        used = counts[JobState.DONE] + counts[JobState.FAILED]
        queued = counts[JobState.PENDING] + counts[JobState.LEASED]
        if queued > self.queue_depth // 2:
            return used, queued, 0
        want = min(task.trial_budget - used - queued, self.queue_depth - queued)
        return used, queued, want

    def _allocate(self, submission_id: str) -> None:
        """Grant the next rounds of a submission's budget, stop converged tasks, close it when over.
        Decided under the submission's row lock from what the database holds (service.budget)."""
        with self.db.session() as s:
            sub = submissions_db.get_submission(s, submission_id)
        unweighed = [t for t in sub.tasks if t.weight is None and t.task_id not in self._weighed]
        if unweighed:  # once per task: simulating baselines is no work for a request handler
            with self.db.session() as s:
                profile = profiles_db.active_profile(s, sub.target)  # the costs its trials are measured with
            weights = {}
            for t in unweighed:
                self._weighed.add(t.task_id)  # no estimate (no valid baseline): not retried every round
                try:
                    est = baseline_time(t.workload, sub.target, profile)
                except Exception:  # noqa: BLE001 - the weight only orders warm-up rounds
                    log.exception("task %s: no baseline estimate", t.task_id)
                    continue
                if est is not None:
                    weights[t.task_id] = t.call_count * est
            with self.db.session() as s:
                submissions_db.set_weights(s, weights)
        with self.db.session() as s:
            if submissions_db.lock_submission(s, submission_id) != SubmissionState.ACTIVE:
                return
            sub = submissions_db.get_submission(s, submission_id)
            times = submissions_db.trial_times(s, submission_id)
            step = budget.plan(sub, times, in_flight_cap=max(self.queue_depth, sub.per_round))
            for task_id, trials in step.grants:
                submissions_db.grant(s, task_id, trials)
            for task_id in step.stop:
                if tasks_db.finish_task(s, task_id):
                    self.stats.finished += 1
                    log.info("task %s of submission %s done (converged, or the budget is all granted)",
                             task_id, submission_id)
            if step.finish is not None and submissions_db.finish_submission(s, submission_id, step.finish):
                self.stats.submissions_finished += 1
                log.info("submission %s %s after %s of %s trials", submission_id, step.finish, sub.trials_done,
                         sub.trial_budget)
        self.stats.granted += sum(n for _, n in step.grants)

    def _refill(self, task: tasks_db.TaskSpec, counts: dict[str, int]) -> int:
        used, queued, want = self._room(task, counts)
        if used >= task.trial_budget:
            if task.submission_id is None:  # a submission's task may be granted more: the budget decides
                self._finish(task.id)
            return 0
        if want <= 0:
            return 0
        with self._task_lock(task.id) as locked:
            if not locked:
                self.stats.lock_skips += 1
                return 0
            with self.db.session() as s:
                state = self._state(s, task)
                self._sync(s, task, state)
                self._queue_start(s, task, state)
                counts = tasks_db.job_counts(s, [task.id])[task.id]
            used, queued, want = self._room(task, counts)
            if want <= 0:
                return 0
            configs = state.strategy.ask_next(want)
            if not configs:
                if queued == 0:
                    log.info("task %s: search space exhausted after %s trials", task.id, used)
                    self._finish(task.id)
                return 0
            with self.db.session() as s:
                if tasks_db.lock_task(s, task.id) != TaskState.ACTIVE:
                    return 0  # cancelled meanwhile
                counts = tasks_db.job_counts(s, [task.id])[task.id]
                _, _, room = self._room(task, counts)
                room = max(room, 0)
                inserted = jobs_db.enqueue(s, task.id, task.workload_id, task.target_id, configs[:room],
                                           self.settings.max_attempts)
            state.strategy.hand_back(configs[room:])  # marked in flight: measured on a later refill
            self.stats.enqueued += len(inserted)
            if inserted and self.on_enqueue is not None:
                self.on_enqueue()
            self.stats.conflicts += min(room, len(configs)) - len(inserted)
            return len(inserted)

    def _finish(self, task_id: int) -> None:
        with self.db.session() as s:
            if tasks_db.finish_task(s, task_id):
                self.stats.finished += 1
                log.info("task %s done", task_id)
        self._states.pop(task_id, None)

    def _queue_start(self, session, task: tasks_db.TaskSpec, state: _TaskState) -> None:
        """Once per strategy, after it is told the log (so nothing queued before a restart is queued
        again): queue the baseline, then the seeds the log holds for the task, ahead of its proposals."""
        if state.started:
            return
        state.started = True
        state.strategy.queue_start(self._seeds(session, task))

    @staticmethod
    def _seeds(session, task: tasks_db.TaskSpec) -> list[Config]:
        """The configs the tuner's rule (tuner.space.chip.seed_target, task_seeds) seeds the task with from
        the best record of its workload on another target: a chip task's one-CG record on its preset. []
        for a one-CG task, or when that target has no successful record of the workload."""
        target = get_target(task.target)
        source = seed_target(target)
        if source is None:
            return []
        try:
            best = measurements_db.best_config(session, task.workload.key, source)
        except NotFoundError:
            return []
        seeds = task_seeds(target, [best.config])
        log.info("task %s: seeded with %d configs from the best record on %s", task.id, len(seeds), source)
        return seeds

    # --- strategy state -----------------------------------------------------------------------
    def strategy(self, task_id: int) -> SearchStrategy:
        """The task's strategy, built (or rebuilt) and told everything the database holds."""
        with self.db.session() as s:
            task = next((t for t in tasks_db.active_tasks(s) if t.id == task_id), None)
            if task is None:
                raise KeyError(f"task {task_id} is not active")
            state = self._state(s, task)
            self._sync(s, task, state)
        return state.strategy

    def _state(self, session, task: tasks_db.TaskSpec) -> _TaskState:
        version = profiles_db.active_version(session, task.target)
        state = self._states.get(task.id)
        if state is not None and state.profile_version != version:
            # what it learnt came from another profile's times: start over from the new profile's ones
            log.info("task %s: simulator profile %s is active now (was %s): rebuilding its strategy", task.id,
                     version, state.profile_version)
            state = None
        if state is None:
            kind = kind_of(task.workload)
            name = task.strategy
            if name not in available() or not kind.runs_strategy(name):
                # a task stored before its strategy was unregistered or refused for its kind: submissions
                # are checked (db.tasks.check_strategy), so only an older log holds one
                log.warning("task %s: strategy %r is not registered here or not run by a %s task; using random",
                            task.id, name, kind.name)
                name = "random"
            space = space_for(task.workload, task.target)
            base = self._transfer_base(session, task, version) if kind.takes_transfer(name) else None
            state = self._states[task.id] = _TaskState(kind.strategy(space, name, seed=task.seed, base_model=base),
                                                       profile_version=version)
        return state

    def _transfer_base(self, session, task: tasks_db.TaskSpec, profile_version: int) -> CostModel | None:
        """A base cost model of the target's other workloads' newest measurements (tuner.search.transfer),
        or None (transfer off, too little measured)."""
        if self.settings.transfer_rows <= 0:
            return None
        from tuner.search.transfer import MeasuredRows, base_model  # xgboost: only for the model strategy

        if self._measured_rows is None:
            self._measured_rows = MeasuredRows()
        limit = self.settings.transfer_rows
        rows = measurements_db.measured_elsewhere(session, task.target_id, task.workload_id, limit,
                                                  profile_version=profile_version)
        by_workload: dict[str, list[tuple[Config, float]]] = {}
        for canonical, config, mean_time in rows:
            by_workload.setdefault(canonical, []).append((config, mean_time))
        histories = []
        family = kind_of(task.workload).feature_family
        for canonical, measured in by_workload.items():
            space = self._other_space(canonical, task.target, family)
            if space is None:
                continue  # its cost-model features have other columns (e.g. a CPE kernel's)
            history = self._measured_rows.history((canonical, task.target), space, measured)
            if history is not None:
                histories.append(history)
        base = base_model(histories, seed=task.seed)
        if base is not None:
            log.info("task %s: cost model transfers from %d measurements of %d other workloads", task.id,
                     sum(len(h.seconds) for h in histories), len(histories))
        return base

    def _other_space(self, canonical: str, target: str, family: str) -> Any:
        """Another workload's schedule space, or None when its kind's features are not ``family``'s;
        built once per driver (the spaces of the last ``OTHER_SPACES`` workloads are kept)."""
        key = (canonical, target, family)
        if key not in self._other_spaces:
            if len(self._other_spaces) >= OTHER_SPACES:
                self._other_spaces.clear()
            other = workload_of(canonical)
            self._other_spaces[key] = space_for(other, target) if kind_of(other).feature_family == family else None
        return self._other_spaces[key]

    def _sync(self, session, task: tasks_db.TaskSpec, state: _TaskState) -> None:
        """Tell the strategy new measurements of its (workload, target), then mark new jobs in flight."""
        space = state.strategy.space
        configs, results = [], []
        for mid, config, status, times in measurements_db.measurements_of(
                session, task.workload_id, task.target_id, state.told, profile_version=state.profile_version):
            state.told.add(mid)
            try:
                space.encode(config)
            except InvalidConfigError:
                continue  # e.g. imported from a site whose space had other knobs
            configs.append(config)
            results.append(MeasureResult(config=config, status=Status(status), times=tuple(times), source=Source.HOST))
        if configs:
            state.strategy.tell(configs, results)
        new_jobs = jobs_db.jobs_of_workload(session, task.workload_id, task.target_id, state.last_job_id)
        in_flight = []
        for job_id, _state, config in new_jobs:
            state.last_job_id = max(state.last_job_id, job_id)
            try:
                space.encode(config)
                in_flight.append(config)
            except InvalidConfigError:
                continue
        if in_flight:
            state.strategy.mark_in_flight(in_flight)  # queued, measured or given up: never propose again

    @contextlib.contextmanager
    def _task_lock(self, task_id: int) -> Iterator[bool]:
        """A PostgreSQL session advisory lock per (schema, task); always granted on SQLite."""
        if self.db.dialect != "postgresql":
            yield True
            return
        with self.db.engine.connect() as conn:
            locked = bool(conn.execute(_TRY_LOCK, {"t": task_id}).scalar())
            conn.commit()
            try:
                yield locked
            finally:
                if locked:
                    try:
                        conn.execute(_UNLOCK, {"t": task_id})
                        conn.commit()
                    except Exception:
                        # never hand a connection that may still hold the lock back to the pool:
                        # closing it for good makes PostgreSQL release the lock
                        conn.invalidate()
                        raise


def main() -> None:
    """Run the driver on its own (e.g. next to API replicas started with SWTUNE_DRIVER_ENABLED=false)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings()
    driver = TuningDriver(Database(settings.database_url), settings)
    try:
        driver.run_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
