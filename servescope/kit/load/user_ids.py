"""A stable user id on every request, from a bucketed population, for gray releases by user bucket.

User `u` of `--users` is in bucket `u mod --user-buckets`, and its id names the bucket first
(`b07-u000123`): a gateway that routes a header prefix to the canary (a Gateway API HTTPRoute header
match, an Istio VirtualService) gets whole buckets, hence a known share of the users, and a user keeps
its bucket across requests and runs. Each request draws its user from a generator seeded by `--seed`.

The answers are counted per bucket, and per revision when the gateway names the backend that answered
in a response header (`--revision-header`): `servescope_load_user_requests_total{user_bucket,
revision}` on the run's metrics port, which `servescope canary analyze` reads from Prometheus.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, field_validator

from servescope.core.settings_cli import setting
from servescope.kit.load.runner import HttpStepRunner

USER_REQUESTS = "servescope_load_user_requests_total"
BUCKET_LABEL = "user_bucket"
REVISION_HEADER_LABEL = "revision"
# An HTTP header name (RFC 9110 token).
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_BUCKET = re.compile(r"^b([0-9]+)-")
MAX_REVISION_CHARS = 64


class UserIdSettings(BaseModel):
    """Who sends each request: off unless a header is named."""

    user_id_header: str = setting(
        "",
        "--user-id-header",
        "Send a stable user id in this request header (e.g. x-user-id), so a gateway can route whole user "
        "buckets to a canary. Empty: no header.",
    )
    users: int = setting(
        1000, "--users", "Users the ids are drawn from, uniformly (seeded by --seed).", ge=1, le=10_000_000
    )
    user_buckets: int = setting(
        100,
        "--user-buckets",
        "Buckets of users: user u is in bucket u mod N and its id starts with it (b07-u000123), so a "
        "header prefix match routes a known share of the users.",
        ge=1,
        le=10_000,
    )
    revision_header: str = setting(
        "",
        "--revision-header",
        "Response header naming the revision that answered (set by the gateway per backend), counted "
        "per bucket. Empty: not read.",
    )

    @field_validator("user_id_header", "revision_header")
    @classmethod
    def _header(cls, value: str) -> str:
        if value and not _HEADER.match(value):
            raise ValueError(f"{value!r} is not an HTTP header name")
        return value


class UserIds:
    """Draws a user per request and counts the answers per bucket (and revision)."""

    def __init__(self, settings: UserIdSettings, seed: int, registry: CollectorRegistry) -> None:
        self.settings = settings
        self._draw = random.Random(seed)
        self._bucket_digits = len(str(settings.user_buckets - 1))
        self._user_digits = len(str(settings.users - 1))
        self.requests = Counter(
            USER_REQUESTS.removesuffix("_total"),
            "Requests answered, by the sender's user bucket and the revision the gateway named",
            [BUCKET_LABEL, REVISION_HEADER_LABEL],
            registry=registry,
        )

    def bucket_of(self, user: int) -> str:
        return f"{user % self.settings.user_buckets:0{self._bucket_digits}d}"

    def user_id(self, user: int) -> str:
        """The id of user `user`: its bucket, then its number."""
        return f"b{self.bucket_of(user)}-u{user:0{self._user_digits}d}"

    def next_id(self) -> str:
        return self.user_id(self._draw.randrange(self.settings.users))

    def headers(self) -> Mapping[str, str]:
        """The header on the next request: a user drawn from the population."""
        return {self.settings.user_id_header: self.next_id()}

    def answered(self, sent: Mapping[str, str], received: Mapping[str, str]) -> None:
        """Count an answer under the bucket of the user that asked and the revision that answered."""
        found = _BUCKET.match(sent.get(self.settings.user_id_header, ""))
        if found is None:
            return
        revision = ""
        if self.settings.revision_header:
            # A header value from the network: kept short, it becomes a label value.
            revision = received.get(self.settings.revision_header, "")[:MAX_REVISION_CHARS]
        self.requests.labels(found.group(1), revision).inc()

    def summary(self) -> str:
        """One line: requests answered per bucket (the busiest few) and per revision."""
        per_bucket: dict[str, float] = {}
        per_revision: dict[str, float] = {}
        for metric in self.requests.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    bucket, revision = sample.labels[BUCKET_LABEL], sample.labels[REVISION_HEADER_LABEL]
                    per_bucket[bucket] = per_bucket.get(bucket, 0) + sample.value
                    per_revision[revision or "(unnamed)"] = (
                        per_revision.get(revision or "(unnamed)", 0) + sample.value
                    )
        revisions = ", ".join(f"{name} {count:.0f}" for name, count in sorted(per_revision.items()))
        return (
            f"user buckets: {len(per_bucket)} of {self.settings.user_buckets} sent requests; "
            f"answered by revision: {revisions or 'none'}"
        )


def attach_user_ids(runner: HttpStepRunner, settings: BaseModel, seed: int) -> UserIds | None:
    """The user ids of `settings` on the runner's requests, counted into its metrics; None when off."""
    assert isinstance(settings, UserIdSettings)
    if not settings.user_id_header:
        return None
    ids = UserIds(settings, seed, runner.metrics.registry if runner.metrics else CollectorRegistry())
    runner.hooks = ids
    return ids
