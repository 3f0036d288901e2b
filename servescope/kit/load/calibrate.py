"""Self-calibration: the client's own ceiling, measured against a local mock server that answers at once.

The mock is servescope-sim's (`servescope load mock-server`, its `instant-server` hook starts one in a
process of its own, so that it does not share this process's interpreter lock). Its slots are many and
its delays zero: what limits the rate then is the client (and, on a small machine, the mock beside it,
which makes the measured ceiling a conservative one).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import cast

from servescope.core.extensions import simulator
from servescope.kit.load.client import RequestSpec
from servescope.kit.load.records import achieved_rate
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.validity import ValidityRules

CALIBRATION_CLIENTS = 64
# servescope-sim's `instant-server` hook: a context that starts the instant mock and yields its base URL.
InstantServer = Callable[[], AbstractContextManager[str]]


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
    instant_server = cast(InstantServer, simulator("instant-server", "`servescope load calibrate`"))
    with instant_server() as base_url:
        return measure_ceiling(base_url, seconds, stream=stream, output_tokens=output_tokens)
