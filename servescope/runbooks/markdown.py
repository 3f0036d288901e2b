"""The Markdown runbooks use: the block patterns the parser reads (document.py), and the HTML the pages
show, rendered by markdown-it-py.

CommonMark with tables; raw HTML is off, so every character of a runbook's prose is escaped and never
becomes markup of its own (links keep markdown-it's check that refuses `javascript:` and the like). A
runbook's `#` title and `##` sections are the page's own headings, so the prose's headings start at h3.
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

from servescope.core.html import Markup

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HEADING_SHIFT = 2


def _shift_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in {"heading_open", "heading_close"}:
            token.tag = f"h{min(6, int(token.tag[1:]) + HEADING_SHIFT)}"


@cache
def _renderer() -> MarkdownIt:
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    renderer.core.ruler.push("shift_headings", _shift_headings)
    return renderer


def markdown(text: str) -> Markup:
    """The HTML of a runbook's prose."""
    return Markup(_renderer().render(text))
