"""Plays a scenario on a live simulated fleet, its engine processes and (when it has one) its Kubernetes
side, once a second, in a thread."""

from __future__ import annotations

import dataclasses
import logging
import threading

import httpx

from servescope_sim.engines import SimEngine
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.kubernetes import SimulatedCluster
from servescope_sim.scenarios import EngineLoad, Scenario

log = logging.getLogger(__name__)
TICK_SECONDS = 1.0


class ScenarioDriver:
    """Applies `scenario` to the fleet at its simulated time; tells each engine its load over /control."""

    def __init__(
        self,
        scenario: Scenario,
        fleet: SimulatedFleet,
        engines: list[SimEngine],
        cluster: SimulatedCluster | None = None,
    ) -> None:
        self.scenario, self.fleet, self.engines, self.cluster = scenario, fleet, engines, cluster
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sent: dict[int, EngineLoad] = {}
        self._client = httpx.Client(timeout=2.0)

    def start(self) -> None:
        self.tick()
        self._thread = threading.Thread(target=self._loop, name="scenario", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._client.close()

    def tick(self) -> None:
        self.fleet.advance()
        t = self.fleet.elapsed
        self.scenario.apply(self.fleet, t)
        loads = self.scenario.engine_loads(t, len(self.engines))
        # set_load redraws the next arrival: only send a change, or the engines' randomness would depend
        # on how often this loop runs.
        for index, (engine, load) in enumerate(zip(self.engines, loads, strict=True)):
            control = engine.url.removesuffix("/metrics") + "/control"
            if engine.url and load != self._sent.get(index) and self._send(control, load):
                self._sent[index] = load
        revisions = self.scenario.revisions(t, len(self.engines))
        if self.cluster is not None and revisions:
            self.cluster.set_revisions(revisions)  # a changed revision is a new pod on the engine's GPUs

    def _send(self, url: str, load: EngineLoad) -> bool:
        """True when the engine took the load; a failed send is retried on the next tick."""
        try:
            self._client.post(url, json=dataclasses.asdict(load)).raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("scenario %s: could not set the load of %s: %s", self.scenario.name, url, exc)
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self.tick()
            except Exception:  # isolation: a scenario bug must not stop the exporter
                log.exception("scenario %s: tick failed", self.scenario.name)
