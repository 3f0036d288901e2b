"""Who may do what: the change-step bearer token and the webhook's token (or basic auth), checked one way.

Tokens are compared in constant time. A token is read from its file when one is given, else from its
setting; with neither, nobody is let in (change steps are refused, the webhook refuses every post).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from base64 import b64decode
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from servescope.core.errors import ServescopeError
from servescope.runbooks.settings import ENV_TOKEN, TokenSettings

REALM = 'Bearer realm="servescope", Basic realm="servescope"'


class TokenFileError(ServescopeError, ValueError):
    """A token file that cannot be read or is empty; the message names the flag and the file."""

    reason = "token_file"


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


@dataclass(frozen=True)
class ChangeTokens:
    """The change-step tokens and the name each stands for (what the audit trail records as who)."""

    names: tuple[tuple[str, str], ...]  # (name, token)

    def identify(self, presented: str) -> str | None:
        """The name of the token presented, None when it is none of them (every one compared, in
        constant time, so the time taken does not tell which came close)."""
        found = None
        for name, token in self.names:
            if same_secret(presented, token) and found is None:
                found = name
        return found


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


def parse_tokens(text: str, where: str) -> ChangeTokens:
    """A token file: `name:token` per line (# comments and blank lines skipped), or one bare token (named
    `token`), as a Secret created with `--from-literal=change-token=...` holds it."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if len(lines) == 1 and ":" not in lines[0]:
        return ChangeTokens((("token", lines[0]),))
    names: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        name, sep, token = line.partition(":")
        if not sep or _NAME.fullmatch(name.strip()) is None or not token.strip():
            raise TokenFileError(
                f"{where}: entry {number}: expected NAME:TOKEN (a name of letters, digits, ._@-)"
            )
        if name.strip() in names:
            raise TokenFileError(f"{where}: the name {name.strip()!r} is given twice")
        if len(token.strip()) < 16:
            raise TokenFileError(f"{where}: the token of {name.strip()!r} is shorter than 16 characters")
        names[name.strip()] = token.strip()
    return ChangeTokens(tuple(names.items()))


def change_tokens(settings: TokenSettings) -> ChangeTokens | None:
    """The tokens change steps need: --token-file, else --token (SERVESCOPE_RUNBOOK_TOKEN); None: refused."""
    if settings.token_file is not None:
        return parse_tokens(
            read_token_file(settings.token_file, "--token-file"), f"--token-file {settings.token_file}"
        )
    value = (settings.token or "").strip()
    return parse_tokens(value, "--token") if value else None


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


def refusal(tokens: ChangeTokens | None, presented: str | None) -> tuple[Refusal | None, str | None]:
    """(why a change step may not run with the bearer token `presented`, None when it may; the name of
    the token when it may)."""
    if tokens is None:
        return "refused_not_configured", None
    if presented is None:
        return "refused_no_token", None
    name = tokens.identify(presented)
    return (None, name) if name is not None else ("refused_bad_token", None)


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


Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def trusted_networks(entries: list[str]) -> Networks:
    """--trusted-proxy entries (addresses or CIDRs) as networks."""
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _trusted(address: str, trusted: Networks) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed.version == net.version and parsed in net for net in trusted)


def caller_host(peer: str | None, forwarded_for: list[str], trusted: Networks) -> str | None:
    """Who made a request: the socket peer, or, when the peer is a trusted proxy, the rightmost address
    of X-Forwarded-For (all its header lines, in order: a proxy appends its own line) that is not a
    trusted proxy itself. A client may write anything at the left of the header; only what trusted
    proxies appended is believed. An entry that is not an IP address stops the walk: the last trusted
    hop is named, marked so."""
    if peer is None or not forwarded_for or not _trusted(peer, trusted):
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
    last = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return f"{last} (X-Forwarded-For entry {hop[:40]!r} is not an address)"
        if not _trusted(hop, trusted):
            return hop
        last = hop
    return last
