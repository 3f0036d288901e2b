"""`servescope serve`: the exporter daemon's command.

Its options are the exporter's settings areas plus the simulation options below, turned into flags by
the one settings bridge. The simulator is another distribution (servescope-sim), loaded through its entry
point only when `--simulate` is given: a real node's exporter never loads it.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import typer
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from servescope import __version__
from servescope.core.cli_errors import usage_error
from servescope.core.errors import ServescopeError
from servescope.core.extensions import MissingDistributionError, simulator
from servescope.core.listen import ListenAddress, ListenError, bind, bound_address, parse_listen
from servescope.core.settings_cli import area_config, setting, settings_command
from servescope.exporter.k8s.settings import K8sSettings
from servescope.exporter.settings import (
    AREAS,
    DcgmSettings,
    DerivedSettings,
    NodeSettings,
    NvmlSettings,
    ServerSettings,
    Settings,
)
from servescope.exporter.vllm.settings import VllmSettings

if TYPE_CHECKING:
    from servescope.exporter.runtime import Runtime


class SimulatedRuntime(Protocol):
    """servescope-sim's `runtime` hook: the exporter's runtime over a simulated node."""

    def __call__(self, settings: Settings, simulation: SimulationSettings, /) -> Runtime: ...


class SimulationSettings(BaseSettings):
    """What `--simulate` serves. Only declarations: the simulator checks the names when it starts."""

    model_config = area_config("sim")

    enabled: bool = setting(
        False,
        "--simulate/--no-simulate",
        "Serve a simulated GPU node instead of real NVML. Never turned on implicitly.",
    )
    gpus: int = setting(8, "--gpus", "Number of simulated GPUs.", ge=0, le=1024)
    gpu_model: str = setting(
        "H200", "--gpu-model", "Simulated GPU model (`servescope sim models` lists them)."
    )
    nvlinks: int = setting(
        -1, "--nvlinks", "NVLinks per simulated GPU; -1 uses the model's count.", ge=-1, le=36
    )
    seed: int = setting(1, "--seed", "Seed of the simulation; the same seed gives the same node.")
    engines: int = setting(
        0,
        "--engines",
        "Simulated vLLM engines to start with --simulate, each serving a group of the GPUs from its own "
        "process (found and joined like real ones).",
        ge=0,
        le=64,
    )
    scenario: str = setting(
        "none",
        "--scenario",
        "What the simulated node and engines go through; `none` is a slow daily-like load wave. `servescope "
        "sim scenarios` lists every scenario with what it does.",
    )
    cluster: bool = setting(
        False,
        "--cluster/--no-cluster",
        "Also simulate the node's Kubernetes: a kubelet pod-resources socket where each engine is a pod of "
        "one Deployment, and an API server listing and watching those pods with their revision labels. The "
        "exporter reads the socket (GPU -> pod), and the API server with --pod-labels (each engine's "
        "`revision`). On, with --pod-labels, for the scenarios that need it (canary).",
    )
    cluster_api_listen: str = setting(
        "127.0.0.1:0",
        "--cluster-api-listen",
        "With a simulated cluster: where its API server listens (the demo tells the runbook service).",
    )
    scenario_pace: Literal["real", "demo"] = setting(
        "real",
        "--scenario-pace",
        "real: the timings detectors are tested against (KV ramp 30 min, leak 40 MiB/min); demo: compressed "
        "so faults show within minutes (KV ramp 90 s, leak 2 GiB/min, tour phases 4 min).",
    )


SERVE_AREAS: tuple[type[BaseSettings], ...] = (*AREAS, SimulationSettings)
log = logging.getLogger("servescope")


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    def area(kind: type[Any]) -> Any:
        return models[kind]

    settings = Settings(
        server=area(ServerSettings),
        node=area(NodeSettings),
        nvml=area(NvmlSettings),
        dcgm=area(DcgmSettings),
        vllm=area(VllmSettings),
        k8s=area(K8sSettings),
        derived=area(DerivedSettings),
    )
    run_server(settings, area(SimulationSettings))


serve = settings_command(
    SERVE_AREAS,
    _run,
    doc="""Run the exporter: collect in the background, serve /metrics, /healthz, /readyz.

    On a GPU node it reads the real driver through NVML. Without one, --simulate serves a simulated
    node (never chosen automatically: a node whose driver is missing reports the NVML source down).
    """,
    panels={
        ServerSettings: "Server",
        NodeSettings: "Node",
        NvmlSettings: "NVML",
        DcgmSettings: "DCGM",
        VllmSettings: "Serving engines (vLLM, SGLang)",
        K8sSettings: "Kubernetes",
        DerivedSettings: "Derived signals and batch advice",
        SimulationSettings: "Simulation (no GPU needed)",
    },
    error_code=1,
)


def run_server(settings: Settings, simulation: SimulationSettings) -> None:
    from servescope.core.http_server import BoundedServer, bounded_config
    from servescope.exporter.app import create_app

    logging.basicConfig(
        level=settings.server.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at INFO: one line per endpoint every 5 s says nothing an operator needs.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        sock = bind(parse_listen(settings.server.listen))
    except ListenError as exc:
        usage_error(str(exc), 1)
    address = bound_address(sock)
    runtime = _runtime(settings, simulation)
    config = bounded_config(
        create_app(runtime, api_docs=settings.server.api_docs),
        log_level="warning",
        access_log=False,
        lifespan="on",
        # Nothing proxies a node's exporter: the peer's address is the client's, never a header's.
        proxy_headers=False,
    )
    _announce(address, simulated=simulation.enabled)
    BoundedServer(config).run(sockets=[sock])


def _runtime(settings: Settings, simulation: SimulationSettings) -> Runtime:
    """The real node's runtime, or with --simulate the simulator's (servescope-sim's, loaded only then)."""
    from servescope.core.dcgm.counters import CountersError
    from servescope.exporter.runtime import build_runtime

    try:
        if not simulation.enabled:
            return build_runtime(settings)
        try:
            simulated_runtime = cast(SimulatedRuntime, simulator("runtime", "`servescope serve --simulate`"))
        except MissingDistributionError as exc:
            usage_error(str(exc), 2)
        try:
            return simulated_runtime(settings, simulation)
        except ServescopeError as exc:  # a name the simulator does not have
            usage_error(str(exc), 1)
    except CountersError as exc:
        usage_error(str(exc), 1)


def _announce(address: ListenAddress, *, simulated: bool) -> None:
    """Where the exporter serves, printed once it listens (an address a browser can open)."""
    shown = f"[{address.host}]" if ":" in address.host else address.host
    if shown in ("0.0.0.0", "[::]"):
        shown = "127.0.0.1"
    mode = " (simulated fleet)" if simulated else ""
    typer.echo(
        f"servescope {__version__} serving{mode} on {address}\n"
        f"  metrics:   http://{shown}:{address.port}/metrics\n"
        f"  readiness: http://{shown}:{address.port}/readyz"
    )
    sys.stdout.flush()
