"""The GPU API's per-link NVLink view: what the exposition sums per GPU, link by link."""

from __future__ import annotations

from fastapi.testclient import TestClient

from servescope.core import catalog as c
from servescope.exporter.app import create_app
from servescope.exporter.publisher import Publisher
from servescope.exporter.runtime import Runtime
from tests.helpers import nvml_stack, values


def test_links_of_a_gpu_by_index_or_uuid_and_unknown_gpus_refused() -> None:
    runtime = Runtime(Publisher())
    fleet, source, clock = nvml_stack(gpus=2, link_store=runtime.nvlinks)
    fleet.nvlink_crc_burst(1, 3, errors_per_second=10)
    fleet.set_link_down(1, 5)
    source.collect()
    clock.advance(60)
    samples = source.collect().samples
    client = TestClient(create_app(runtime, manage_runtime=False))

    body = client.get("/api/v1/gpus/1/nvlink").json()
    assert (body["gpu"], body["uuid"], body["hostname"]) == ("1", fleet.gpus[1].uuid, "node-a")
    links = {entry["link"]: entry for entry in body["links"]}
    assert sorted(links) == list(range(18))
    assert not links[5]["up"] and all(links[n]["up"] for n in links if n != 5)
    assert 590 <= links[3]["errors"]["crc_flit"] <= 610 and links[2]["errors"]["crc_flit"] == 0
    # The exposition's per-GPU sum is the sum of these links.
    (flit,) = values(samples, c.NVLINK_ERRORS.name, gpu="1", type="crc_flit")
    assert flit == sum(entry["errors"].get("crc_flit", 0) for entry in body["links"])
    assert client.get(f"/api/v1/gpus/{fleet.gpus[1].uuid}/nvlink").json() == body

    missing = client.get("/api/v1/gpus/7/nvlink")
    assert missing.status_code == 404
    assert missing.json()["error"] == "GPU '7': no NVLink links known (GPUs with NVLink: 0, 1)"
