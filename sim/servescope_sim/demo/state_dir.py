"""The demo's state directory: made, or emptied when an earlier demo made it, never someone else's."""

from __future__ import annotations

import shutil
from pathlib import Path

MARKER = ".servescope-demo"


class StateDirError(ValueError):
    """The state directory cannot be used (it holds files the demo did not write)."""


def prepare_state_dir(path: Path) -> None:
    """Create `path`, or empty it when an earlier demo made it; refuse a folder with other content."""
    if path.exists() and not path.is_dir():
        raise StateDirError(f"--state-dir {path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()) and not (path / MARKER).exists():
        raise StateDirError(
            f"--state-dir {path}: not empty and not made by `servescope demo` (no {MARKER} file); "
            "choose another folder"
        )
    if path.is_dir():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by `servescope demo`; emptied at every start\n")
