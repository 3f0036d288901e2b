"""The Dockerfile, read as text (no Docker engine here): base, user, health check, what it installs."""

from __future__ import annotations

import json
import re
import tomllib
from functools import cache

from servescope.deploy.names import EXPORTER_PORT, NONROOT_UID
from servescope.runbooks.document import ENV_RUNBOOKS
from tests.deploy.manifests import DEPLOY, ROOT

DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"


@cache
def instructions() -> tuple[tuple[str, str], ...]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    assert not current, "the Dockerfile ends inside a continued line"
    return tuple((text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical)


def _all(name: str) -> list[str]:
    return [args for instruction, args in instructions() if instruction == name]


def _one(name: str) -> str:
    found = _all(name)
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def test_base_is_a_slim_python_image() -> None:
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-[a-z]+)?", _one("FROM")), _one("FROM")


def test_runs_as_a_numeric_non_root_user_the_manifests_agree_with() -> None:
    user = _all("USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "runAsNonRoot can only verify a numeric UID"
    assert int(uid) == NONROOT_UID and (not gid or int(gid) == NONROOT_UID)
    # Nothing after the switch runs as root.
    names = [instruction for instruction, _ in instructions()]
    assert "RUN" not in names[len(names) - names[::-1].index("USER") :]


def test_health_check_asks_the_exporter_s_healthz_with_python() -> None:
    check = _one("HEALTHCHECK")
    command = json.loads(check.split("CMD", 1)[1])
    assert command[0] == "python"
    assert f":{EXPORTER_PORT}/healthz" in command[-1]
    assert "curl" not in check and "wget" not in check


def test_entrypoint_is_servescope_serving_on_all_interfaces() -> None:
    assert json.loads(_one("ENTRYPOINT")) == ["servescope"]
    assert json.loads(_one("CMD")) == ["serve", "--listen", f":{EXPORTER_PORT}"]


def test_installs_the_package_without_test_extras_from_its_one_folder() -> None:
    (install,) = [run for run in _all("RUN") if "pip install" in run]
    assert re.search(r"pip install \.(\s|$)", install), install
    assert "[test]" not in install
    copied = " ".join(_all("COPY"))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["servescope*"]
    assert "servescope/" in copied
    assert config["project"]["readme"] in copied


def test_runbooks_ship_as_package_data_so_the_image_needs_no_variable() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "pages/*.md" in config["tool"]["setuptools"]["package-data"]["servescope.runbooks"]
    assert ENV_RUNBOOKS not in " ".join(_all("ENV"))


def test_dcgm_is_an_opt_in_build_argument() -> None:
    assert "DCGM=0" in _all("ARG")
    (dcgm,) = [run for run in _all("RUN") if "datacenter-gpu-manager" in run]
    assert dcgm.startswith('if [ "$DCGM" = "1" ]')


def test_dockerignore_keeps_out_the_local_state_and_keeps_in_what_is_copied() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", ".git", "tests", "**/__pycache__"} <= patterns
    for needed in ("exporter", "alerts", "dashboards", "runbooks", "pyproject.toml", "README.md"):
        assert needed not in patterns
