# ruff: noqa: E501  (captured exposition lines are long)
"""Reusing a dcgm-exporter: its DCGM_FI_* series become servescope's, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servescope.core.dcgm.counters import load_counters
from servescope.exporter.dcgm.exporter_source import (
    LIMITS,
    MAX_BYTES,
    DcgmExporterSource,
    read_exporter,
    to_samples,
)
from servescope.exporter.sources.base import SourceError
from tests.helpers import SAMPLES, values
from tests.support.http_fakes import QuietHandler, loopback_http

MODERN = """# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL Total number of NVLink flow-control CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="node-x",container="",namespace="",pod=""} 12
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="1",uuid="GPU-b",pci_bus_id="00000000:28:00.0",device="nvidia1",modelName="NVIDIA H200",hostname="node-x"} 3
# TYPE DCGM_FI_PROF_PCIE_TX_BYTES gauge
DCGM_FI_PROF_PCIE_TX_BYTES{gpu="0",UUID="GPU-a",Hostname="node-x"} 123456789
DCGM_FI_PROF_PCIE_TX_BYTES{gpu="1",UUID="GPU-b",Hostname="node-x"} 9223372036854775794
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",Hostname="node-x",GPU_I_ID="1",GPU_I_PROFILE="1g.18gb"} 0.5
DCGM_FI_PROF_SM_ACTIVE{gpu="1",UUID="GPU-b",Hostname="node-x"} 0.25
# TYPE DCGM_FI_DEV_POWER_VIOLATION counter
DCGM_FI_DEV_POWER_VIOLATION{gpu="0",UUID="GPU-a",Hostname="node-x"} 2000000000
# TYPE something_else gauge
something_else 1
"""


def test_series_map_to_servescope_names_labels_and_units() -> None:
    fields = {f.field_id: f for f in load_counters()}
    found, skipped = read_exporter(MODERN)
    samples = to_samples(found, fields, hostname="")
    assert values(
        samples, "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="0", uuid="GPU-a", hostname="node-x"
    ) == [12]
    assert values(samples, "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="1", uuid="GPU-b") == [3]
    assert values(samples, "servescope_dcgm_pcie_tx_bytes_per_second", gpu="0") == [123456789]
    assert not values(samples, "servescope_dcgm_pcie_tx_bytes_per_second", gpu="1")  # blank sentinel
    assert values(samples, "servescope_dcgm_sm_active_ratio") == [0.25]  # the MIG instance row is not a GPU
    assert values(samples, "servescope_dcgm_power_violation_seconds_total", gpu="0") == [2.0]
    assert skipped == {"blank_sentinel": 1, "unknown_series": 1}


def test_real_dcgm_exporter_2x_sample() -> None:
    found, _ = read_exporter((SAMPLES / "dcgm-exporter-2.x.txt").read_text())
    by_field = {v.field_id: v for v in found}
    assert by_field[155].value == 302.206 and by_field[155].uuid == "GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116"
    assert by_field[100].value == 1530 and by_field[203].value == 44 and by_field[202].value == 0
    assert len(found) == 8


class _Handler(QuietHandler):
    body = b""
    status = 200

    def answer(self, method: str) -> None:
        self.reply(self.status, self.body, "text/plain; version=0.0.4")


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {})
    with loopback_http(handler) as base:
        yield f"{base}/metrics", handler


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, MODERN.encode(), None),
        (500, b"oops", "http_status"),
        (200, b"\x00\xff garbage {{{", "parse"),
        (200, b"# nothing here\n", "no_dcgm_series"),
        (200, b"x" * (MAX_BYTES + 10), "too_large"),
    ],
)
def test_scrape_outcomes(
    server: tuple[str, type[_Handler]], status: int, body: bytes, reason: str | None
) -> None:
    url, handler = server
    handler.status, handler.body = status, body
    source = DcgmExporterSource(url, load_counters(), hostname="me")
    try:
        if reason is None:
            samples = source.collect().samples
            assert values(
                samples, "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="0", hostname="me"
            ) == [12]
        else:
            with pytest.raises(SourceError) as failure:
                source.collect()
            assert failure.value.reason == reason
    finally:
        source.close()


def test_unreachable_exporter_is_a_connect_error() -> None:
    source = DcgmExporterSource("http://127.0.0.1:9/metrics", load_counters(), hostname="me")
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "connect"


@pytest.mark.e2e
def test_the_parser_s_limits_bound_a_hostile_page_and_are_reported(
    server: tuple[str, type[_Handler]],
) -> None:
    """A dcgm-exporter page is parsed by the engines' parser, under the same limits: a label value past
    the length bound is refused and the samples it drops are counted as the scrape's problems."""
    url, handler = server
    long_pod = "p" * (LIMITS.max_label_value_length + 1)
    hostile = f'DCGM_FI_PROF_SM_ACTIVE{{gpu="2",UUID="GPU-c",Hostname="node-x",pod="{long_pod}"}} 0.5\n'
    handler.status, handler.body = 200, (MODERN + hostile).encode()
    source = DcgmExporterSource(url, load_counters(), hostname="me")
    try:
        collection = source.collect()
    finally:
        source.close()
    assert not values(collection.samples, "servescope_dcgm_sm_active_ratio", gpu="2")
    assert values(collection.samples, "servescope_dcgm_sm_active_ratio", gpu="1") == [0.25]
    reasons = {p.reason: p.message for p in collection.problems}
    assert reasons == {
        "blank_sentinel": "1 blank DCGM values dropped",
        "label_value_length": "1 DCGM samples dropped over the parser's limits",
    }
