"""The one place HTML is made: a Jinja2 environment with autoescape, and the page shell.

Every value a template shows is escaped unless it is `Markup` built by another template (autoescape), and
a name a template uses that the caller did not give is an error, not an empty string (StrictUndefined).
A product's templates are package data in a `templates/` folder beside the module that renders them; the
shell (`page.html`) lives here, so a product's page `{% extends "page.html" %}`. A page runs a script only
with the per-response nonce it was given, and every page is sent with a Content-Security-Policy that
allows nothing else.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

__all__ = ["Markup", "document", "environment", "page", "render", "response"]

_SHELL_PACKAGE = "servescope.core"


@cache
def environment(package: str) -> Environment:
    """The environment of one package's templates (`<package>/templates/`), the shell's beside them."""
    loaders = [PackageLoader(name, "templates") for name in dict.fromkeys((package, _SHELL_PACKAGE))]
    env = Environment(
        loader=ChoiceLoader(loaders), autoescape=True, undefined=StrictUndefined, trim_blocks=True
    )
    # `tojson` (JSON in a <script> element, `<`, `>`, `&` and `'` escaped) keeps the caller's key order.
    env.policies["json.dumps_kwargs"] = {"sort_keys": False}
    env.filters["pretty_json"] = lambda value: json.dumps(value, indent=2)
    return env


def render(package: str, template: str, **values: Any) -> Markup:
    """`template` of `package` filled with `values`, every one escaped where it is shown; the result is
    markup another template shows as it is."""
    return Markup(environment(package).get_template(template).render(**values))


def document(title: str, body: Markup, *, style: str = "") -> str:
    """The whole document: `body` (markup a template made) in the shell, `style` as its stylesheet."""
    return str(render(_SHELL_PACKAGE, "page.html", title=title, body=body, style=Markup(style)))


def _headers(nonce: str | None) -> dict[str, str]:
    script_src = f"'nonce-{nonce}'" if nonce else "'none'"
    return {
        "Content-Security-Policy": (
            f"default-src 'self'; script-src {script_src}; style-src 'unsafe-inline'; img-src 'self'; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


def response(document: str, *, nonce: str | None = None, status: int = 200) -> HTMLResponse:
    """A whole rendered document, sent with the headers every page gets; scripts run only with `nonce`."""
    return HTMLResponse(document, status_code=status, headers=_headers(nonce))


def page(
    title: str, body: Markup, *, style: str = "", nonce: str | None = None, status: int = 200
) -> HTMLResponse:
    """The page: `body` (markup a template made) inside the shell, with `style` as its stylesheet."""
    return response(document(title, body, style=style), nonce=nonce, status=status)
