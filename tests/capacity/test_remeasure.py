"""A step the client could not drive is measured again, through Locust workers when configured, and only
then ends the search as `client_bound`: never a pass, never a miss, never a knee from it."""

from __future__ import annotations

import dataclasses

import pytest

from servescope.kit.capacity import powered, search
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo
from servescope.kit.load.records import StepResult
from servescope_sim.engine_config import EngineConfig
from servescope_sim.load_runner import SimulatedStepRunner

PLAN = SearchPlan((Slo("ttft", 0.5),), duration_s=20.0, repeats=1, start_qps=2.0)
STARVED_ABOVE = 5.0  # the engine's knee is about 12 req/s: a client that gives out at 5 sees none of it


class Workers:
    """The fallback (Locust workers): the simulated engine driven on time, counting its steps."""

    def __init__(self) -> None:
        self.engine = SimulatedStepRunner(EngineConfig())
        self.rates: list[float] = []

    def run_step(self, offered: float, duration_s: float, *, seed: int = 0) -> StepResult:
        self.rates.append(offered)
        return self.engine.run_step(offered, duration_s, seed=seed)


class StarvedClient(Workers):
    """The same engine, driven by a client that cannot keep a schedule above STARVED_ABOVE."""

    def run_step(self, offered: float, duration_s: float, *, seed: int = 0) -> StepResult:
        result = super().run_step(offered, duration_s, seed=seed)
        if offered <= STARVED_ABOVE:
            return result
        return dataclasses.replace(result, invalid_reason="scheduling lag p99 900 ms", fault="client")


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(powered, "REMEASURE_PAUSE_S", 0.0)  # the pause is for a real machine to settle


@pytest.mark.slow
def test_a_client_bound_step_measured_again_by_the_workers_lets_the_search_go_on() -> None:
    client, workers = StarvedClient(), Workers()
    knee = find_knee(client, PLAN, fallback=workers)
    print(f"\n{knee.message}; the workers measured {sorted(set(workers.rates))}")
    assert knee.status == "measured" and knee.estimate is not None
    assert workers.rates and min(workers.rates) > STARVED_ABOVE, "only client-bound steps went to the workers"
    assert knee.lower > STARVED_ABOVE, "the knee lies where only the workers could drive the engine"


def test_a_step_still_client_bound_when_measured_again_stops_the_search_with_no_knee() -> None:
    client = StarvedClient()
    knee = find_knee(client, PLAN)
    print(f"\n{knee.message}")
    first_starved = min(rate for rate in client.rates if rate > STARVED_ABOVE)
    assert client.rates.count(first_starved) == 2, "the starved step was measured once more"
    assert knee.status == "client_bound" and knee.estimate is None
    assert knee.client_bound_above is not None and knee.client_bound_above <= STARVED_ABOVE
    assert knee.message.startswith(f"client_bound above {knee.client_bound_above:g} req/s")
    assert knee.message.endswith("scheduling lag p99 900 ms"), "the reason the step gave (its remedy with it)"
    assert all(step.verdict == "client_bound" for step in knee.steps if step.offered > STARVED_ABOVE)


class GivesOutAbove:
    """The engine driven by a client that cannot keep a schedule above `limit` req/s."""

    def __init__(self, limit: float) -> None:
        self.client, self.limit = StarvedClient(), limit

    def run_step(self, offered: float, duration_s: float, *, seed: int = 0) -> StepResult:
        result = Workers.run_step(self.client, offered, duration_s, seed=seed)
        if offered <= self.limit:
            return result
        return dataclasses.replace(result, invalid_reason="scheduling lag p99 900 ms", fault="client")


def test_a_rate_the_client_cannot_drive_above_the_knee_is_passed_over_and_the_knee_found_below_it() -> None:
    """Doubling 2, 4, 8, 16 jumps past both the knee (about 12 req/s) and the client's limit (14): the
    bisection goes on below 16 and finds the knee from steps the client drove."""
    free = find_knee(Workers(), PLAN)
    knee = find_knee(GivesOutAbove(14.0), PLAN)
    print(f"\nfree client: {free.message}\nclient giving out above 14: {knee.message}")
    assert free.status == "measured" and free.upper < 14.0, "the knee lies below the client's limit"
    assert knee.status == "measured" and knee.estimate is not None
    assert knee.upper < 14.0 and knee.lower <= free.estimate <= knee.upper  # type: ignore[operator]
    decided = [step for step in knee.steps if step.verdict in ("pass", "miss")]
    assert decided and all(step.offered <= 14.0 for step in decided)
    assert [step.offered for step in knee.steps if step.verdict == "client_bound"], "it did give out"


def confirming(seed: int) -> bool:
    """Whether a step (or a part of one) at `seed` confirms an end: measured again, 100 on."""
    return (
        PLAN.seed + search.CONFIRM_SEED
        <= seed % powered.EXTENSION_SEED
        < PLAN.seed + search.CONFIRM_SEED + 200
    )


class GivesOutWhileConfirming(Workers):
    """The engine driven on time while the search brackets the knee, then by a client that cannot keep
    the schedule of the steps that confirm the bracket's ends (the CPU taken from it by then)."""

    def run_step(self, offered: float, duration_s: float, *, seed: int = 0) -> StepResult:
        result = super().run_step(offered, duration_s, seed=seed)
        if not confirming(seed):
            return result
        return dataclasses.replace(result, invalid_reason="scheduling lag p99 900 ms", fault="client")


def test_a_confirming_step_the_client_cannot_drive_leaves_its_end_undecided_and_the_knee_stands() -> None:
    """A real CPU vLLM's search ended `client_bound above 64 req/s` when the step confirming its lower end
    (122.4 req/s) was client-bound, though it had driven 128 and 136 req/s: the knee it had was lost."""
    plan = dataclasses.replace(PLAN, max_parts=1)  # steps of one part: the ends are left to confirm
    free, client = find_knee(Workers(), plan), GivesOutWhileConfirming()
    knee = find_knee(client, plan)
    print(f"\nfree client: {free.message}\ngiving out while confirming: {knee.message}")
    given_up = [step for step in knee.steps if confirming(step.seed)]
    assert given_up and all(step.verdict == "client_bound" for step in given_up), "it did give out"
    assert len({step.offered for step in given_up}) == 1, "one end given up, no wider tries beyond it"
    assert knee.status == "measured" and knee.estimate is not None, knee.message
    assert "the client could not drive" in knee.message
    decided = [step.offered for step in knee.steps if step.verdict in ("pass", "miss")]
    assert all(step.offered not in decided for step in given_up)
    assert knee.lower <= knee.estimate <= knee.upper
    assert abs(knee.estimate / free.estimate - 1) < 0.25  # type: ignore[operator]
