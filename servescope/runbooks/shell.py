"""What the runbook service's pages add to the common shell (common/html.py): their style, and the
runbook page's script, the only one, allowed by a per-response nonce."""

from __future__ import annotations

from fastapi.responses import HTMLResponse

from servescope.common.html import esc
from servescope.common.html import page as html_page

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


def page(title: str, body: str, *, nonce: str | None = None, status: int = 200) -> HTMLResponse:
    """A runbook-service page: `body` in the common shell, with the service's style."""
    return html_page(title, body, style=STYLE, nonce=nonce, status=status)


def not_found(message: str) -> HTMLResponse:
    body = f'<h1>Not found</h1><p>{esc(message)}</p><p><a href="/runbooks">All runbooks</a></p>'
    return page("Not found", body, status=404)
