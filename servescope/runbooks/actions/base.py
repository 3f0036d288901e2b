"""What every action shares: typed parameters, the run context, the result, the registry.

Parameter types validate values that may come from an alert's labels, i.e. from anyone able to put a
label on a series. Each one is a whitelist (ASCII patterns matched in full, bounded lengths) or, for the
free-text ones (label values, comments), a bounded string that is only ever passed on as data: escaped
into a PromQL string literal, or encoded into JSON.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from servescope.exporter.vllm.text_parser import ExpositionError

Kind = Literal["read", "change"]
DEFAULT_EXPORTER_URL = "http://127.0.0.1:9108"


class LiteralOnly:
    """Marks a parameter that a runbook must give literally: never bound from an alert label."""

    def __repr__(self) -> str:
        return "LiteralOnly()"


def _string(value: Any, what: str, max_length: int, *, ints: bool = False) -> str:
    if ints and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {type(value).__name__}")
    if len(value) > max_length:
        raise ValueError(f"expected {what}: {len(value)} characters is over the limit of {max_length}")
    if "\x00" in value:
        raise ValueError(f"expected {what}: contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"expected {what}: not valid UTF-8 text") from None
    return value


def _matching(pattern: re.Pattern[str], what: str, max_length: int, *, ints: bool = False) -> Any:
    def check(value: Any) -> str:
        text = _string(value, what, max_length, ints=ints)
        if pattern.fullmatch(text) is None:
            raise ValueError(f"expected {what}, got {text[:60]!r}")
        return text

    return PlainValidator(check, json_schema_input_type=str)


_GPU_REF = re.compile(r"[0-9]{1,4}|GPU-[0-9a-fA-F]{1,8}(?:-[0-9a-fA-F]{1,12}){0,6}", re.ASCII)
_K8S_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
# Ports, paths and queries of ordinary endpoints; no quotes, parentheses, `$`, `;`, backticks or spaces.
_HTTP_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/?#=&+,:@\-]*)?", re.ASCII)
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+\-]*", re.ASCII)
_WINDOW = re.compile(r"([0-9]{1,7})([smhd])", re.ASCII)
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_SECONDS = 30 * 86400


def _window(value: Any) -> str:
    text = _string(value, "a duration such as 90s, 30m, 1h or 2d", 16)
    found = _WINDOW.fullmatch(text)
    if found is None:
        raise ValueError(f"expected a duration such as 90s, 30m, 1h or 2d, got {text[:40]!r}")
    seconds = int(found.group(1)) * _UNITS[found.group(2)]
    if not 1 <= seconds <= MAX_WINDOW_SECONDS:
        raise ValueError(f"expected a duration between 1s and 30d, got {text!r}")
    return text


def _index(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a GPU index (0-1023), got a boolean")
    if isinstance(value, str):
        if re.fullmatch(r"[0-9]{1,4}", value, re.ASCII) is None:
            raise ValueError(f"expected a GPU index (0-1023), got {value[:60]!r}")
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= 1023:
        raise ValueError(f"expected a GPU index (0-1023), got {value!r}")
    return value


def window_seconds(window: str) -> int:
    found = _WINDOW.fullmatch(window)
    assert found is not None  # validated by Window
    return int(found.group(1)) * _UNITS[found.group(2)]


GpuRef = Annotated[
    str,
    _matching(_GPU_REF, "a GPU: its NVML index (digits) or UUID (GPU- then hex and dashes)", 80, ints=True),
]
GpuIndex = Annotated[int, PlainValidator(_index, json_schema_input_type=int)]
Window = Annotated[str, PlainValidator(_window, json_schema_input_type=str)]
K8sName = Annotated[
    str,
    _matching(_K8S_NAME, "a Kubernetes name (lowercase letters, digits, '-' and '.', 253 at most)", 253),
]
HttpUrl = Annotated[str, _matching(_HTTP_URL, "an http:// or https:// URL", 2048)]
ModelName = Annotated[
    str, _matching(_MODEL_NAME, "a model name (letters, digits and . _ / : @ + -, 256 at most)", 256)
]
LabelName = Annotated[str, _matching(_LABEL_NAME, "a label name ([a-zA-Z_][a-zA-Z0-9_]*)", 128)]
LabelValue = Annotated[
    str, PlainValidator(lambda v: _string(v, "a label value (1024 characters at most)", 1024, ints=True))
]
Comment = Annotated[
    str,
    PlainValidator(lambda v: _string(v, "a comment (1000 characters at most)", 1000)),
    Field(min_length=1),
]


class Params(BaseModel):
    """Base of every action's parameters: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


class RunContext(BaseModel):
    """Where actions read from and what they may do; built from the command line, never from labels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exporter_url: str = DEFAULT_EXPORTER_URL
    prometheus_url: str | None = None
    alertmanager_url: str | None = None
    kubectl: str = "kubectl"
    dcgmi: str = "dcgmi"
    timeout_seconds: float = Field(10.0, gt=0, le=600)
    execute: bool = False
    # One exporter per node: a central runbook service asks the exporter the alert came from.
    exporter_per_instance: bool = False

    def for_labels(self, labels: Mapping[str, str]) -> RunContext:
        """This context, reading from the alert's own exporter when `exporter_per_instance` is on.

        The `instance` label (host:port, as Prometheus scraped it) replaces the exporter URL's host only
        when it is a plain host name or IP address and its port is the configured exporter's port: labels
        are untrusted, and this keeps them from pointing requests anywhere but at exporters.
        """
        if not self.exporter_per_instance:
            return self
        instance = labels.get("instance", "")
        found = _INSTANCE.fullmatch(instance)
        configured = urlsplit(self.exporter_url)
        if found is None or configured.port is None or int(found.group("port")) != configured.port:
            return self
        return self.model_copy(update={"exporter_url": f"{configured.scheme}://{instance}"})


# host:port where host is a DNS name, an IPv4 address, or a bracketed IPv6 address.
_INSTANCE = re.compile(
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]):(?P<port>[0-9]{1,5})"
)


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


class ActionError(Exception):
    """A read or change that could not be done; its message says why and what to check."""


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
            result = StepResult(ok=False, title=title, output=str(exc))
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
@functools.cache
def http() -> httpx.Client:
    """One HTTP client for the process: its TLS context and connections are built once, not per request."""
    return httpx.Client(follow_redirects=False)


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


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(indent + line for line in lines)


def gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def mib_per_min(value: float | None) -> str:
    return "-" if value is None else f"{value * 60 / 2**20:+.1f} MiB/min"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "never (not rising)"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def number(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if value.is_integer() else f"{value:.4g}"
