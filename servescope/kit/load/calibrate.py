"""Self-calibration: the client's own ceiling for one request shape, against a mock that answers at once.

The mock is servescope-sim's (`servescope load mock-server`): its `instant-server` hook starts one in a
process of its own, so that it does not share this process's interpreter lock. Its slots are many and
its delays zero: what limits the rate then is the client (and, on a small machine, the mock beside it,
which makes the measured ceiling a conservative one). The shape matters: a streamed answer of 32
tokens costs the client 33 events to parse, one of 8 costs 9, so the ceiling is measured with the
requests the run will send, on the machine that will send them (`capacity` and `tune` do so before
their first step).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import cast

from servescope.core.extensions import MissingDistributionError, simulator
from servescope.kit.load.client import Api, RequestSpec
from servescope.kit.load.records import achieved_rate
from servescope.kit.load.runner import HttpStepRunner, ShapeSource
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.validity import CEILING_FRACTION, ValidityRules

CALIBRATION_CLIENTS = 64
# servescope-sim's `instant-server` hook: a context that starts the instant mock and yields its base URL.
InstantServer = Callable[[], AbstractContextManager[str]]


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
    """Start an instant mock, measure the client's ceiling against it, stop the mock; without
    servescope-sim, MissingDistributionError."""
    instant_server = cast(InstantServer, simulator("instant-server", "measuring the client's ceiling"))
    with instant_server() as base_url:
        return measure(base_url, seconds, shapes=shapes, api=api, stream=stream)


def calibrated(shapes: ShapeSource | None, api: Api, say: Callable[[str], None]) -> Calibration | None:
    """The ceiling measured before a run (`capacity run --url`, `capacity weekly`, `tune --url`), said as
    one line. Without servescope-sim (the production image), None, and a line that says so: the steps are
    then judged by their schedule lag alone, the ceiling check being off; never a silent skip."""
    try:
        found = calibrate(shapes=shapes, api=api)
    except MissingDistributionError as exc:
        say(f"client ceiling not measured: {exc}; steps are judged by their schedule lag alone")
        return None
    say(found.line())
    return found
