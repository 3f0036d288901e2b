"""`servescope runbook-server`: the runbook pages, the Alertmanager webhook and the incidents, served.

Its options are the runbook settings (every SERVESCOPE_RUNBOOK_* variable), through the settings bridge.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.http_server import ServerBounds
from servescope.core.settings_cli import settings_command
from servescope.runbooks.auth import ChangeTokens, TokenFileError, WebhookAuth, change_tokens
from servescope.runbooks.settings import (
    ENV_TOKEN,
    RUNBOOK_AREAS,
    FolderSettings,
    RunbookSettings,
    ServiceSettings,
    StepSettings,
    TokenSettings,
)

if TYPE_CHECKING:  # imported when the server starts: `runbook --help` stays quick
    from fastapi import FastAPI

    from servescope.runbooks.incidents import IncidentStore
    from servescope.runbooks.webhook import IncidentRouter


def _settings(models: dict[type[BaseModel], BaseModel]) -> RunbookSettings:
    return RunbookSettings.model_validate(
        {
            "folder": models[FolderSettings],
            "steps": models[StepSettings],
            "tokens": models[TokenSettings],
            "service": models[ServiceSettings],
        }
    )


def _banner(settings: RunbookSettings, address: str, tokens: ChangeTokens | None, auth: WebhookAuth) -> str:
    changes = (
        f"change steps need a token ({len(tokens.names)} known)"
        if tokens
        else f"change steps refused (no --token-file, no ${ENV_TOKEN})"
    )
    hook = "webhook needs its token" if auth.token else "webhook refuses all (no --webhook-token-file)"
    return (
        f"servescope runbook server on {address}\n  {changes}; audit trail: {settings.steps.audit_log}\n"
        f"  {hook}; incidents: {settings.service.incidents_db}"
    )


def _app(
    settings: RunbookSettings, tokens: ChangeTokens | None, auth: WebhookAuth
) -> tuple[FastAPI, IncidentRouter, IncidentStore]:
    """The app over the settings' folder, store and audit trail, with the webhook's routes."""
    from servescope.runbooks.audit import AuditLog
    from servescope.runbooks.auth import trusted_networks
    from servescope.runbooks.incidents import IncidentStore
    from servescope.runbooks.server import create_runbook_app
    from servescope.runbooks.step_pool import StepPool
    from servescope.runbooks.webhook import incident_router

    folder, config, service = settings.folder.folder(), settings.folder.config(), settings.service
    ctx = settings.steps.context().model_copy(update={"alerts": config})
    store = IncidentStore(service.incidents_db)
    webhook = incident_router(store, folder, lambda: ctx, auth=auth, config=config)
    app = create_runbook_app(
        folder,
        ctx,
        tokens=tokens,
        audit=AuditLog(settings.steps.audit_log),
        incidents=store.latest,
        readiness=store.health,
        pool=StepPool(service.step_workers, 4 * service.step_workers),
        trusted_proxies=trusted_networks(service.trusted_proxy),
        api_docs=service.api_docs,
        on_stop=lambda: _stop(webhook, service.shutdown_grace_seconds),
        config=config,
    )
    # Alertmanager posts here; read steps of firing alerts run in the router's bounded pool.
    app.include_router(webhook)
    return app, webhook, store


def _stop(webhook: IncidentRouter, grace: float) -> None:
    """The app's shutdown: queued steps stay queued in the store, running ones get `grace` seconds."""
    if not webhook.service.close(grace):
        typer.echo(
            "stopping: read steps still running past --shutdown-grace are resumed at the next start", err=True
        )


def _bounds(service: ServiceSettings) -> ServerBounds:
    from servescope.runbooks.auth import trusted_networks

    return ServerBounds(
        request_seconds=service.request_timeout_seconds,
        max_connections=service.max_connections,
        max_per_ip=service.max_connections_per_ip,
        graceful_seconds=3.0,
        # uvicorn's own stop, then the read steps' grace, then a margin: the process is gone by then.
        hard_stop_seconds=3.0 + service.shutdown_grace_seconds + 2.0,
        exempt=trusted_networks(service.trusted_proxy),
    )


def serve_runbooks(settings: RunbookSettings) -> None:
    """Bind, then serve until stopped; a token file that cannot be read is a usage error."""
    import threading

    from servescope.core.http_server import BoundedServer, bounded_config
    from servescope.core.listen import ListenError, bind, bound_address, parse_listen
    from servescope.runbooks.retention import Retention, prune_periodically
    from servescope.runbooks.server import wrapped

    try:
        tokens = change_tokens(settings.tokens)
        auth = WebhookAuth.from_settings(settings.tokens)
        sock = bind(parse_listen(settings.service.listen))
    except (TokenFileError, ListenError) as exc:
        usage_error(str(exc))
    app, webhook, store = _app(settings, tokens, auth)
    service = settings.service
    bounds = _bounds(service)
    # Blind to X-Forwarded-For: the audit names the socket peer unless --trusted-proxy says otherwise.
    config = bounded_config(
        wrapped(app, auth, webhook.service.metrics.requests.labels("unauthorized").inc),
        bounds,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,
    )
    typer.echo(_banner(settings, str(bound_address(sock)), tokens, auth))
    sys.stdout.flush()
    stop = threading.Event()
    prune_periodically(store, Retention(service.retention_days, service.retention_max_mb * 2**20), stop)
    webhook.service.resume(service.resume_max)
    try:
        BoundedServer(config, bounds.hard_stop_seconds).run(sockets=[sock])
    finally:
        stop.set()
        webhook.service.close(0)  # stopped already by the app's shutdown, unless it never started
        store.close()


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    serve_runbooks(_settings(models))


server_command = settings_command(
    RUNBOOK_AREAS,
    _run,
    doc="""Serve the runbooks to browsers: pages with Run buttons; change steps need a token and are audited.

    Also receives Alertmanager's webhook (POST /alertmanager/webhook) and keeps incidents (/incidents).
    """,
    panels={
        ServiceSettings: "Service",
        FolderSettings: "Runbooks",
        StepSettings: "Steps",
        TokenSettings: "Tokens",
    },
)
