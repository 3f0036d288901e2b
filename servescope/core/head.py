"""HEAD answered wherever GET is, for every HTTP app of servescope (the exporter, the runbook service)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """HEAD answered wherever GET is: the GET route runs, its headers are sent, its body is not."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self._app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b"", "more_body": message.get("more_body", False)}
            await send(message)

        await self._app({**scope, "method": "GET"}, receive, headers_only)
