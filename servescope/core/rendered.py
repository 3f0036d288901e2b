"""Files a build command renders (rule files, dashboards, the whole bundle): written into its `--out`
folder, or, with `--check`, compared with what that folder holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import typer

from servescope.core.cli_errors import exit_if_stale
from servescope.core.config import AlertsConfig


def write_files(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Write each file under `out` by its relative name (its folders made as needed); the paths written."""
    written = []
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def changed_files(out: Path, files: Mapping[str, str]) -> list[str]:
    """The names of `files` that `out` lacks or holds with other text."""
    return [
        name for name, text in files.items() if not (out / name).is_file() or (out / name).read_text() != text
    ]


def write_or_check(
    out: Path,
    cfg: AlertsConfig,
    stale: Callable[[Path, AlertsConfig], list[str]],
    write: Callable[[Path, AlertsConfig], list[Path]],
    *,
    check: bool,
    command: str,
    current: str,
) -> None:
    """The end of a build command: with `check`, exit 1 naming the files of `out` that are `stale` for
    `cfg`, or say `<out>: <current>`; otherwise `write` them, naming each."""
    if check:
        exit_if_stale(out, stale(out, cfg), command)
        typer.echo(f"{out}: {current}")
        return
    for path in write(out, cfg):
        typer.echo(f"wrote {path}")
