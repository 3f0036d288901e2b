"""The documents hold together: every relative link and anchor resolves, every docs/ page is linked from
the README, the README stays short, and no generated table prints a default it misread."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from servescope.docs import default_shown, documents

ROOT = Path(__file__).parents[2]
README_MAX_LINES = 250
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|````).*?^\1\s*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINKED_DOCUMENTS = [ROOT / "README.md", ROOT / "DEVELOPING.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"^#{1,6} ", line)}


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside code blocks and code spans."""
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text()))
    return LINK.findall(text)


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


def test_slugs_follow_github() -> None:
    assert slug("See it: `make demo`") == "see-it-make-demo"
    assert (
        slug("vLLM (and SGLang, TensorRT-LLM, TGI): serving signals")
        == "vllm-and-sglang-tensorrt-llm-tgi-serving-signals"
    )


def test_every_relative_link_and_anchor_resolves() -> None:
    assert (ROOT / "DEVELOPING.md").exists()
    broken = {path.name: found for path in LINKED_DOCUMENTS if (found := broken_links(path))}
    assert not broken
    assert sum(len(links(path)) for path in LINKED_DOCUMENTS) > 20  # the extraction finds the links


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A part\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-part) [gone](missing.md) [bad](other.md#nowhere) [self](#top)\n"
        "`[code](ignored.md)`\n\n# Top\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
    ]


def test_the_readme_is_short_names_the_commands_and_links_every_docs_page() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for command in ("make demo", "make test", "make check"):
        assert command in text
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(readme)}
    unlinked = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_no_document_shows_a_misread_default() -> None:
    for path in documents(ROOT):
        assert "PydanticUndefined" not in path.read_text(), path


class _Example(BaseModel):
    urls: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=lambda: ["a", "b"])
    enabled: bool = True
    interval: float = 5.0
    ratio: float = 0.5
    level: Literal["debug", "info"] = "info"
    empty: str = ""


def test_defaults_are_shown_as_a_user_writes_them() -> None:
    shown = {name: default_shown(info) for name, info in _Example.model_fields.items()}
    assert shown == {
        "urls": "(empty)",
        "names": "`a`, `b`",
        "enabled": "`true`",
        "interval": "`5`",
        "ratio": "`0.5`",
        "level": "`info` (of debug, info)",
        "empty": "(empty)",
    }
