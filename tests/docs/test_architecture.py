"""docs/architecture.md's import table is the import graph's, not a memory of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_table_is_what_the_code_imports() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_table.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
