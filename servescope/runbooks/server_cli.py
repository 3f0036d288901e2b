"""`servescope runbook-server`: the runbook pages, the Alertmanager webhook and the incidents, served.

Its options are the runbook settings (every SERVESCOPE_RUNBOOK_* variable), through the settings bridge.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from pydantic import BaseModel

from servescope.common.settings_cli import settings_command, usage_error
from servescope.runbooks.auth import TokenFileError, WebhookAuth, change_token
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


def _banner(settings: RunbookSettings, address: str, token: str | None, auth: WebhookAuth) -> str:
    changes = (
        "change steps need the token" if token else f"change steps refused (no --token-file, no ${ENV_TOKEN})"
    )
    hook = "webhook needs its token" if auth.token else "webhook refuses all (no --webhook-token-file)"
    return (
        f"servescope runbook server on {address}\n  {changes}; audit log: {settings.service.audit_log}\n"
        f"  {hook}; incidents: {settings.service.incidents_db}"
    )


def _app(
    settings: RunbookSettings, token: str | None, auth: WebhookAuth
) -> tuple[FastAPI, IncidentRouter, IncidentStore]:
    """The app over the settings' folder, store and audit log, with the webhook's routes."""
    from servescope.runbooks.audit import AuditLog
    from servescope.runbooks.incidents import IncidentStore
    from servescope.runbooks.server import create_runbook_app
    from servescope.runbooks.step_pool import StepPool
    from servescope.runbooks.webhook import incident_router

    folder, ctx, service = settings.folder.folder(), settings.steps.context(), settings.service
    store = IncidentStore(service.incidents_db)
    audit = AuditLog(service.audit_log)
    webhook = incident_router(store, folder, lambda: ctx, auth=auth, audit=audit)
    app = create_runbook_app(
        folder,
        ctx,
        token=token,
        audit=audit,
        incidents=store.latest,
        readiness=store.health,
        pool=StepPool(service.step_workers, 4 * service.step_workers),
        trusted_proxies=tuple(service.trusted_proxy),
        api_docs=service.api_docs,
    )
    # Alertmanager posts here; read steps of firing alerts run in the router's bounded pool.
    app.include_router(webhook)
    return app, webhook, store


def serve_runbooks(settings: RunbookSettings) -> None:
    """Bind, then serve until stopped; a token file that cannot be read is a usage error."""
    import uvicorn

    from servescope.common.listen import ListenError, bind, bound_address, parse_listen
    from servescope.runbooks.connections import server_config
    from servescope.runbooks.server import wrapped

    try:
        token = change_token(settings.tokens)
        auth = WebhookAuth.from_settings(settings.tokens)
        sock = bind(parse_listen(settings.service.listen))
    except (TokenFileError, ListenError) as exc:
        usage_error(str(exc))
    app, webhook, store = _app(settings, token, auth)
    service = settings.service
    config = server_config(
        wrapped(app), max_connections=service.max_connections, header_timeout=service.header_timeout_seconds
    )
    typer.echo(_banner(settings, str(bound_address(sock)), token, auth))
    sys.stdout.flush()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        webhook.service.close()
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
