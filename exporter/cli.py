"""The `servescope` command line."""

from __future__ import annotations

import logging
import platform
import sys
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from . import __version__
from .listen import ListenError, bind, bound_address, parse_listen
from .settings import (
    AREAS,
    DcgmSettings,
    DerivedSettings,
    NodeSettings,
    NvmlSettings,
    ServerSettings,
    Settings,
    SimulatorSettings,
    VllmSettings,
    cli_flag,
    env_names,
)

app = typer.Typer(
    name="servescope",
    help="Observability and alerting for LLM serving (vLLM) on NVIDIA GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

log = logging.getLogger("servescope")


def _alerts() -> None:
    from servescope.alerts.cli import app as alerts_app  # alerts/ is mapped into the package

    app.add_typer(alerts_app, name="alerts")


def _dashboards() -> None:
    from servescope.dashboards.cli import app as dashboards_app  # so is dashboards/

    app.add_typer(dashboards_app, name="dashboards")


def _dcgm() -> None:
    from .dcgm.cli import app as dcgm_app

    app.add_typer(dcgm_app, name="dcgm")


def _vllm() -> None:
    from .vllm.cli import app as vllm_app

    app.add_typer(vllm_app, name="vllm")


def _advise() -> None:
    from .advisor.cli import app as advise_app

    app.add_typer(advise_app, name="advise")


def _runbook() -> None:
    from .runbook.cli import app as runbook_app

    app.add_typer(runbook_app, name="runbook")


def _runbook_server() -> None:
    from .runbook.cli import server_command

    app.command("runbook-server")(server_command)


def _demo() -> None:
    from .demo.cli import demo

    app.command("demo")(demo)


def _deploy() -> None:
    from .deploy.cli import app as deploy_app

    app.add_typer(deploy_app, name="deploy")


# Subcommands are imported only when they run: `serve`, the long-running one, then does not carry the
# alert, dashboard, deploy and demo code (about 5 MiB of resident memory per exporter).
SUBCOMMANDS = {
    "dcgm": _dcgm,
    "vllm": _vllm,
    "advise": _advise,
    "alerts": _alerts,
    "dashboards": _dashboards,
    "runbook": _runbook,
    "runbook-server": _runbook_server,
    "demo": _demo,
    "deploy": _deploy,
}
_registered: set[str] = set()


def register_subcommands(only: str | None = None) -> None:
    """Add the subcommand `only` to the app, or every subcommand (for --help and for tests)."""
    for name, register in SUBCOMMANDS.items():
        if (only is None or name == only) and name not in _registered:
            register()
            _registered.add(name)


def setting(area: type[BaseSettings], field: str) -> Any:
    """A typer option whose flag, help and environment variables come from a settings field."""
    info = area.model_fields[field]
    return typer.Option(
        cli_flag(area, field), help=info.description, envvar=env_names(area, field), show_envvar=True
    )


def default(area: type[BaseSettings], field: str) -> Any:
    return area.model_fields[field].default


def fail(message: str) -> NoReturn:
    typer.echo(f"servescope: error: {message}", err=True)
    raise typer.Exit(1)


def _validation_message(exc: ValidationError) -> str:
    """One line naming the flag, e.g. `invalid value for --nvml-interval: ...`."""
    error = exc.errors()[0]
    field = str(error["loc"][-1]) if error["loc"] else "?"
    area = next((a for a in AREAS if a.__name__ == exc.title), None)
    flag = cli_flag(area, field).split("/")[0] if area and field in area.model_fields else field
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"invalid value for {flag}: {message}"


@app.command()
def serve(
    listen: Annotated[str, setting(ServerSettings, "listen")] = default(ServerSettings, "listen"),
    log_level: Annotated[str, setting(ServerSettings, "log_level")] = default(ServerSettings, "log_level"),
    hostname: Annotated[str, setting(NodeSettings, "hostname")] = default(NodeSettings, "hostname"),
    nvml: Annotated[bool, setting(NvmlSettings, "enabled")] = default(NvmlSettings, "enabled"),
    nvml_interval: Annotated[float, setting(NvmlSettings, "interval_seconds")] = default(
        NvmlSettings, "interval_seconds"
    ),
    xid_events: Annotated[bool, setting(NvmlSettings, "xid_events")] = default(NvmlSettings, "xid_events"),
    dcgm: Annotated[bool, setting(DcgmSettings, "enabled")] = default(DcgmSettings, "enabled"),
    dcgmi: Annotated[str, setting(DcgmSettings, "dcgmi")] = default(DcgmSettings, "dcgmi"),
    dcgm_interval: Annotated[float, setting(DcgmSettings, "interval_seconds")] = default(
        DcgmSettings, "interval_seconds"
    ),
    dcgm_counters: Annotated[str, setting(DcgmSettings, "counters")] = default(DcgmSettings, "counters"),
    dcgm_na_rows: Annotated[int, setting(DcgmSettings, "na_rows")] = default(DcgmSettings, "na_rows"),
    dcgm_exporter_url: Annotated[str, setting(DcgmSettings, "exporter_url")] = default(
        DcgmSettings, "exporter_url"
    ),
    vllm_url: Annotated[list[str], setting(VllmSettings, "urls")] = [],  # noqa: B006 (typer reads it)
    discovery: Annotated[bool, setting(VllmSettings, "discovery")] = default(VllmSettings, "discovery"),
    vllm_interval: Annotated[float, setting(VllmSettings, "interval_seconds")] = default(
        VllmSettings, "interval_seconds"
    ),
    vllm_timeout: Annotated[float, setting(VllmSettings, "timeout_seconds")] = default(
        VllmSettings, "timeout_seconds"
    ),
    vllm_max_bytes: Annotated[int, setting(VllmSettings, "max_bytes")] = default(VllmSettings, "max_bytes"),
    passthrough: Annotated[bool, setting(VllmSettings, "passthrough")] = default(VllmSettings, "passthrough"),
    procfs: Annotated[str, setting(VllmSettings, "procfs")] = default(VllmSettings, "procfs"),
    simulate: Annotated[bool, setting(SimulatorSettings, "enabled")] = default(SimulatorSettings, "enabled"),
    gpus: Annotated[int, setting(SimulatorSettings, "gpus")] = default(SimulatorSettings, "gpus"),
    gpu_model: Annotated[str, setting(SimulatorSettings, "gpu_model")] = default(
        SimulatorSettings, "gpu_model"
    ),
    nvlinks: Annotated[int, setting(SimulatorSettings, "nvlinks")] = default(SimulatorSettings, "nvlinks"),
    seed: Annotated[int, setting(SimulatorSettings, "seed")] = default(SimulatorSettings, "seed"),
    engines: Annotated[int, setting(SimulatorSettings, "engines")] = default(SimulatorSettings, "engines"),
    scenario: Annotated[str, setting(SimulatorSettings, "scenario")] = default(SimulatorSettings, "scenario"),
    scenario_pace: Annotated[str, setting(SimulatorSettings, "scenario_pace")] = default(
        SimulatorSettings, "scenario_pace"
    ),
    derived_interval: Annotated[float, setting(DerivedSettings, "interval_seconds")] = default(
        DerivedSettings, "interval_seconds"
    ),
    memory_retention: Annotated[float, setting(DerivedSettings, "retention_seconds")] = default(
        DerivedSettings, "retention_seconds"
    ),
    memory_peak_window: Annotated[float, setting(DerivedSettings, "peak_window_seconds")] = default(
        DerivedSettings, "peak_window_seconds"
    ),
    advisor_latency: Annotated[str, setting(DerivedSettings, "advisor_latency")] = default(
        DerivedSettings, "advisor_latency"
    ),
    advisor_slo: Annotated[float, setting(DerivedSettings, "advisor_slo_seconds")] = default(
        DerivedSettings, "advisor_slo_seconds"
    ),
    advisor_low_utilisation: Annotated[float, setting(DerivedSettings, "advisor_low_utilisation")] = default(
        DerivedSettings, "advisor_low_utilisation"
    ),
    advisor_max_num_seqs: Annotated[int, setting(DerivedSettings, "advisor_max_num_seqs")] = default(
        DerivedSettings, "advisor_max_num_seqs"
    ),
    advisor_max_seqs: Annotated[int, setting(DerivedSettings, "advisor_max_seqs")] = default(
        DerivedSettings, "advisor_max_seqs"
    ),
    advisor_window: Annotated[float, setting(DerivedSettings, "advisor_window_seconds")] = default(
        DerivedSettings, "advisor_window_seconds"
    ),
) -> None:
    """Run the exporter: collect in the background, serve /metrics, /healthz, /readyz.

    On a GPU node it reads the real driver through NVML. Without one, --simulate serves a simulated
    fleet (never chosen automatically: a node whose driver is missing reports the NVML source down).
    """
    try:
        settings = Settings(
            server=ServerSettings(listen=listen, log_level=log_level),
            node=NodeSettings(hostname=hostname),
            nvml=NvmlSettings(enabled=nvml, interval_seconds=nvml_interval, xid_events=xid_events),
            dcgm=DcgmSettings(
                enabled=dcgm,
                dcgmi=dcgmi,
                interval_seconds=dcgm_interval,
                counters=dcgm_counters,
                na_rows=dcgm_na_rows,
                exporter_url=dcgm_exporter_url,
            ),
            vllm=VllmSettings(
                urls=vllm_url,
                discovery=discovery,
                interval_seconds=vllm_interval,
                timeout_seconds=vllm_timeout,
                max_bytes=vllm_max_bytes,
                passthrough=passthrough,
                procfs=procfs,
            ),
            simulator=SimulatorSettings(
                enabled=simulate,
                gpus=gpus,
                gpu_model=gpu_model,
                nvlinks=nvlinks,
                seed=seed,
                engines=engines,
                scenario=scenario,
                scenario_pace=scenario_pace,
            ),
            derived=DerivedSettings(
                interval_seconds=derived_interval,
                retention_seconds=memory_retention,
                peak_window_seconds=memory_peak_window,
                advisor_latency=advisor_latency,
                advisor_slo_seconds=advisor_slo,
                advisor_low_utilisation=advisor_low_utilisation,
                advisor_max_num_seqs=advisor_max_num_seqs,
                advisor_max_seqs=advisor_max_seqs,
                advisor_window_seconds=advisor_window,
            ),
        )
    except ValidationError as exc:
        fail(_validation_message(exc))
    run_server(settings)


def run_server(settings: Settings) -> None:
    import uvicorn

    from .app import create_app
    from .dcgm.counters import CountersError
    from .runtime import build_runtime

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
        fail(str(exc))
    address = bound_address(sock)
    try:
        runtime = build_runtime(settings)
    except CountersError as exc:
        fail(str(exc))
    config = uvicorn.Config(
        create_app(runtime), log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3
    )
    shown = f"[{address.host}]" if ":" in address.host else address.host
    if shown in ("0.0.0.0", "[::]"):
        shown = "127.0.0.1"
    mode = " (simulated fleet)" if settings.simulator.enabled else ""
    typer.echo(
        f"servescope {__version__} serving{mode} on {address}\n"
        f"  metrics:   http://{shown}:{address.port}/metrics\n"
        f"  readiness: http://{shown}:{address.port}/readyz",
        err=False,
    )
    sys.stdout.flush()
    uvicorn.Server(config).run(sockets=[sock])


@app.command()
def version() -> None:
    """Print the servescope version."""
    typer.echo(f"servescope {__version__} (Python {platform.python_version()})")


@app.command(hidden=True)
def docs(
    readme: Annotated[str, typer.Option(help="README file to update.")] = "README.md",
    check: Annotated[bool, typer.Option(help="Only check that the generated tables are current.")] = False,
) -> None:
    """Regenerate the README's settings and metric tables."""
    from pathlib import Path

    from .docs import update_readme

    path = Path(readme)
    if not path.is_file():
        fail(f"{readme}: no such file")
    if not update_readme(path, check=check):
        fail(f"{readme}: generated tables are stale; run `make docs`")


def main() -> None:
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command not in ("serve", "version", "docs"):
        # A subcommand gets only itself; anything else (--help, a typo) gets the full list to show.
        register_subcommands(command if command in SUBCOMMANDS else None)
    app()
