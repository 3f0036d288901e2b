"""DCGM entities are taken only for the GPUs NVML lists (others counted and dropped), and what is known
of a GPU is forgotten when it goes: a host engine streaming rows for thousands of entity ids adds no
series and no state."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from servescope.core.catalog import bounds
from servescope.core.dcgm.counters import load_counters
from servescope.core.dcgm.dmon_format import Header, Row
from servescope.exporter.dcgm.dmon_source import MAX_GPUS_WITHOUT_NVML, DmonSource
from servescope.exporter.dcgm.exporter_source import LIMITS, read_exporter, to_samples
from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from tests.helpers import FakeClock, values

ENTITIES = 500
# A dcgmi that answers `dmon -e <ids> -d <ms>` with a row for each of $ENTITIES entity ids, forever.
SCRIPT = """
import os, sys, time
from servescope.core.dcgm.dmon_format import LAYOUTS, render_header, render_row
from servescope_sim.fake_dcgmi import columns
ids = [int(i) for i in sys.argv[sys.argv.index("-e") + 1].split(",")]
cols, layout = columns(ids), LAYOUTS["4.5"]
print("\\n".join(render_header(layout, cols)), flush=True)
while True:
    for entity in range(int(os.environ["ENTITIES"])):
        print(render_row(layout, f"GPU {entity}", cols, ["1"] * len(ids)))
    sys.stdout.flush()
    time.sleep(0.1)
"""


def hostile_dcgmi(tmp_path: Path) -> str:
    path = tmp_path / "dcgmi"
    path.write_text(f"#!{sys.executable}\n{SCRIPT}")
    path.chmod(0o755)
    return str(path)


def source(tmp_path: Path, directory: GpuDirectory) -> DmonSource:
    env = {**os.environ, "ENTITIES": str(ENTITIES)}
    return DmonSource(
        load_counters(),
        dcgmi=hostile_dcgmi(tmp_path),
        hostname="node-a",
        directory=directory,
        interval_seconds=0.1,
        spawn=lambda argv: spawn_process(argv, env=env),
        wait=lambda event, seconds: event.wait(min(seconds, 0.02)),
    )


def gpus_in(samples: list[Sample]) -> set[str]:
    return {
        s.label_values[0] for s in samples if s.spec.name == "servescope_dcgm_nvlink_crc_flit_errors_total"
    }  # type: ignore[attr-defined]


def collect_after_rows(dmon: DmonSource, gpus: int) -> list[Sample]:
    """A collection once `gpus` GPUs are held and other entities' rows have been dropped."""
    dmon.collect()
    deadline = time.monotonic() + 20
    while len(dmon._latest) < gpus or not dmon._entity_drops:
        assert time.monotonic() < deadline, f"{len(dmon._latest)} GPUs held, drops {dmon._entity_drops}"
        time.sleep(0.05)
    time.sleep(0.3)  # more iterations of every entity's rows: what is held must not grow
    return dmon.collect().samples


@pytest.mark.e2e  # a dcgmi child
def test_only_the_gpus_nvml_lists_are_kept_and_the_rest_counted(tmp_path: Path) -> None:
    directory = GpuDirectory()
    directory.update({"0": "GPU-zero", "1": "GPU-one"})
    dmon = source(tmp_path, directory)
    try:
        samples = collect_after_rows(dmon, 2)
        held = len(dmon._latest)
    finally:
        dmon.close()
    assert gpus_in(samples) == {"0", "1"} and held == 2
    [dropped] = values(samples, bounds.DCGM_ENTITIES_DROPPED.name, reason="unknown_gpu")  # type: ignore[arg-type]
    assert dropped >= ENTITIES - 2  # at least one iteration's strangers, each row counted


@pytest.mark.e2e
def test_without_nvml_a_capped_number_of_gpus_is_taken(tmp_path: Path) -> None:
    dmon = source(tmp_path, GpuDirectory())
    try:
        samples = collect_after_rows(dmon, MAX_GPUS_WITHOUT_NVML)
        held = len(dmon._latest)
    finally:
        dmon.close()
    assert held == MAX_GPUS_WITHOUT_NVML == len(gpus_in(samples))
    assert values(samples, bounds.DCGM_ENTITIES_DROPPED.name, reason="over_cap")[0] > 0  # type: ignore[arg-type]


def test_a_gpu_nvml_no_longer_lists_is_forgotten_with_its_state(tmp_path: Path) -> None:
    directory = GpuDirectory()
    directory.update({"0": "GPU-zero", "1": "GPU-one"})
    clock = FakeClock(100.0)
    dmon = DmonSource(load_counters(), hostname="n", directory=directory, clock=clock, na_rows=1)
    dmon._active = dmon.watch_list()
    header = Header(tuple(str(f) for f in dmon._active), 1)
    for gpu in ("0", "1"):  # rows fed by hand: no dcgmi child here
        dmon._on_row(Row("GPU", gpu, None, (), tuple([None] * len(dmon._active)), header, 2))
    assert {key[0] for key in dmon._support} == {"0", "1"}
    directory._uuids.pop("1")  # NVML lost GPU 1 (fallen off the bus, or the node's GPUs changed)
    dmon._known = frozenset(directory.known())
    with dmon._lock:
        dmon._forget_gone()
    assert set(dmon._latest) == {"0"} and {key[0] for key in dmon._support} == {"0"}
    assert {key[0] for key in dmon._na_streak} == {"0"}


def test_a_dcgm_exporter_page_adds_series_only_for_nvml_s_gpus() -> None:
    name = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    page = f"# TYPE {name} counter\n" + "".join(
        f'{name}{{gpu="{i}",UUID="GPU-{i}",Hostname="h"}} 40\n' for i in range(1000)
    )
    found, skipped = read_exporter(page)
    # The parser keeps the first 256 values of a label (core/exposition/limits.py), counting the rest.
    most = LIMITS.max_label_values
    assert len(found) == most and skipped == {"label_values_limit": 1000 - most}
    dropped: Counter[str] = Counter()
    samples = to_samples(found, {f.field_id: f for f in load_counters()}, "n", frozenset({"0", "3"}), dropped)
    assert {s.label_values[0] for s in samples} == {"0", "3"} and dropped == {"unknown_gpu": most - 2}
