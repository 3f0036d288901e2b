"""bench/ is a folder of scripts: put it on the path so that its `quality` package imports by name
(the alert-quality tests and the dashboards test build on it)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
