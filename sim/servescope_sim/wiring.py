"""`serve --simulate`: a simulated node plugged into the real exporter through the interfaces the real
sources use: a pynvml-shaped module for NVML, a `dcgmi` executable for DCGM, HTTP for the engines."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Literal, Protocol

from servescope.core.errors import ServescopeError
from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.runtime import Hardware, Runtime, build_runtime
from servescope.exporter.settings import Settings
from servescope_sim.engines import ENGINE_MODULE, SimEngine, gpu_groups, start_engines, stop_engines
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.kubernetes import SimulatedCluster
from servescope_sim.models import MODELS
from servescope_sim.node_state import STATE_ENV, StateWriter
from servescope_sim.pynvml_module import SimulatedPynvml
from servescope_sim.registry import NO_SCENARIO, SCENARIOS, make_scenario
from servescope_sim.scenario_driver import ScenarioDriver
from servescope_sim.scenarios import Scenario

log = logging.getLogger(__name__)


# The simulated engines' command line (`python -m servescope_sim.vllm_server`): discovery probes only
# serving engines, and these are not titled as vLLM's. No space in it: the environment splits on spaces.
SIMULATED_ENGINE_PROCESS = rf"(?:^|\s){re.escape(ENGINE_MODULE)}(?:\s|$)"


class SimulationSettings(Protocol):
    """What `serve` was asked to simulate (its simulation options, read here by name)."""

    gpus: int
    gpu_model: str
    nvlinks: int  # -1: the GPU model's own count
    seed: int
    engines: int
    scenario: str
    scenario_pace: Literal["real", "demo"]
    cluster: bool
    cluster_api_listen: str


class SimulationError(ServescopeError, ValueError):
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
        *,
        cluster: SimulatedCluster | None = None,
    ) -> None:
        self.fleet, self.engine_count, self.seed, self.scenario = fleet, engines, seed, scenario
        self.engines: list[SimEngine] = []
        self.driver: ScenarioDriver | None = None
        self.state, self.cluster = state, cluster

    def start(self) -> None:
        if self.state is not None:
            self.state.start()
        if self.cluster is not None:
            self.cluster.start()
        if self.engine_count:
            self.engines = start_engines(self.fleet, self.engine_count, self.seed)
        if self.scenario is not None:
            self.driver = ScenarioDriver(self.scenario, self.fleet, self.engines, self.cluster)
            self.driver.start()

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
            self.driver = None
        stop_engines(self.engines)
        self.engines = []
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
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


def _scenario(simulation: SimulationSettings) -> Scenario | None:
    """The scenario the node plays, or None for the plain load wave."""
    if simulation.scenario == NO_SCENARIO:
        return None
    layout = gpu_groups(simulation.gpus, simulation.engines)
    try:
        return make_scenario(simulation.scenario, pace=simulation.scenario_pace, layout=layout)
    except ValueError as exc:  # a bad leak rate in the environment
        raise SimulationError(str(exc)) from None


def simulated_runtime(settings: Settings, simulation: SimulationSettings) -> Runtime:
    """The exporter's runtime over a simulated node; raises SimulationError for unknown names."""
    check(simulation)
    fleet = SimulatedFleet(
        simulation.gpus,
        simulation.gpu_model,
        simulation.seed,
        nvlinks=None if simulation.nvlinks < 0 else simulation.nvlinks,
    )
    scenario = _scenario(simulation)
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
    cluster = None
    on_cluster = scenario is not None and scenario.needs_cluster
    if simulation.cluster or on_cluster:
        # A scenario played on the cluster needs the engines' revisions: the pods' labels are read then.
        labels = settings.k8s.pod_labels or on_cluster
        cluster, settings = _with_cluster(settings, simulation, fleet, state.path.parent, labels)
    runtime = build_runtime(settings, hardware)
    node = SimulatedNode(fleet, simulation.engines, simulation.seed, scenario, state, cluster=cluster)
    runtime.companions.append(node)
    return runtime


def _with_cluster(
    settings: Settings, simulation: SimulationSettings, fleet: SimulatedFleet, folder: Path, labels: bool
) -> tuple[SimulatedCluster, Settings]:
    """The node's simulated Kubernetes side, and the settings that point the exporter at it: the kubelet
    socket (GPU -> pod) and, with `labels`, the API server (each pod's revision), as on a cluster node."""
    groups = gpu_groups(simulation.gpus, simulation.engines)
    uuids = [[fleet.gpus[index].uuid for index in group] for group in groups]
    node = settings.node.resolved_hostname()
    try:
        cluster = SimulatedCluster(node, uuids, folder / "kubelet.sock", simulation.cluster_api_listen)
    except (OSError, ValueError) as exc:
        raise SimulationError(f"invalid value for --cluster-api-listen: {exc}") from None
    log.warning(
        "simulated Kubernetes: API server %s, kubelet socket %s, node %s", cluster.url, cluster.socket, node
    )
    k8s = settings.k8s.model_copy(
        update={
            "pod_resources_socket": str(cluster.socket),
            "pod_resources_interval_seconds": min(settings.k8s.pod_resources_interval_seconds, 5.0),
            "pod_labels": labels,
            "kube_api_url": cluster.url,
        }
    )
    return cluster, settings.model_copy(update={"k8s": k8s})
