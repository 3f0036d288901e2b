"""Self-calibration: the client's own ceiling, measured against a local mock server that answers at once.

The mock runs as its own process (`servescope load mock-server`), so it does not share this process's
interpreter lock. Its slots are many and its delays zero: what limits the rate then is the client (and,
on a small machine, the mock beside it, which makes the measured ceiling a conservative one).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from servescope.core.processes import Child, ChildFailedError
from servescope.kit.load.client import RequestSpec
from servescope.kit.load.mock_server import MockConfig
from servescope.kit.load.records import achieved_rate
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.validity import ValidityRules

LISTENING = r"mock OpenAI server on 127\.0\.0\.1:(\d+)"
CALIBRATION_CLIENTS = 64
START_SECONDS = 20.0


@dataclass(frozen=True)
class MockProcess:
    child: Child
    base_url: str


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


def measure_ceiling(
    base_url: str, seconds: float = 3.0, *, stream: bool = True, output_tokens: int = 8
) -> float:
    """Requests/s this client completes against an instant server, with many clients in closed loop."""
    runner = HttpStepRunner(
        RequestSpec(base_url, "mock", stream=stream, timeout_s=10.0),
        LengthDistribution(16, output_tokens),
        mode="closed",
        max_in_flight=CALIBRATION_CLIENTS,
        rules=ValidityRules(check_backlog=False),
    )
    result = runner.run_step(CALIBRATION_CLIENTS, seconds, seed=0)
    return achieved_rate([r for r in result.records if r.ok], result.duration_s)


def calibrate(seconds: float = 3.0, *, stream: bool = True, output_tokens: int = 8) -> float:
    """Start an instant mock, measure the client's ceiling against it, stop the mock."""
    with mock_process(MockConfig(slots=10_000, ttft_s=0.0, token_s=0.0)) as mock:
        return measure_ceiling(mock.base_url, seconds, stream=stream, output_tokens=output_tokens)
