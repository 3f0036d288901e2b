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


def test_the_readme_counts_the_dashboards_there_are() -> None:
    from servescope.bundle.dashboards.build import names

    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{words[len(names())]} Grafana dashboards" in readme
