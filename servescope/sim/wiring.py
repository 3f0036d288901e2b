"""`serve --simulate`: a simulated node plugged into the real exporter through the interfaces the real
sources use: a pynvml-shaped module for NVML, a `dcgmi` executable for DCGM, HTTP for the engines."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Literal, Protocol

from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.runtime import Hardware, Runtime, build_runtime
from servescope.exporter.settings import Settings
from servescope.sim.engines import SimEngine, gpu_groups, start_engines, stop_engines
from servescope.sim.fleet import SimulatedFleet
from servescope.sim.models import MODELS
from servescope.sim.node_state import STATE_ENV, StateWriter
from servescope.sim.pynvml_module import SimulatedPynvml
from servescope.sim.registry import NO_SCENARIO, SCENARIOS, make_scenario
from servescope.sim.scenario_driver import ScenarioDriver
from servescope.sim.scenarios import Scenario

log = logging.getLogger(__name__)


# The simulated engines' command line (`python -m servescope.sim.vllm_server`): discovery probes only
# serving engines, and these are not titled as vLLM's. No space in it: the environment splits on spaces.
SIMULATED_ENGINE_PROCESS = r"(?:^|\s)servescope\.sim\.vllm_server(?:\s|$)"


class SimulationSettings(Protocol):
    """What `serve` was asked to simulate (its simulation options, read here by name)."""

    gpus: int
    gpu_model: str
    nvlinks: int  # -1: the GPU model's own count
    seed: int
    engines: int
    scenario: str
    scenario_pace: Literal["real", "demo"]


class SimulationError(ValueError):
    """A simulation option names something the simulator does not have; the message names the flag."""


def fake_dcgmi_path() -> str:
    """The bundled fake `dcgmi`, next to this interpreter (a virtualenv's bin/) or on PATH."""
    beside = Path(sys.executable).with_name("servescope-fake-dcgmi")
    if beside.exists():
        return str(beside)
    return shutil.which("servescope-fake-dcgmi") or "servescope-fake-dcgmi"


def fake_dcgmi_environment(gpus: int, seed: int, model: str | None = None) -> dict[str, str]:
    """What the fake `dcgmi` reads to pretend to watch the same node."""
    env = {**os.environ, "SERVESCOPE_FAKE_DCGMI_GPUS": str(gpus), "SERVESCOPE_FAKE_DCGMI_SEED": str(seed)}
    if model is not None:
        env["SERVESCOPE_FAKE_DCGMI_MODEL"] = model
    return env


class SimulatedNode:
    """The engines and the scenario: started before the exporter's sources, stopped after them."""

    def __init__(
        self,
        fleet: SimulatedFleet,
        engines: int,
        seed: int,
        scenario: Scenario | None,
        state: StateWriter | None = None,
    ) -> None:
        self.fleet, self.engine_count, self.seed, self.scenario = fleet, engines, seed, scenario
        self.engines: list[SimEngine] = []
        self.driver: ScenarioDriver | None = None
        self.state = state

    def start(self) -> None:
        if self.state is not None:
            self.state.start()
        if self.engine_count:
            self.engines = start_engines(self.fleet, self.engine_count, self.seed)
        if self.scenario is not None:
            self.driver = ScenarioDriver(self.scenario, self.fleet, self.engines)
            self.driver.start()

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
            self.driver = None
        stop_engines(self.engines)
        self.engines = []
        if self.state is not None:
            self.state.stop()
            shutil.rmtree(self.state.path.parent, ignore_errors=True)


def check(simulation: SimulationSettings) -> None:
    """Refuse names the simulator does not know, naming the flag and the choices."""
    if simulation.gpu_model not in MODELS:
        raise SimulationError(
            f"invalid value for --gpu-model: unknown GPU model {simulation.gpu_model!r}; "
            f"choose one of {', '.join(sorted(MODELS))}"
        )
    if simulation.scenario not in (NO_SCENARIO, *SCENARIOS):
        raise SimulationError(
            f"invalid value for --scenario: unknown scenario {simulation.scenario!r}; "
            f"choose one of {NO_SCENARIO}, {', '.join(SCENARIOS)}"
        )


def simulated_runtime(settings: Settings, simulation: SimulationSettings) -> Runtime:
    """The exporter's runtime over a simulated node; raises SimulationError for unknown names."""
    check(simulation)
    fleet = SimulatedFleet(
        simulation.gpus,
        simulation.gpu_model,
        simulation.seed,
        nvlinks=None if simulation.nvlinks < 0 else simulation.nvlinks,
    )
    scenario = None
    if simulation.scenario != NO_SCENARIO:
        layout = gpu_groups(simulation.gpus, simulation.engines)
        try:
            scenario = make_scenario(simulation.scenario, pace=simulation.scenario_pace, layout=layout)
        except ValueError as exc:  # a bad leak rate in the environment
            raise SimulationError(str(exc)) from None
    env = fake_dcgmi_environment(simulation.gpus, simulation.seed, simulation.gpu_model)
    # The fake `dcgmi` follows this fleet (what scenarios drive), as a host engine reads the same GPUs.
    state = StateWriter(fleet, Path(tempfile.mkdtemp(prefix="servescope-sim-")) / "node-state.json")
    env[STATE_ENV] = str(state.path)
    hardware = Hardware(
        nvml=NvmlLibrary(SimulatedPynvml(fleet)),
        dcgmi=fake_dcgmi_path(),
        spawn=functools.partial(spawn_process, env=env),
        simulated=True,
        engine_processes=(SIMULATED_ENGINE_PROCESS,),
    )
    log.warning(
        "serving a SIMULATED node of %d %s GPUs (seed %d): not real data",
        simulation.gpus,
        simulation.gpu_model,
        simulation.seed,
    )
    runtime = build_runtime(settings, hardware)
    runtime.companions.append(SimulatedNode(fleet, simulation.engines, simulation.seed, scenario, state))
    return runtime
