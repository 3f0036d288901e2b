"""The one HTML shell of every runbook-service page: the document, its style, its script, its headers.

Pages are built from escaped text (`esc`); the only script is the runbook page's own, allowed by a
per-response nonce, and every page is sent with a Content-Security-Policy that allows nothing else.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi.responses import HTMLResponse

STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1d1d1f}
code,pre{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#f4f4f6;padding:.6rem;overflow-x:auto;white-space:pre-wrap}
.step{border:1px solid #ccd;border-radius:6px;padding:.6rem .8rem;margin:.8rem 0}
.step.change{border-color:#d9822b;background:#fffaf3}
.kind{font-size:.75em;text-transform:uppercase;padding:.1rem .4rem;border-radius:3px;background:#dde}
.change .kind{background:#f5c58a}
.missing{color:#b00020}
table{border-collapse:collapse}
td,th{border:1px solid #ccd;padding:.2rem .5rem;text-align:left;vertical-align:top}
.severity-critical{color:#b00020;font-weight:bold}.severity-warning{color:#b36b00}
.ok{color:#070}.failed{color:#a00}
"""

RUNBOOK_SCRIPT = """
const labels = JSON.parse(document.getElementById("labels").textContent);
for (const button of document.querySelectorAll("button.run")) {
  button.addEventListener("click", async () => {
    const step = button.dataset.step;
    const out = document.getElementById("out-" + step);
    const box = document.getElementById("exec-" + step);
    const execute = box !== null && box.checked;
    const sent = Object.entries(labels).map(([k, v]) => "  " + k + "=" + JSON.stringify(v)).join("\\n");
    const question = "Execute step " + step + " for real?\\n\\n" + button.dataset.call +
      "\\n\\nwith the alert labels:\\n" + (sent || "  (none)");
    if (execute && !confirm(question)) { return; }
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


def esc(value: Any) -> str:
    """Any value as escaped HTML text (quotes too, so it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


def page(title: str, body: str, *, nonce: str | None = None, status: int = 200) -> HTMLResponse:
    """The page: `body` inside the shell; scripts run only with `nonce`, when one is given."""
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
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=headers)


def not_found(message: str) -> HTMLResponse:
    body = f'<h1>Not found</h1><p>{esc(message)}</p><p><a href="/runbooks">All runbooks</a></p>'
    return page("Not found", body, status=404)
