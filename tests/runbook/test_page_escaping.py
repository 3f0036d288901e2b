"""Hostile label values (scraped from a fleet, sent in a webhook or a link) on the runbook service's
pages: shown as text, never as markup, and never able to leave the attribute or element they stand in."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest
from jinja2 import UndefinedError

from servescope.core.html import render
from servescope.runbooks.document import load_runbook, runbooks_dir
from servescope.runbooks.incident_html import incident_html, incidents_html
from servescope.runbooks.model import RunbookError
from servescope.runbooks.runbook_html import index_html, runbook_html
from servescope.runbooks.shell import broken, not_found

HOSTILE = "<script>alert('x')</script>\" onmouseover=\"alert(1)\" & 'quoted' &amp;"


class _Page(HTMLParser):
    """What a browser would build: elements with their attributes, text, and script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def _parsed(document: str) -> _Page:
    page = _Page()
    page.feed(document)
    page.close()
    return page


def _assert_inert(document: str, scripts_allowed: int = 0) -> _Page:
    page = _parsed(document)
    assert [t for t, _ in page.tags].count("script") == scripts_allowed
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs), "an event handler"
    assert "<script>alert" not in document and "&amp;amp;" in document  # `&` itself escaped
    return page


def _incident(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "id": 7,
        "url": "/incidents/7",
        "alertname": "TestAlert",
        "status": "firing",
        "starts_at": "2025-03-01T10:00:00Z",
        "ends_at": None,
        "note": HOSTILE,
        "labels": labels,
        "annotations": {"summary": HOSTILE},
        "steps": [{"step_id": "s", "title": HOSTILE, "ok": True, "output": HOSTILE, "data": {"v": HOSTILE}}],
    }


def test_an_incident_page_shows_hostile_labels_as_text() -> None:
    labels = {"alertname": "TestAlert", "pod": HOSTILE}
    page = _assert_inert(incident_html(_incident(labels)).body.decode())
    text = "".join(page.text)
    # The browser's text is the value as sent: escaped once, not twice, nothing dropped.
    assert text.count(HOSTILE) >= 5, text
    assert json.dumps({"v": HOSTILE}, indent=2) in text
    listing = _assert_inert(incidents_html([_incident(labels)]).body.decode())
    assert HOSTILE in "".join(listing.text)


def test_a_runbook_page_keeps_hostile_labels_in_their_place() -> None:
    runbook = load_runbook(runbooks_dir(None), "ServescopeGpuSaturated")
    labels = {"gpu": "0", "namespace": HOSTILE, "pod": "</script><script>alert(2)</script>"}
    latest = [{"id": HOSTILE, "status": "firing", "starts_at": "t", "labels": labels, "url": "/incidents/1"}]
    document = str(runbook_html(runbook, labels, latest, "n0nce"))
    page = _assert_inert(document, scripts_allowed=2)  # the labels' JSON and the nonce'd script
    # The labels' JSON cannot close its element, and reads back as the labels themselves.
    data = next(s for s in page.scripts if s.lstrip().startswith("{"))
    assert json.loads(data) == labels
    assert "</script><script>alert(2)" not in document
    # In an attribute (the Execute confirmation's text), a quote cannot end the value.
    buttons = [set(attrs) for tag, attrs in page.tags if tag == "button"]
    assert buttons and all(
        b == {"class", "id", "data-step", "data-kind", "data-url", "data-call"} for b in buttons
    )
    assert HOSTILE in "".join(page.text)


def test_error_pages_and_the_index_show_a_hostile_name_as_text() -> None:
    error = RunbookError(f"pages/{HOSTILE}.md", 3, f"unknown action {HOSTILE!r}")
    answer = broken(error)
    assert answer.status_code == 500
    assert str(error) in "".join(_assert_inert(answer.body.decode()).text)
    message = f"No runbook for alert {HOSTILE!r}."
    missing = not_found(message)
    assert missing.status_code == 404 and message in "".join(_assert_inert(missing.body.decode()).text)
    index = str(index_html([], [error]))
    assert str(error) in "".join(_assert_inert(index).text)


def test_a_template_refuses_a_value_it_was_not_given() -> None:
    """StrictUndefined: a page missing a value fails loudly instead of showing an empty string."""
    with pytest.raises(UndefinedError):
        render("servescope.runbooks", "not_found.html")
