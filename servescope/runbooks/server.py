"""The runbooks in a browser: an index, one page per alert with Run buttons, and a JSON run endpoint.

    GET  /runbooks                              index: alert, severity, summary
    GET  /runbooks/{alert}?<label>=<value>...   the runbook, its steps bound to the alert's labels
    GET  /runbooks/{alert}/memory.svg?gpu=...   the GPU's memory curve (memory_curve action, proxied)
    POST /runbooks/{alert}/steps/{id}/run       {"labels": {...}, "execute": false} -> StepResult JSON

Labels and query parameters are untrusted: everything shown is HTML-escaped, and values only reach an
action through its typed parameters (422 with the message when they are not acceptable). Read steps need
no token. Change steps need `Authorization: Bearer <token>`; without a configured token they are always
refused (403), a missing or wrong one is 401, and a valid one runs dry unless `execute` is true. Every
change-step request is recorded in the audit log.
"""

from __future__ import annotations

import hmac
import html
import json
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from servescope.runbooks.actions import ACTIONS, RunContext
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG, AuditLog, Outcome
from servescope.runbooks.binding import render
from servescope.runbooks.document import (
    SECTIONS,
    Runbook,
    RunbookError,
    Step,
    UnknownAlertError,
    is_label_name,
    load_runbook,
    load_runbooks,
    runbooks_dir,
)
from servescope.runbooks.runner import ParamError, bind_step, run_bound

