"""What every action shares: the run context, the result, the registry, and running argv or HTTP."""

from __future__ import annotations

import inspect
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS
from servescope.core.config import AlertsConfig
from servescope.core.errors import ServescopeError
from servescope.core.exposition import ExpositionError
from servescope.runbooks.actions.params import K8sName, Params

Kind = Literal["read", "change"]
DEFAULT_EXPORTER_URL = "http://127.0.0.1:9108"


class RunContext(BaseModel):
    """Where actions read from and what they may do; built from the command line, never from labels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exporter_url: str = DEFAULT_EXPORTER_URL
    prometheus_url: str | None = None
    alertmanager_url: str | None = None
    # The Kubernetes API change actions use (core/kube.py): all empty, the pod's ServiceAccount.
    kube_api_url: str | None = None
    kube_token_file: str | None = None
    kube_ca_file: str | None = None
    kubeconfig: str | None = None
    timeout_seconds: float = Field(10.0, gt=0, le=600)
    execute: bool = False
    # Where `rollback` looks for a model's workload: the namespaces the service has a Role in, and the
    # pod labels a revision is read from, in the PodMonitor's order (deploy render passes both).
    serving_namespaces: tuple[K8sName, ...] = ()
    revision_pod_labels: tuple[str, ...] = DEFAULT_REVISION_POD_LABELS
    # One exporter per node: a central runbook service asks the exporter the alert came from, found
    # through Prometheus' targets of `exporter_job` or named by `exporter_allow` (trust.exporter_base).
    exporter_per_instance: bool = False
    exporter_job: str = "servescope"
    exporter_allow: tuple[str, ...] = ()
    instance: str | None = None  # the alert's instance read steps ask, set by for_labels
    # The thresholds the rules use (--alerts-config): a step's warnings say what the alerts say.
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)

    def for_labels(self, labels: Mapping[str, str]) -> RunContext:
        """This context, reading from the alert's own exporter when `exporter_per_instance` is on: the
        `instance` label is kept (bounded) and `trust.exporter_base` finds the address it names."""
        instance = labels.get("instance", "")
        if not self.exporter_per_instance or not instance:
            return self
        return self.model_copy(update={"instance": instance[:_MAX_INSTANCE]})


_MAX_INSTANCE = 300  # a DNS name (253) and a port, or an IPv6 address in brackets


class StepResult(BaseModel):
    """What a step did or would do: `output` for people, `data` for programs, `command` for argv."""

    ok: bool
    title: str
    output: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    svg: str | None = None
    command: list[str] | None = None
    dry_run: bool = False
    step: str | None = None
    action: str | None = None
    kind: Kind | None = None
    params: dict[str, Any] | None = None


class ActionError(ServescopeError):
    """A read or change that could not be done; its message says why and what to check."""

    reason = "action_failed"

    refusal: str | None = None  # set when the service refused to do it (the result's data says why)


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Action(Generic[P]):
    name: str
    kind: Kind
    params: type[P]
    function: Callable[[P, RunContext], StepResult]
    doc: str

    def run(self, params: P, ctx: RunContext) -> StepResult:
        """Run it; a failure to reach a service or a tool becomes an `ok=False` result, not a crash."""
        title = self.doc.splitlines()[0] if self.doc else self.name
        try:
            result = self.function(params, ctx)
        except ActionError as exc:
            data = {"refused": exc.refusal} if exc.refusal else {}
            result = StepResult(ok=False, title=title, output=str(exc), data=data)
        except httpx.HTTPError as exc:
            where = f" ({exc.request.url})" if _has_request(exc) else ""
            result = StepResult(ok=False, title=title, output=f"HTTP error{where}: {exc}")
        except (ExpositionError, ValueError) as exc:
            result = StepResult(ok=False, title=title, output=f"unexpected answer: {exc}")
        except subprocess.TimeoutExpired as exc:
            result = StepResult(
                ok=False, title=title, output=f"timed out after {exc.timeout:.0f}s: {exc.cmd}"
            )
        except OSError as exc:
            result = StepResult(ok=False, title=title, output=f"{exc.strerror or exc}")
        return result.model_copy(update={"action": self.name, "kind": self.kind})


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 (the property raises when no request is attached)
    except RuntimeError:
        return False
    return True


ACTIONS: dict[str, Action[Any]] = {}


def action(name: str, kind: Kind, params: type[P]) -> Callable[[Callable[[P, RunContext], StepResult]], Any]:
    """Register `function(params, ctx) -> StepResult` as the action `name`."""

    def register(function: Callable[[P, RunContext], StepResult]) -> Callable[[P, RunContext], StepResult]:
        if name in ACTIONS:
            raise RuntimeError(f"action {name!r} registered twice")
        ACTIONS[name] = Action(name, kind, params, function, inspect.getdoc(function) or name)
        return function

    return register


# --- helpers for actions ---------------------------------------------------------------------------
def run_argv(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a fixed argument list (no shell, no stdin) with a timeout."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
    )


def shown(argv: list[str]) -> str:
    """The argv as one copy-pasteable shell line (quoted), for display only: it is never run by a shell."""
    return shlex.join(argv)


def tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]
