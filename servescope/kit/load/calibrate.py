"""Self-calibration: the client's own ceiling for one request shape, against a mock that answers at once.

The mock runs as its own process (`servescope load mock-server`), so it does not share this process's
interpreter lock. Its slots are many and its delays zero: what limits the rate then is the client (and,
on a small machine, the mock beside it, which makes the measured ceiling a conservative one). The
shape matters: a streamed answer of 32 tokens costs the client 33 events to parse, one of 8 costs 9, so
the ceiling is measured with the requests the run will send, on the machine that will send them
(`capacity` and `tune` do so before their first step).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from servescope.core.processes import Child, ChildFailedError
from servescope.kit.load.client import Api, RequestSpec
from servescope.kit.load.mock_server import MockConfig
from servescope.kit.load.records import achieved_rate
from servescope.kit.load.runner import HttpStepRunner, ShapeSource
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.validity import CEILING_FRACTION, ValidityRules

LISTENING = r"mock OpenAI server on 127\.0\.0\.1:(\d+)"
CALIBRATION_CLIENTS = 64
START_SECONDS = 20.0


@dataclass(frozen=True)
class MockProcess:
    child: Child
    base_url: str


@dataclass(frozen=True, slots=True)
class Calibration:
    """The client's ceiling for one request shape on this machine, and what a request cost it."""

    ceiling: float  # requests/s completed against an instant server
    cpu_per_request_ms: float
    seconds: float

    @property
    def usable(self) -> float:
        """The highest rate a result may be measured at: above it the client is what is measured."""
        return CEILING_FRACTION * self.ceiling

    def line(self) -> str:
        return (
            f"client ceiling {self.ceiling:.1f} req/s for this request shape "
            f"({self.cpu_per_request_ms:.2f} ms CPU per request); results above {self.usable:.1f} req/s "
            "are refused"
        )


def mock_argv(config: MockConfig) -> list[str]:
    return [
        sys.executable,
        "-m",
        "servescope",
        "load",
        "mock-server",
        "--listen",
        "127.0.0.1:0",
        "--slots",
        str(config.slots),
        "--ttft",
        str(config.ttft_s),
        "--token-delay",
        str(config.token_s),
        "--model",
        config.model,
    ]


@contextmanager
def mock_process(config: MockConfig, log_dir: Path | None = None) -> Iterator[MockProcess]:
    """A mock server in its own process on a free loopback port; stopped on exit."""
    folder = log_dir or Path(tempfile.mkdtemp(prefix="servescope-mock-"))
    child = Child("mock-server", mock_argv(config), folder / "mock-server.log")
    child.start()
    try:
        port = child.wait_for_output(LISTENING, START_SECONDS).group(1)
        yield MockProcess(child, f"http://127.0.0.1:{port}")
    except ChildFailedError as exc:
        raise RuntimeError(str(exc)) from None
    finally:
        child.stop(grace=3.0)


def measure(
    base_url: str,
    seconds: float = 3.0,
    *,
    shapes: ShapeSource | None = None,
    api: Api = "completions",
    stream: bool = True,
) -> Calibration:
    """Requests/s this client completes against an instant server, many clients in closed loop."""
    runner = HttpStepRunner(
        RequestSpec(base_url, "mock", api=api, stream=stream, timeout_s=10.0),
        shapes or LengthDistribution(16, 8),
        mode="closed",
        max_in_flight=CALIBRATION_CLIENTS,
        rules=ValidityRules(check_backlog=False),
    )
    result = runner.run_step(CALIBRATION_CLIENTS, seconds, seed=0)
    ceiling = achieved_rate([r for r in result.records if r.ok], result.duration_s)
    cost = result.client.cpu_per_request_ms if result.client is not None else 0.0
    return Calibration(ceiling, cost, seconds)


def measure_ceiling(base_url: str, seconds: float = 3.0) -> float:
    """The ceiling alone (req/s), for the default calibration shape (16 prompt, 8 output tokens)."""
    return measure(base_url, seconds).ceiling


def calibrate(
    seconds: float = 3.0, *, shapes: ShapeSource | None = None, api: Api = "completions", stream: bool = True
) -> Calibration:
    """Start an instant mock, measure the client's ceiling against it, stop the mock."""
    with mock_process(MockConfig(slots=10_000, ttft_s=0.0, token_s=0.0)) as mock:
        return measure(mock.base_url, seconds, shapes=shapes, api=api, stream=stream)
