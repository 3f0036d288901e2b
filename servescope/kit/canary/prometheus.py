"""Instant queries against Prometheus at one evaluation time, each answer bounded in time and size."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from servescope.core.addresses import address_policy
from servescope.core.decoding import FetchError
from servescope.core.errors import ServescopeError
from servescope.core.http_client import BoundedClient
from servescope.core.promql_literal import promql_string

# The analysis asks for a few dozen short vectors; an answer this large is not one of them.
MAX_ANSWER_BYTES = 4 * 2**20

Sample = tuple[dict[str, str], float]


class PrometheusError(ServescopeError):
    """Prometheus could not be asked, or refused a query; the message names the URL and the query."""

    reason = "prometheus_failed"


@functools.cache
def _client() -> BoundedClient:
    """One bounded client for the process (total deadline, decoded-size cap, no metadata addresses)."""
    return BoundedClient(timeout=10.0, max_bytes=MAX_ANSWER_BYTES, address_policy=address_policy)


def literal(value: str) -> str:
    """`value` as a PromQL string literal: a model or revision name never becomes PromQL."""
    return promql_string(value)


@dataclass(frozen=True)
class Prometheus:
    """The HTTP API at `url`, every query evaluated at unix time `at`."""

    url: str
    at: float
    timeout_s: float = 10.0

    def vector(self, query: str) -> list[Sample]:
        """The instant vector `query` evaluates to: (labels, value) per series; NaN values left out."""
        endpoint = self.url.rstrip("/") + "/api/v1/query"
        params = {"query": query, "time": f"{self.at:.3f}"}
        try:
            answer = _client().request("GET", endpoint, params=params, timeout=self.timeout_s)
            body: Any = answer.json()
        except FetchError as exc:
            if exc.reason in ("connect", "refused"):
                raise PrometheusError(f"cannot reach Prometheus at {self.url}: {exc}") from None
            raise PrometheusError(f"Prometheus at {self.url}: {exc}") from None
        except ValueError as exc:
            raise PrometheusError(f"Prometheus at {self.url}: {exc}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else str(body)[:200]
            raise PrometheusError(f"Prometheus at {self.url} refused {query[:200]!r}: {error}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise PrometheusError(f"{query[:200]!r}: expected a vector, got {data.get('resultType')}")
        return [sample for item in data.get("result") or [] if (sample := _sample(item)) is not None]

    def by(self, query: str, label: str) -> dict[str, float]:
        """{value of `label`: value} of a vector with one series per value of `label`."""
        return {labels.get(label, ""): value for labels, value in self.vector(query)}

    def scalar(self, query: str) -> float | None:
        """The value of a vector of at most one series; None when it is empty."""
        found = self.vector(query)
        return found[0][1] if found else None


def _sample(item: Any) -> Sample | None:
    if not isinstance(item, dict):
        return None
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
        return None
    try:
        number = float(value[1])
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return None
    return {str(k): str(v) for k, v in metric.items()}, number
