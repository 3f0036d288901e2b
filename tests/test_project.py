"""Project-level promises: README tables current, packaging complete, the two commands wired."""

from __future__ import annotations

import tomllib
from pathlib import Path

from servescope.core.settings_cli import cli_flag
from servescope.docs import GENERATORS, documents, region_names, update_document
from servescope.exporter.serve import SERVE_AREAS as AREAS

ROOT = Path(__file__).parent.parent


def test_generated_tables_of_every_document_are_current() -> None:
    stale = [str(path) for path in documents(ROOT) if not update_document(path, check=True)]
    assert not stale, f"generated tables are stale in {stale}: run `make docs`"


def test_every_generated_table_is_in_exactly_one_document() -> None:
    names = [name for path in documents(ROOT) for name in region_names(path.read_text())]
    assert sorted(names) == sorted(GENERATORS)


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_every_setting_has_a_description_and_a_cli_flag() -> None:
    for area in AREAS:
        for field, info in area.model_fields.items():
            assert info.description, f"{area.__name__}.{field}"
            assert cli_flag(area, field).startswith("--")


def test_every_subpackage_is_packaged() -> None:
    from setuptools import find_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "servescope").rglob("__init__.py")
    }
    assert found == set(find_packages(where=str(ROOT), include=include))


def test_vllm_urls_from_flags_or_environment_split_on_commas_and_spaces() -> None:
    from servescope.exporter.settings import VllmSettings

    assert VllmSettings(urls=["http://a:1/metrics,http://b:2/metrics"]).urls == [
        "http://a:1/metrics",
        "http://b:2/metrics",
    ]
    assert VllmSettings(urls="http://a:1/metrics http://c:3/metrics").urls == [
        "http://a:1/metrics",
        "http://c:3/metrics",
    ]
