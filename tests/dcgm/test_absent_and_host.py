"""A node without DCGM is in state `absent`, which opens no ticket; `--dcgm-host` reaches a remote host
engine (the GPU Operator's nvidia-dcgm:5555) through `dcgmi dmon --host`, the fake dcgmi speaking it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from servescope.core.dcgm.counters import load_counters
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.gpu_directory import GpuDirectory
from tests.alerts.promtool import TARGET, check, firing, run_promtool, series
from tests.support import SERVESCOPE, Served, start_child, start_servescope, stop, wait_for
from tests.support.servers import LISTENING

HOST_ENGINE = "nvidia-dcgm.gpu-operator.svc:5555"
SOURCE_DOWN = "ServescopeSourceDown"


def _metrics_until(served: Served, done: Callable[[str], bool], seconds: float = 15.0) -> str:
    def text_when_done() -> str | None:
        text = httpx.get(f"{served.base}/metrics").text
        return text if done(text) else None

    # The check's qualified name says which test's condition it is (`test_....<locals>.<lambda>`).
    what = f"{served.base}/metrics to pass {done.__qualname__}"
    return wait_for(what, text_when_done, seconds, every=0.2)


def test_dmon_is_started_with_the_remote_host_engine() -> None:
    source = DmonSource(
        load_counters(), dcgmi="dcgmi", host=HOST_ENGINE, hostname="n", directory=GpuDirectory()
    )
    argv = source._argv()
    assert argv[:4] == ["dcgmi", "dmon", "--host", HOST_ENGINE] and argv[4] == "-e"
    local = DmonSource(load_counters(), dcgmi="dcgmi", hostname="n", directory=GpuDirectory())._argv()
    assert "--host" not in local


def _recording_dcgmi(tmp_path: Path) -> tuple[str, Path]:
    """A dcgmi that writes the arguments it was started with and lists no GPU."""
    record = tmp_path / "argv"
    script = tmp_path / "dcgmi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nopen({str(record)!r}, 'w').write(repr(sys.argv[1:]))\n"
    )
    script.chmod(0o755)
    return str(script), record


def test_discovery_asks_the_remote_host_engine(tmp_path: Path) -> None:
    dcgmi, record = _recording_dcgmi(tmp_path)
    remote = DmonSource(
        load_counters(), dcgmi=dcgmi, host=HOST_ENGINE, hostname="n", directory=GpuDirectory()
    )
    assert remote._discover() == {}
    assert record.read_text() == repr(["discovery", "--host", HOST_ENGINE, "-l"])
    local = DmonSource(load_counters(), dcgmi=dcgmi, hostname="n", directory=GpuDirectory())
    assert local._discover() == {}
    assert record.read_text() == repr(["discovery", "-l"])


@pytest.mark.parametrize("host", ["-e 1", "--help", "a;b", "x y"])
def test_a_host_that_dcgmi_would_read_as_an_option_is_refused(host: str) -> None:
    from servescope.exporter.settings import DcgmSettings

    with pytest.raises(ValueError, match="host"):
        DcgmSettings(host=host)


@pytest.mark.e2e
def test_the_exporter_reads_dcgm_from_the_remote_host_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVESCOPE_FAKE_DCGMI_HOSTS", HOST_ENGINE)
    served = start_servescope("--simulate", "--dcgm-host", HOST_ENGINE)
    try:
        text = _metrics_until(served, lambda t: "servescope_dcgm_" in t)
        assert 'servescope_source_up{source="dcgm"} 1' in text
        assert "servescope_dcgm_nvlink_crc_flit_errors" in text
    finally:
        stop(served)


@pytest.mark.e2e
def test_an_unreachable_host_engine_is_a_failure_not_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVESCOPE_FAKE_DCGMI_HOSTS", "elsewhere:5555")
    # Not ready while DCGM has never answered: started without waiting for /readyz.
    argv = [SERVESCOPE, "serve", "--listen", "127.0.0.1:0", "--simulate", "--dcgm-host", HOST_ENGINE]
    served = start_child("servescope", argv, LISTENING, 15.0, ready=None)
    try:
        reason = 'servescope_source_errors_total{source="dcgm",reason="host_engine_unreachable"}'
        text = _metrics_until(served, lambda t: reason in t)
        assert reason in text
        assert 'servescope_source_up{source="dcgm"} 0' in text
        assert "servescope_source_absent" not in text
    finally:
        stop(served)


@pytest.mark.e2e
def test_a_node_without_dcgmi_is_absent_and_opens_no_ticket(tmp_path: Path) -> None:
    served = start_servescope("--simulate", "--dcgmi", "/nonexistent/dcgmi")
    try:
        text = _metrics_until(served, lambda t: "servescope_source_absent" in t)
    finally:
        stop(served)
    assert 'servescope_source_absent{source="dcgm"} 1' in text
    assert 'servescope_source_up{source="dcgm"} 0' in text
    assert 'servescope_source_absent{source="nvml"}' not in text
    # What Prometheus stores of it, and of a source that fails: only the failure is a ticket.
    dcgm, nvml = {**TARGET, "source": "dcgm"}, {**TARGET, "source": "nvml"}
    description = "Source nvml on node-a:9108 is down; /api/v1/sources on the exporter and "
    description += "servescope_source_errors_total say why."
    run_promtool(
        [
            {
                "name": f"{SOURCE_DOWN}: absent is a state, down is a failure",
                "interval": "1m",
                "input_series": [
                    series("servescope_source_up", dcgm, "0x20"),
                    series("servescope_source_absent", dcgm, "1x20"),
                    series("servescope_source_up", nvml, "0x20"),
                ],
                "alert_rule_test": [
                    check(SOURCE_DOWN, "4m"),  # pending
                    check(SOURCE_DOWN, "10m", firing(SOURCE_DOWN, nvml, description)),
                ],
            }
        ],
        tmp_path,
    )
