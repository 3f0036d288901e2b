"""Who may do what: the change-step bearer token and the webhook's token (or basic auth), checked one way.

Tokens are compared in constant time. A token is read from its file when one is given, else from its
setting; with neither, nobody is let in (change steps are refused, the webhook refuses every post).
"""

from __future__ import annotations

import hmac
from base64 import b64decode
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from servescope.runbooks.settings import ENV_TOKEN, TokenSettings

REALM = 'Bearer realm="servescope", Basic realm="servescope"'


class TokenFileError(ValueError):
    """A token file that cannot be read or is empty; the message names the flag and the file."""


def read_token_file(path: Path, flag: str) -> str:
    """The token in `path`; refused when the file is empty, unreadable, or readable by every user
    (group-readable is allowed: Kubernetes mounts a Secret 0440 for the pod's fsGroup)."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{flag} {path}: cannot read: {exc}") from None
    if mode & 0o007:
        raise TokenFileError(
            f"{flag} {path}: other users may read or write it (mode {mode & 0o777:04o}): chmod o-rwx {path}"
        )
    if not text:
        raise TokenFileError(f"{flag} {path}: the file is empty")
    return text


def _resolved(path: Path | None, flag: str, value: str | None) -> str | None:
    if path is not None:
        return read_token_file(path, flag)
    return (value or "").strip() or None


def change_token(settings: TokenSettings) -> str | None:
    """The token change steps need: --token-file, else --token (SERVESCOPE_RUNBOOK_TOKEN); None: refused."""
    return _resolved(settings.token_file, "--token-file", settings.token)


def webhook_token(settings: TokenSettings) -> str | None:
    """The token Alertmanager sends: --webhook-token-file, else SERVESCOPE_WEBHOOK_TOKEN."""
    return _resolved(settings.webhook_token_file, "--webhook-token-file", settings.webhook_token)


def _split(authorization: str | None) -> tuple[str, str]:
    scheme, _, value = (authorization or "").strip().partition(" ")
    return scheme.lower(), value.strip()


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, None for any other header."""
    scheme, value = _split(authorization)
    return value if scheme == "bearer" and value else None


def same_secret(presented: str, expected: str) -> bool:
    """Constant-time comparison; a presented value that is not valid text never matches by accident."""
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


Refusal = Literal["refused_not_configured", "refused_no_token", "refused_bad_token"]
NOT_CONFIGURED = (
    "change steps are disabled: no token is configured (start the server with --token-file FILE "
    f"or set {ENV_TOKEN})"
)


def refusal(token: str | None, presented: str | None) -> Refusal | None:
    """Why a change step may not run with the bearer token `presented` (the server's is `token`); None:
    it may."""
    if not token:
        return "refused_not_configured"
    if presented is None:
        return "refused_no_token"
    return None if same_secret(presented, token) else "refused_bad_token"


@dataclass(frozen=True)
class WebhookAuth:
    """Who may post alerts: a bearer token, a basic-auth user and password, or both. Neither: nobody."""

    token: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_token_file(cls, path: Path | str) -> WebhookAuth:
        return cls(token=read_token_file(Path(path), "--webhook-token-file"))

    @classmethod
    def from_settings(cls, settings: TokenSettings) -> WebhookAuth:
        """--webhook-token-file, else SERVESCOPE_WEBHOOK_TOKEN (empty or unset: nobody is let in)."""
        return cls(token=webhook_token(settings))

    def allows(self, authorization: str | None) -> bool:
        scheme, value = _split(authorization)
        if scheme == "bearer" and self.token:
            return same_secret(value, self.token)
        if scheme == "basic" and self.username is not None and self.password is not None:
            try:
                user, sep, password = b64decode(value, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            user_ok = same_secret(user, self.username)
            password_ok = same_secret(password, self.password)
            return bool(sep) and user_ok and password_ok
        return False


def caller_host(peer: str | None, forwarded_for: str | None, trusted_proxies: tuple[str, ...]) -> str | None:
    """Who made a request: the socket peer, or the client a trusted proxy names (its X-Forwarded-For's
    last entry); X-Forwarded-For from anyone else is ignored."""
    if peer is None or peer not in trusted_proxies or not forwarded_for:
        return peer
    named = forwarded_for.split(",")[-1].strip()
    return named[:64] or peer
