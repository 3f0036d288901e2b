"""The command line: clear one-line errors, help that documents every setting."""

from __future__ import annotations

import os
import socket
import subprocess

import httpx
import pytest

from servescope import __version__
from servescope.core.settings_cli import env_names
from servescope.exporter.serve import SERVE_AREAS as AREAS
from tests.support import SERVESCOPE, start_child, stop, wait_for
from tests.support.servers import LISTENING

pytestmark = pytest.mark.e2e


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "TERMINAL_WIDTH": "250"}
    return subprocess.run(
        [SERVESCOPE, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.mark.e2e
def test_version() -> None:
    result = run("version")
    assert result.returncode == 0 and result.stdout.startswith(f"servescope {__version__} ")


@pytest.mark.e2e
def test_serve_help_documents_every_setting_with_its_environment_variable() -> None:
    text = run("serve", "--help").stdout
    for area in AREAS:
        for field, info in area.model_fields.items():
            assert info.description, f"{area.__name__}.{field} has no description"
            for env in env_names(area, field):
                assert env in text, f"{env} missing from `servescope serve --help`"


@pytest.mark.e2e
def test_bad_listen_address_is_one_clear_line() -> None:
    result = run("serve", "--simulate", "--listen", "nonsense")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "servescope: error: invalid value for --listen: invalid listen address 'nonsense': expected "
        "HOST:PORT, e.g. 127.0.0.1:9108"
    ]


@pytest.mark.e2e
def test_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--simulate", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == (
        f"servescope: error: cannot listen on 127.0.0.1:{port}: address already in use "
        "(is another exporter running? pick another port with --listen)"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_unknown_gpu_model_names_the_option() -> None:
    result = run("serve", "--simulate", "--gpu-model", "B300")
    assert result.returncode == 1
    assert "invalid value for --gpu-model: unknown GPU model 'B300'" in result.stderr


@pytest.mark.e2e
def test_without_a_driver_the_exporter_runs_and_says_nvml_is_down() -> None:
    # This machine has no NVIDIA driver: the real NVML source must fail visibly, never fall back to
    # simulated data. (On a GPU node this test would find real GPUs instead, so it checks for that.)
    served = start_child("servescope", [SERVESCOPE, "serve", "--listen", "127.0.0.1:0"], LISTENING, 15)
    try:
        text = wait_for("the first NVML collection", lambda: _after_first_nvml_cycle(served.base), 15, 0.1)
        assert "servescope_simulated 0" in text
        if 'servescope_source_up{source="nvml"} 0' in text:
            assert "servescope_gpu_" not in text
            ready = httpx.get(f"{served.base}/readyz")
            assert ready.status_code == 503
            assert "library_not_found" in ready.json()["failing"]["nvml"]
    finally:
        stop(served)


def _after_first_nvml_cycle(base: str) -> str | None:
    """/metrics once the NVML source has reported up or down."""
    text = httpx.get(f"{base}/metrics").text
    return text if 'servescope_source_up{source="nvml"}' in text else None
