"""Which endpoints that discovery no longer finds stay reported (down), and which go at once.

An engine whose pod the kubelet no longer lists was deleted: a rollout replaced it, a scale-down removed
it, it moved to another node. Its endpoint is dropped at once, with its series: reporting it down would
page for a planned change. An engine whose pod is still listed crashed in place (a crash loop keeps the
pod and its GPUs): it stays, down, for as long as the pod does. Without the kubelet's answer (no
pod-resources socket, a GPU shared by several pods) the pod is unknown: the endpoint stays down for
GRACE_SECONDS after its last success, long enough for ServescopeServingEndpointDown to fire.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

GRACE_SECONDS = 900.0
Pod = tuple[str, str]  # namespace, name


@dataclass(frozen=True, slots=True)
class Lost:
    """An endpoint discovery found before and not now: its last success and the pod it was served from."""

    url: str
    last_success: float  # unix seconds; 0 when it never answered
    pod: Pod | None  # None when the kubelet never named one


def kept(lost: Lost, now: float, listed: frozenset[Pod] | None, serving: Collection[Pod]) -> bool:
    """Whether `lost` stays reported (down). `listed`: the pods the kubelet lists now (None: unknown);
    `serving`: the pods of the endpoints discovery finds now (a pod recreated under its name, at a new
    address, serves from there)."""
    if lost.pod is not None and listed is not None:
        return lost.pod in listed and lost.pod not in serving
    return bool(lost.last_success) and now - lost.last_success < GRACE_SECONDS
