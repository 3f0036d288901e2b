"""The simulator is deterministic for a seed; listen addresses parse the way the README says."""

from __future__ import annotations

import pytest

from servescope.core.listen import ListenAddress, parse_listen
from servescope_sim.fleet import SimulatedFleet
from tests.helpers import FakeClock


def run_fleet(seed: int, seconds: float) -> list[tuple[str, float, float, float]]:
    clock = FakeClock()
    fleet = SimulatedFleet(4, "H200", seed, clock=clock)
    clock.advance(seconds)
    fleet.advance()
    return [(g.uuid, g.utilization, g.power_watts, g.energy_mj) for g in fleet.gpus]


def test_same_seed_same_fleet_different_seed_different_fleet() -> None:
    assert run_fleet(3, 600) == run_fleet(3, 600)
    assert run_fleet(3, 600) != run_fleet(4, 600)


def test_state_depends_on_time_not_on_how_often_it_is_polled() -> None:
    clock = FakeClock()
    polled = SimulatedFleet(2, "H200", 5, clock=clock)
    for _ in range(120):
        clock.advance(1.0)
        polled.advance()
    assert [(g.utilization, g.energy_mj) for g in polled.gpus] == [
        (u, e) for _, u, _, e in run_fleet(5, 120)[:2]
    ]


def test_load_drives_power_and_utilisation() -> None:
    clock = FakeClock()
    fleet = SimulatedFleet(2, "H200", 1, clock=clock)
    fleet.set_load(0, 1.0)
    fleet.set_load(1, 0.0)
    clock.advance(120)
    fleet.advance()
    busy, idle = fleet.gpus
    assert busy.utilization > 0.9 and idle.utilization < 0.1
    assert busy.power_watts > 600
    assert idle.power_watts < 150
    assert busy.temperature > idle.temperature
    assert idle.clock_reasons & 0x1  # GpuIdle


def test_memory_leak_grows_until_the_engine_dies_of_oom() -> None:
    clock = FakeClock()
    fleet = SimulatedFleet(1, "H200", 1, clock=clock)
    gpu = fleet.gpus[0]
    start = gpu.used_bytes
    fleet.start_leak(0, 40 * 2**20 / 60)  # 40 MiB per minute
    clock.advance(600)
    fleet.advance()
    assert gpu.used_bytes - start == pytest.approx(400 * 2**20, rel=0.01)
    clock.advance(10 * 3600)
    fleet.advance()
    assert not gpu.serving and gpu.oom_at is not None
    assert gpu.used_bytes == gpu.model.reserved_bytes


LISTEN_ADDRESSES = [
    ("127.0.0.1:9108", ListenAddress("127.0.0.1", 9108)),
    (":9108", ListenAddress("0.0.0.0", 9108, any_interface=True)),
    ("[::]:9108", ListenAddress("::", 9108)),
    ("localhost:0", ListenAddress("localhost", 0)),
]
NOT_LISTEN_ADDRESSES = ["9108", "host:port", "1.2.3.4:70000", "::1:9108", "[::1]9108", ""]


@pytest.mark.parametrize(("text", "address"), LISTEN_ADDRESSES)
def test_parse_listen(text: str, address: ListenAddress) -> None:
    assert parse_listen(text) == address


@pytest.mark.parametrize("text", NOT_LISTEN_ADDRESSES)
def test_parse_listen_rejects_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\.|port must be"):
        parse_listen(text)
