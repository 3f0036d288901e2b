"""What the tests read lives in tests/fixtures, each file with its source; nothing reads ../shared but
the real-vLLM tests, for the setup script that builds a CPU vLLM."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import FIXTURES, SAMPLES

ROOT = Path(__file__).parents[2]
PROVENANCE = (FIXTURES / "README.md").read_text()


def test_every_capture_names_its_source_and_is_listed_in_the_provenance() -> None:
    captures = sorted(SAMPLES.iterdir())
    assert captures, f"no captures in {SAMPLES}"
    for path in captures:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# source: ") and len(first) > 20, f"{path.name}: no `# source:` line"
        assert f"`{path.name}`" in PROVENANCE, f"{path.name} has no row in tests/fixtures/README.md"
    for path in FIXTURES.iterdir():
        assert path.is_dir() or path.name == "README.md" or f"{path.name}" in PROVENANCE, path.name


def test_only_the_real_vllm_setup_is_read_from_the_shared_folder() -> None:
    readers = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    beside = re.compile(r'/\s*"shared"')  # a path to the folder beside the checkout
    for path in (p for p in readers if p != Path(__file__)):
        text = path.read_text()
        for found in re.findall(r'SHARED\s*/\s*"([^"]+)"', text):
            assert found == "tools", f"{path.relative_to(ROOT)} reads {found}/ from ../shared"
        if path.name != "helpers.py":  # where SHARED is defined, for the setup script
            assert not beside.search(text), f"{path.relative_to(ROOT)} reads ../shared"
