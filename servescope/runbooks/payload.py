"""The Alertmanager webhook notification (version "4", Alertmanager 0.25+): what the webhook accepts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from servescope.core.errors import validation_message


class AlertmanagerAlert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = Field(min_length=1, max_length=64)  # noqa: N815 (Alertmanager's names)
    endsAt: str = Field("", max_length=64)  # noqa: N815
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = Field(min_length=1, max_length=128)


class AlertmanagerPayload(BaseModel):
    """An Alertmanager webhook notification, version "4"; fields we do not use are ignored."""

    model_config = ConfigDict(extra="ignore")

    version: Literal["4"]
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    status: Literal["firing", "resolved"] | None = None
    receiver: str = ""
    groupLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[AlertmanagerAlert]


def payload_error(exc: ValidationError) -> str:
    """One line naming the first field of the notification that was refused."""
    return validation_message(
        exc, lambda loc: ".".join(map(str, loc)) or "body", prefix="invalid Alertmanager payload: "
    )
