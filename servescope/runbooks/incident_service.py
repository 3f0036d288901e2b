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

from servescope.runbooks.actions import RunContext
from servescope.runbooks.audit import AuditError, AuditLog
from servescope.runbooks.document import RunbookError, UnknownAlertError, load_runbook, runbooks_dir
from servescope.runbooks.incidents import IncidentStore, StoreError
from servescope.runbooks.payload import AlertmanagerPayload
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
        self.queue_depth = Gauge(
            "servescope_webhook_queue_depth",
            "Incidents whose read steps are queued or running.",
            registry=self.registry,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


# --- the service ------------------------------------------------------------------------------------
class QueueFullError(RuntimeError):
    pass


class IncidentService:
    """The store, the runbooks, the worker pool and the metrics behind the router."""

    def __init__(
        self,
        store: IncidentStore,
        runbooks: Path | None,
        ctx_factory: Callable[[], RunContext],
        *,
        workers: int = 4,
        queue_size: int = 64,
        metrics: WebhookMetrics | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        if workers < 1 or queue_size < 0:
            raise ValueError("workers must be at least 1 and queue_size at least 0")
        self.store = store
        self.runbooks = runbooks
        self.ctx_factory = ctx_factory
        self.metrics = metrics if metrics is not None else WebhookMetrics()
        self.audit = audit  # where a read step refused an untrusted instance is recorded
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="runbook-step")
        self._slots = threading.BoundedSemaphore(workers + queue_size)
        self._handling = threading.Lock()  # one notification at a time: check, act, remember

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)

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

    def _fire(self, record: dict[str, Any], labels: dict[str, str]) -> int:
        alertname = labels.get("alertname", "")
        try:
            runbook = load_runbook(self._folder(), alertname)
        except UnknownAlertError as exc:
            self.store.record_firing(record, note=f"no runbook: {exc}")
            return 0
        except RunbookError as exc:
            self.store.record_firing(record, note=f"the runbook cannot be used: {exc}")
            return 0
        incident_id, _ = self.store.record_firing(record)
        if not self._slots.acquire(blocking=False):
            self.store.set_note(incident_id, "read steps not queued yet: the worker queue was full")
            raise QueueFullError("the runbook worker queue is full")
        self.metrics.queue_depth.inc()
        try:
            self.store.set_note(incident_id, f"read steps of runbook {runbook.alert} queued")
            self._pool.submit(self._run_steps, incident_id, list(runbook.read_steps), dict(labels))
        except RuntimeError as exc:  # the pool is shut down, or the store cannot write (StoreError)
            self._done()
            if isinstance(exc, StoreError):
                raise
            raise QueueFullError("the runbook worker pool is shut down") from None
        except BaseException:
            self._done()
            raise
        return 1

    @property
    def free_slots(self) -> int:
        """Slots of the worker queue not taken (for tests and health: none may leak)."""
        return self._slots._value

    def _done(self) -> None:
        self.metrics.queue_depth.dec()
        self._slots.release()

    def _run_steps(self, incident_id: int, steps: list[Any], labels: dict[str, str]) -> None:
        try:
            ctx = self.ctx_factory().for_labels(labels).model_copy(update={"execute": False})
            for step in steps:
                self._run_step(incident_id, step, labels, ctx)
            self.store.set_note(incident_id, f"{len(steps)} read step(s) run")
        except StoreError as exc:  # one line, not a traceback per incident while the disk is full
            log.error("incident %s: %s", incident_id, exc)
        except Exception:
            log.exception("incident %s: running the read steps failed", incident_id)
        finally:
            self._done()

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
            self._audit_refusal(step, labels, result.output)
        data = {**result.data, "params": result.params, "command": result.command}
        self.store.add_step_result(
            incident_id, step.id, result.ok, result.output, data, title=step.title, action=step.action
        )

    def _audit_refusal(self, step: Any, labels: dict[str, str], message: str) -> None:
        if self.audit is None:
            return
        try:
            self.audit.record(
                host="alertmanager webhook",
                token=None,
                alert=labels.get("alertname", ""),
                step=step.id,
                parameters=None,
                labels=labels,
                execute=False,
                outcome="refused_target",
                message=message,
            )
        except AuditError as exc:
            log.error("%s (a refused read step of %s)", exc, step.id)

    def _failed(self, incident_id: int, step: Any, outcome: str, output: str, error: str) -> None:
        """A step that could not run: its parameters were refused, or running it raised."""
        self.metrics.step_runs.labels(outcome).inc()
        self.store.add_step_result(
            incident_id, step.id, False, output, {"error": error}, title=step.title, action=step.action
        )
