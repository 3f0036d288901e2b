"""The Markdown runbooks use, one way: the block patterns the parser reads and the HTML the pages show.

Headings, paragraphs, lists (one level), fenced code, `code`, **bold** and *emphasis*. Every character
of the text is escaped: a runbook's prose never becomes markup of its own.
"""

from __future__ import annotations

import html
import re

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`[^`]+`)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")


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


class _Blocks:
    """The HTML of the blocks seen so far, and the paragraph or list still open."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.paragraph: list[str] = []
        self.items: list[str] = []
        self.list_tag = ""

    def close(self) -> None:
        if self.paragraph:
            self.out.append(f"<p>{inline(' '.join(self.paragraph))}</p>")
            self.paragraph.clear()
        if self.items:
            tag = self.list_tag
            self.out.append(f"<{tag}>" + "".join(f"<li>{inline(i)}</li>" for i in self.items) + f"</{tag}>")
            self.items.clear()
            self.list_tag = ""

    def fenced(self, lines: list[str], i: int, marker: str) -> int:
        """The code block opening at index i; the index after its closing fence."""
        self.close()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == marker), len(lines))
        self.out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : end]))}</code></pre>")
        return end + 1

    def line(self, line: str) -> None:
        heading = HEADING.match(line)
        item = _LIST_ITEM.match(line)
        if not line.strip():
            self.close()
        elif heading is not None:
            self.close()
            level = min(6, len(heading.group(1)) + 2)
            self.out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif item is not None and len(item.group(1)) < 2:
            tag = "ol" if item.group(2)[0].isdigit() else "ul"
            if self.paragraph or (self.list_tag and tag != self.list_tag):
                self.close()
            self.list_tag = tag
            self.items.append(item.group(3))
        elif self.items:
            self.items[-1] += " " + line.strip()
        else:
            self.paragraph.append(line.strip())


def markdown(text: str) -> str:
    """The HTML of a runbook's prose."""
    blocks = _Blocks()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is not None:
            i = blocks.fenced(lines, i, fence.group(1))
        else:
            blocks.line(lines[i])
            i += 1
    blocks.close()
    return "\n".join(blocks.out)
