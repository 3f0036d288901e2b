"""Behind the webhook: alerts become incidents in the store, and their runbooks' read steps run on a pool.

A key (fingerprint, status, startsAt) already handled is a duplicate (the keys are kept in the store, so a
re-send after a restart is one too). A firing alert opens an incident and its runbook's read steps are
queued; when the queue is full QueueFullError tells the webhook to answer 503, and when the store cannot
write StoreError does the same (Alertmanager sends the group again). A queue slot is released on every
path. Change steps never run here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from servescope.core.config import AlertsConfig
from servescope.core.errors import ServescopeError
from servescope.runbooks.actions import RunContext
from servescope.runbooks.document import (
    DEFAULT_CONFIG,
    Runbook,
    RunbookError,
    UnknownAlertError,
    load_runbook,
    runbooks_dir,
)
from servescope.runbooks.incidents import IncidentStore, StoreError
from servescope.runbooks.payload import AlertmanagerPayload
from servescope.runbooks.refusals import refused
from servescope.runbooks.runner import bind_step, run_bound

log = logging.getLogger(__name__)


class WebhookMetrics:
    """The webhook's and the step runner's own series, on a registry of their own unless given one."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        counter = partial(Counter, registry=self.registry)
        self.requests = counter(
            "servescope_webhook_requests", "Alertmanager webhook requests, by outcome.", ["outcome"]
        )
        self.dedup_hits = counter(
            "servescope_webhook_dedup_hits",
            "Alerts already handled (same fingerprint, status and startsAt), ignored.",
        )
        self.step_runs = counter(
            "servescope_runbook_step_runs",
            "Runbook read steps run for incidents, by outcome (ok, failed, invalid, error).",
            ["outcome"],
        )
        self.resumed = counter(
            "servescope_runbook_incidents_resumed",
            "Incidents whose read steps were queued again after a restart, by the state they were left in "
            "(queued, or running: interrupted).",
            ["state"],
        )
        self.queue_depth = Gauge(
            "servescope_webhook_queue_depth",
            "Incidents whose read steps are queued or running.",
            registry=self.registry,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


# --- the service ------------------------------------------------------------------------------------
class QueueFullError(ServescopeError, RuntimeError):
    reason = "queue_full"


class IncidentService:
    """The store, the runbooks, the worker pool and the metrics behind the router.

    The read steps' progress is kept with each incident (queued, running, done): on start `resume`
    queues again, oldest first and at most `resume_max`, every incident whose steps did not finish (a
    stop, a crash, an OOM kill), marking those that were running as interrupted and running only the
    steps without a result; `close` lets running steps finish within its grace and leaves the rest
    queued in the store for the next start.
    """

    def __init__(
        self,
        store: IncidentStore,
        runbooks: Path | None,
        ctx_factory: Callable[[], RunContext],
        *,
        workers: int = 4,
        queue_size: int = 64,
        metrics: WebhookMetrics | None = None,
        config: AlertsConfig = DEFAULT_CONFIG,
    ) -> None:
        if workers < 1 or queue_size < 0:
            raise ValueError("workers must be at least 1 and queue_size at least 0")
        self.store = store
        self.runbooks = runbooks
        self.config = config  # the thresholds the runbooks are read with
        self.ctx_factory = ctx_factory
        self.metrics = metrics if metrics is not None else WebhookMetrics()
        self.queue_size = queue_size
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="runbook-step")
        self._slots = threading.BoundedSemaphore(workers + queue_size)
        self._handling = threading.Lock()  # one notification at a time: check, act, remember
        self._stopping = threading.Event()
        self._running = 0
        self._idle = threading.Condition()

    def close(self, grace: float = 0.0) -> bool:
        """Stop: what is queued stays queued in the store (resumed at the next start), running steps get
        `grace` seconds to finish or stop between two steps; True when none was left running."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout=grace)

    def _folder(self) -> Path:
        return runbooks_dir(self.runbooks)

    def handle(self, payload: AlertmanagerPayload) -> dict[str, int]:
        """Each alert in turn; QueueFullError when a firing alert's steps cannot be queued (the alerts
        before it are handled and remembered, so Alertmanager's re-send carries on from that one)."""
        summary = {"received": len(payload.alerts), "new": 0, "duplicates": 0, "queued": 0}
        with self._handling:
            for alert in payload.alerts:
                key = (alert.fingerprint, alert.status, alert.startsAt)
                if self.store.seen(*key):
                    summary["duplicates"] += 1
                    self.metrics.dedup_hits.inc()
                    continue
                record = alert.model_dump()
                if alert.status == "resolved":
                    self.store.mark_resolved(record)
                else:
                    summary["queued"] += self._fire(record, alert.labels)
                self.store.remember(*key)
                summary["new"] += 1
        return summary

    def _runbook(self, alertname: str) -> Runbook | str:
        """The alert's runbook, or why there is none to run."""
        try:
            return load_runbook(self._folder(), alertname, self.config)
        except UnknownAlertError as exc:
            return f"no runbook: {exc}"
        except RunbookError as exc:
            return f"the runbook cannot be used: {exc}"

    def _fire(self, record: dict[str, Any], labels: dict[str, str]) -> int:
        runbook = self._runbook(labels.get("alertname", ""))
        if isinstance(runbook, str):
            self.store.record_firing(record, note=runbook)
            return 0
        incident_id, _ = self.store.record_firing(record)
        if not self._slots.acquire(blocking=False):
            self.store.set_note(incident_id, "read steps not queued yet: the worker queue was full")
            raise QueueFullError("the runbook worker queue is full")
        self._submit(incident_id, runbook, dict(labels), f"read steps of runbook {runbook.alert} queued")
        return 1

    def _submit(self, incident_id: int, runbook: Runbook, labels: dict[str, str], note: str) -> None:
        """Queue the incident's read steps; its slot is taken already and released on every path."""
        self.metrics.queue_depth.inc()
        try:
            self.store.set_steps(incident_id, "queued", note)
            self._pool.submit(self._run_steps, incident_id, list(runbook.read_steps), labels)
        except RuntimeError as exc:  # the pool is shut down, or the store cannot write (StoreError)
            self._done()
            if isinstance(exc, StoreError):
                raise
            raise QueueFullError("the runbook worker pool is shut down") from None
        except BaseException:
            self._done()
            raise

    @property
    def free_slots(self) -> int:
        """Slots of the worker queue not taken (for tests and health: none may leak)."""
        return self._slots._value

    def _done(self) -> None:
        self.metrics.queue_depth.dec()
        self._slots.release()

    def _run_steps(self, incident_id: int, steps: list[Any], labels: dict[str, str]) -> None:
        with self._idle:
            self._running += 1
        try:
            self.store.set_steps(incident_id, "running")
            done = self.store.finished_steps(incident_id)
            ctx = self.ctx_factory().for_labels(labels).model_copy(update={"execute": False})
            for step in steps:
                if self._stopping.is_set():
                    return  # checkpointed: the steps with results are kept, the rest run after a restart
                if step.id not in done:
                    self._run_step(incident_id, step, labels, ctx)
            self.store.set_steps(incident_id, "done", f"{len(steps)} read step(s) run")
        except StoreError as exc:  # one line, not a traceback per incident while the disk is full
            log.error("incident %s: %s", incident_id, exc)
        except Exception:
            log.exception("incident %s: running the read steps failed", incident_id)
        finally:
            self._done()
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def _run_step(self, incident_id: int, step: Any, labels: dict[str, str], ctx: RunContext) -> None:
        try:
            bound = bind_step(step, labels)
        except Exception as exc:
            self._failed(incident_id, step, "invalid", str(exc), "parameters")
            return
        try:
            result = run_bound(bound, ctx)
        except Exception as exc:
            self._failed(incident_id, step, "error", f"{type(exc).__name__}: {exc}", "exception")
            return
        self.metrics.step_runs.labels("ok" if result.ok else "failed").inc()
        if result.data.get("refused"):
            refused("refused_target", f"incident {incident_id}, step {step.id}: {result.output}")
        data = {**result.data, "params": result.params, "command": result.command}
        self.store.add_step_result(
            incident_id, step.id, result.ok, result.output, data, title=step.title, action=step.action
        )

    def _failed(self, incident_id: int, step: Any, outcome: str, output: str, error: str) -> None:
        """A step that could not run: its parameters were refused, or running it raised."""
        self.metrics.step_runs.labels(outcome).inc()
        self.store.add_step_result(
            incident_id, step.id, False, output, {"error": error}, title=step.title, action=step.action
        )

    # --- resuming after a restart ---------------------------------------------------------------------
    def resume(self, limit: int) -> threading.Thread:
        """A thread queueing again the incidents whose read steps did not finish (see the class)."""
        thread = threading.Thread(target=self._resume, args=(limit,), name="incident-resume", daemon=True)
        thread.start()
        return thread

    def _resume(self, limit: int) -> None:
        try:
            found = self.store.unfinished()
        except StoreError as exc:
            log.error("resuming incidents: %s", exc)
            return
        for row in found[limit:]:
            self.store.set_steps(
                row["id"], "not_resumed", f"read steps not resumed: over --resume-max ({limit})"
            )
        if found:
            log.warning("resuming the read steps of %d incident(s) left unfinished", min(limit, len(found)))
        for row in found[:limit]:
            if not self._resume_one(row):
                return

    def _resume_one(self, row: dict[str, Any]) -> bool:
        """Queue one unfinished incident again; False once the service is stopping."""
        incident_id, labels = int(row["id"]), dict(row["labels"])
        runbook = self._runbook(str(row["alertname"]))
        if isinstance(runbook, str):
            self.store.set_steps(incident_id, "done", runbook)
            return True
        note = "read steps resumed after a restart"
        if row["steps_state"] == "running":
            self.store.mark_interrupted(incident_id)
            note = (
                "read steps interrupted by a stop, resumed after the restart (steps without a result run now)"
            )
        # Fresh alerts keep a share of the queue: resuming waits while less than half of it is free.
        while not self._stopping.is_set():
            if self.free_slots > self.queue_size // 2 and self._slots.acquire(blocking=False):
                break
            self._stopping.wait(0.2)
        if self._stopping.is_set():
            return False
        try:
            self._submit(incident_id, runbook, labels, note)
        except (QueueFullError, StoreError) as exc:
            log.error("incident %s not resumed: %s", incident_id, exc)
            return False
        self.metrics.resumed.labels(row["steps_state"]).inc()
        return True
