"""The mock OpenAI server (`servescope load mock-server`) in a process of its own on a free loopback
port, as `servescope load calibrate`, the load tests and the load benchmark start it.

Its own process, so that it does not share the measuring process's interpreter lock.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from servescope.core.processes import Child, ChildFailedError
from servescope_sim.mock_server import MockConfig

LISTENING = r"mock OpenAI server on 127\.0\.0\.1:(\d+)"
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
        "--tokens-per-word",
        str(config.tokens_per_word),
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


@contextmanager
def instant_server() -> Iterator[str]:
    """servescope-sim's `instant-server` hook (`load calibrate`): a mock with many slots and no delays,
    so that what limits the rate is the client; yields its base URL."""
    with mock_process(MockConfig(slots=10_000, ttft_s=0.0, token_s=0.0)) as mock:
        yield mock.base_url