ENV_TOKEN = "SERVESCOPE_RUNBOOK_TOKEN"
Incidents = Callable[[str], list[dict[str, Any]]]
ContextFactory = Callable[[Request], RunContext]
_MAX_LABELS = 64

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1d1d1f}
code,pre{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#f4f4f6;padding:.6rem;overflow-x:auto;white-space:pre-wrap}
.step{border:1px solid #ccd;border-radius:6px;padding:.6rem .8rem;margin:.8rem 0}
.step.change{border-color:#d9822b;background:#fffaf3}
.kind{font-size:.75em;text-transform:uppercase;padding:.1rem .4rem;border-radius:3px;background:#dde}
.change .kind{background:#f5c58a}
.missing{color:#b00020}
table{border-collapse:collapse}td,th{border:1px solid #ccd;padding:.2rem .5rem;text-align:left}
.severity-critical{color:#b00020;font-weight:bold}.severity-warning{color:#b36b00}
"""

_SCRIPT = """
const labels = JSON.parse(document.getElementById("labels").textContent);
for (const button of document.querySelectorAll("button.run")) {
  button.addEventListener("click", async () => {
    const step = button.dataset.step;
    const out = document.getElementById("out-" + step);
    const box = document.getElementById("exec-" + step);
    const execute = box !== null && box.checked;
    if (execute && !confirm("Execute step " + step + " for real?")) { return; }
    const headers = {"Content-Type": "application/json"};
    const token = document.getElementById("token").value.trim();
    if (button.dataset.kind === "change" && token) { headers["Authorization"] = "Bearer " + token; }
    out.hidden = false;
    out.textContent = "running...";
    button.disabled = true;
    try {
      const answer = await fetch(button.dataset.url, {
        method: "POST", headers: headers, body: JSON.stringify({labels: labels, execute: execute})});
      const body = await answer.json().catch(() => ({}));
      if (answer.ok) {
        const dry = body.kind === "change" && body.dry_run ? " (dry run)" : "";
        const status = (body.ok ? "OK" : "FAILED") + dry;
        out.textContent = status + "\\n" + (body.output || "");
      } else {
        out.textContent = "HTTP " + answer.status + ": " + (body.detail || answer.statusText);
      }
    } catch (error) {
      out.textContent = "request failed: " + error;
    } finally {
      button.disabled = false;
    }
  });
}
for (const box of document.querySelectorAll("input.execute")) {
  box.addEventListener("change", () => {
    const button = document.getElementById("run-" + box.dataset.step);
    button.textContent = box.checked ? "Execute" : "Dry run";
  });
}
"""


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str] = Field(default_factory=dict)
    execute: bool = False


# --- Markdown, the small part runbooks use -----------------------------------------------------------
_INLINE_CODE = re.compile(r"(`[^`]+`)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def inline(text: str) -> str:
    """Escaped text with `code`, **bold** and *emphasis*."""
    parts = []
    for piece in _INLINE_CODE.split(text):
        if piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            parts.append(f"<code>{html.escape(piece[1:-1])}</code>")
        else:
            escaped = _BOLD.sub(r"<strong>\1</strong>", html.escape(piece))
            parts.append(_EMPHASIS.sub(r"<em>\1</em>", escaped))
    return "".join(parts)


def markdown(text: str) -> str:
    """Headings, paragraphs, lists (one level), fenced code; every character of the text is escaped."""
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""

    def close() -> None:
        nonlocal list_tag
        if paragraph:
            out.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{inline(i)}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _MD_FENCE.match(line)
        if fence is not None:
            close()
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1)), len(lines)
            )
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : end]))}</code></pre>")
            i = end + 1
            continue
        heading = _MD_HEADING.match(line)
        item = _LIST_ITEM.match(line)
        if not line.strip():
            close()
        elif heading is not None:
            close()
            level = min(6, len(heading.group(1)) + 2)
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif item is not None and len(item.group(1)) < 2:
            tag = "ol" if item.group(2)[0].isdigit() else "ul"
            if paragraph or (list_tag and tag != list_tag):
                close()
            list_tag = tag
            items.append(item.group(3))
        elif items:
            items[-1] += " " + line.strip()
        else:
            paragraph.append(line.strip())
        i += 1
    close()
    return "\n".join(out)


# --- pages ---------------------------------------------------------------------------------------------
def _page(title: str, body: str, *, nonce: str | None = None, status: int = 200) -> HTMLResponse:
    script_src = f"'nonce-{nonce}'" if nonce else "'none'"
    headers = {
        "Content-Security-Policy": (
            f"default-src 'self'; script-src {script_src}; style-src 'unsafe-inline'; img-src 'self'; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=headers)


def _not_found(message: str) -> HTMLResponse:
    body = f'<h1>Not found</h1><p>{html.escape(message)}</p><p><a href="/runbooks">All runbooks</a></p>'
    return _page("Not found", body, status=404)


def _labels_from_query(request: Request) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if is_label_name(name) and len(labels) < _MAX_LABELS:
            labels[name] = value
    return labels


def _step_html(alert: str, step: Step, labels: dict[str, str]) -> str:
    missing = [name for name in step.labels if name not in labels]
    if missing:
        args = ", ".join(f"{k}={render(v)}" for k, v in step.params.items())
        names = ", ".join(f"'{m}'" for m in missing)
        params = (
            f"<pre>{html.escape(step.action)}({html.escape(args)})</pre>"
            f'<p class="missing">needs the alert label(s) {html.escape(names)}, not given</p>'
        )
    else:
        try:
            bound = bind_step(step, labels)
        except ParamError as exc:
            params = f'<p class="missing">{html.escape(str(exc))}</p>'
        else:
            values = bound.params.model_dump(mode="json", exclude_unset=True)
            args = ", ".join(f"{k}={v!r}" for k, v in values.items())
            params = f"<pre>{html.escape(step.action)}({html.escape(args)})</pre>"
    sid = html.escape(step.id)
    url = html.escape(f"{alert}/steps/{step.id}/run")
    if step.kind == "change":
        controls = (
            f'<button class="run" id="run-{sid}" data-step="{sid}" data-kind="change" data-url="{url}">'
            "Dry run</button> "
            f'<label><input type="checkbox" class="execute" id="exec-{sid}" data-step="{sid}"> '
            "execute</label>"
        )
    else:
        controls = (
            f'<button class="run" id="run-{sid}" data-step="{sid}" data-kind="read" data-url="{url}">'
            "Run</button>"
        )
    return (
        f'<div class="step {html.escape(step.kind)}" id="step-{sid}">'
        f'<h4><span class="kind">{html.escape(step.kind)}</span> {html.escape(step.title)} '
        f"<small>({sid})</small></h4>{params}{controls}"
        f'<pre class="output" id="out-{sid}" hidden></pre></div>'
    )


def _incidents_html(incidents: list[dict[str, Any]]) -> str:
    if not incidents:
        return "<p>No recent incidents.</p>"
    rows = []
    for incident in incidents:
        url = str(incident.get("url") or "")
        ident = html.escape(str(incident.get("id", "")))
        link = (
            f'<a href="{html.escape(url)}">{ident}</a>'
            if url.startswith(("http://", "https://", "/"))
            else ident
        )
        labels = incident.get("labels") or {}
        shown = ", ".join(f"{k}={v}" for k, v in labels.items()) if isinstance(labels, dict) else str(labels)
        rows.append(
            f"<tr><td>{link}</td><td>{html.escape(str(incident.get('status', '')))}</td>"
            f"<td>{html.escape(str(incident.get('starts_at', '')))}</td><td>{html.escape(shown)}</td></tr>"
        )
    return (
        "<table><tr><th>incident</th><th>status</th><th>started</th><th>labels</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _runbook_html(
    runbook: Runbook, labels: dict[str, str], incidents: list[dict[str, Any]] | None, nonce: str
) -> str:
    alert = runbook.alert
    parts = [
        '<p><a href="../runbooks">All runbooks</a></p>',
        f"<h1>{html.escape(alert)}</h1>",
        f'<p><span class="severity-{html.escape(runbook.severity)}">{html.escape(runbook.severity)}</span>: '
        f"{html.escape(runbook.summary)}</p>",
    ]
    if labels:
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(v)}</code></td></tr>"
            for k, v in labels.items()
        )
        parts.append(f"<h2>Alert labels</h2><table>{rows}</table>")
    else:
        parts.append("<p>No alert labels given: add them to the address (<code>?gpu=0&amp;...</code>).</p>")
    if "gpu" in labels:
        src = html.escape(f"{alert}/memory.svg?gpu={quote(labels['gpu'], safe='')}", quote=True)
        parts.append(
            '<h2>Memory curve</h2><p><img id="memory-curve" alt="memory curve of the GPU (30 min)" '
            f'src="{src}" style="max-width:100%"></p>'
        )
    if incidents is not None:
        parts.append("<h2>Latest incidents</h2>" + _incidents_html(incidents))
    parts.append(
        '<p><label>Token for change steps: <input type="password" id="token" autocomplete="off" '
        'placeholder="bearer token"></label> (read steps need none)</p>'
    )
    order = [s for s in SECTIONS if s in runbook.sections] + [
        s for s in runbook.sections if s not in SECTIONS
    ]
    for section in order:
        parts.append(f"<h2>{html.escape(section)}</h2>")
        parts.append(markdown(runbook.sections[section]))
        parts.extend(_step_html(alert, s, labels) for s in runbook.steps if s.section == section)
    parts.extend(_step_html(alert, s, labels) for s in runbook.steps if s.section not in runbook.sections)
    # JSON in a script element: `<`, `>` and `&` escaped so no value can close the element.
    data = json.dumps(labels).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    parts.append(f'<script type="application/json" id="labels">{data}</script>')
    parts.append(f'<script nonce="{nonce}">{_SCRIPT}</script>')
    return "\n".join(parts)


# --- the router ----------------------------------------------------------------------------------------
def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def runbook_router(  # noqa: PLR0915 (the routes are closures over the configuration)
    runbooks_dir: Path,
    ctx_factory: ContextFactory,
    *,
    token: str | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
) -> APIRouter:
    """The /runbooks routes over a folder of runbooks; `ctx_factory(request)` gives the RunContext."""
    router = APIRouter()

    def load(alert: str) -> Runbook:
        return load_runbook(runbooks_dir, alert)

    @router.get("/runbooks", include_in_schema=False)
    def index() -> HTMLResponse:
        found, errors = load_runbooks(runbooks_dir)
        rows = "".join(
            f'<tr><td><a href="runbooks/{html.escape(r.alert)}">{html.escape(r.alert)}</a></td>'
            f'<td class="severity-{html.escape(r.severity)}">{html.escape(r.severity)}</td>'
            f"<td>{html.escape(r.summary)}</td>"
            f"<td>{len(r.read_steps)} read, {len(r.change_steps)} change</td></tr>"
            for r in found
        )
        broken = "".join(f"<li>{html.escape(str(e))}</li>" for e in errors)
        body = (
            "<h1>servescope runbooks</h1>"
            "<p>One per alert. Open one from the alert's <code>runbook_url</code> to bind its steps to the "
            "alert's labels.</p>"
            f"<table><tr><th>alert</th><th>severity</th><th>summary</th><th>steps</th></tr>{rows}</table>"
            + (f'<h2>Broken runbooks</h2><ul class="missing">{broken}</ul>' if broken else "")
        )
        return _page("servescope runbooks", body)

    @router.get("/runbooks/{alert}", include_in_schema=False)
    def page(alert: str, request: Request) -> HTMLResponse:
        try:
            runbook = load(alert)
        except UnknownAlertError:
            return _not_found(f"No runbook for alert {alert[:80]!r}.")
        except RunbookError as exc:
            return _page(
                "Broken runbook", f"<h1>Broken runbook</h1><pre>{html.escape(str(exc))}</pre>", status=500
            )
        labels = _labels_from_query(request)
        latest: list[dict[str, Any]] | None = None
        if incidents is not None:
            try:
                latest = incidents(runbook.alert)
            except Exception:
                latest = []
        nonce = secrets.token_urlsafe(16)
        return _page(f"{runbook.alert} runbook", _runbook_html(runbook, labels, latest, nonce), nonce=nonce)

    @router.get("/runbooks/{alert}/memory.svg", include_in_schema=False)
    def memory_svg(alert: str, request: Request, gpu: str = "", window: str = "30m") -> Response:
        try:
            load(alert)
        except (UnknownAlertError, RunbookError):
            return Response(f"no runbook for alert {alert[:80]!r}", status_code=404, media_type="text/plain")
        action = ACTIONS["memory_curve"]
        try:
            params = action.params.model_validate({"gpu": gpu, "window": window})
        except ValidationError as exc:
            message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            return Response(f"invalid gpu or window: {message}", status_code=422, media_type="text/plain")
        result = action.run(params, ctx_factory(request).model_copy(update={"execute": False}))
        if not result.ok or result.svg is None:
            return Response(result.output, status_code=502, media_type="text/plain")
        # Served from this origin: an SVG opened directly may not run scripts.
        headers = {
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
            "Cache-Control": "no-store",
        }
        return Response(result.svg, media_type="image/svg+xml", headers=headers)

    @router.post("/runbooks/{alert}/steps/{step_id}/run")
    def run_step(alert: str, step_id: str, body: RunRequest, request: Request) -> JSONResponse:
        try:
            runbook = load(alert)
        except UnknownAlertError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=404)
        except RunbookError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=500)
        step = runbook.step(step_id)
        if step is None:
            known = ", ".join(s.id for s in runbook.steps)
            return JSONResponse(
                {"detail": f"{alert} has no step {step_id[:80]!r} (steps: {known})"}, status_code=404
            )
        ctx = ctx_factory(request).for_labels(body.labels)
        if step.kind == "read":
            try:
                bound = bind_step(step, body.labels)
            except ParamError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=422)
            return JSONResponse(run_bound(bound, ctx).model_dump(mode="json"))

        presented = _bearer(request)
        host = request.client.host if request.client is not None else None

        def record(outcome: Outcome, message: str, parameters: dict[str, Any] | None = None) -> None:
            audit.record(
                host=host,
                token=presented,
                alert=runbook.alert,
                step=step.id,
                parameters=parameters,
                labels=body.labels,
                execute=body.execute,
                outcome=outcome,
                message=message,
            )

        if not token:
            message = (
                "change steps are disabled: no token is configured (start the server with --token-file FILE "
                f"or set {ENV_TOKEN})"
            )
            record("refused_not_configured", message)
            return JSONResponse({"detail": message}, status_code=403)
        if presented is None:
            message = "change steps need the header Authorization: Bearer <token>"
            record("refused_no_token", message)
            return JSONResponse({"detail": message}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), token.encode("utf-8")):
            message = "the bearer token is not valid"
            record("refused_bad_token", message)
            return JSONResponse(
                {"detail": message},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        try:
            bound = bind_step(step, body.labels)
        except ParamError as exc:
            record("failed", f"invalid parameters: {exc}")
            return JSONResponse({"detail": str(exc)}, status_code=422)
        parameters = bound.params.model_dump(mode="json")
        result = run_bound(bound, ctx.model_copy(update={"execute": body.execute}))
        outcome: Outcome = ("executed" if body.execute else "dry_run") if result.ok else "failed"
        record(outcome, result.output, parameters)
        return JSONResponse(result.model_dump(mode="json"))

    return router


def create_runbook_app(
    runbooks_dir: Path,
    ctx: RunContext,
    *,
    token: str | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
) -> FastAPI:
    """The standalone runbook server: the router, and `/` sending browsers to the index."""
    app = FastAPI(title="servescope runbooks", docs_url=None, redoc_url=None)
    app.include_router(
        runbook_router(runbooks_dir, lambda _: ctx, token=token, audit=audit, incidents=incidents)
    )

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/runbooks")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "alive"}

    return app


def self_context(request: Request) -> RunContext:
    """For the router mounted in the exporter: read actions ask this very server (its bound socket)."""
    server = request.scope.get("server")
    if not server or server[1] is None:
        return RunContext()
    host, port = server[0], server[1]
    shown = f"[{host}]" if ":" in host else host
    return RunContext(exporter_url=f"http://{shown}:{port}")


def mounted_router() -> APIRouter | None:
    """The router for the exporter's own app: the default runbooks folder (None when there is none), the
    token from SERVESCOPE_RUNBOOK_TOKEN (no token: change steps refused), the audit log in the working
    folder, read actions asking the exporter itself."""
    try:
        folder = runbooks_dir(None)
    except UnknownAlertError:
        return None
    token = os.environ.get(ENV_TOKEN, "").strip() or None
    return runbook_router(folder, self_context, token=token, audit=AuditLog(DEFAULT_AUDIT_LOG))
