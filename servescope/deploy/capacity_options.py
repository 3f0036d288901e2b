"""The options of the weekly capacity CronJob (`deploy render --capacity-url ...`); no URL, no CronJob."""

from __future__ import annotations

import re
import shlex

from pydantic import field_validator

from servescope.core.settings_cli import FixedOptions, repeated, setting
from servescope.deploy.checks import OptionalObjectName, OptionalUrl

CRON = re.compile(r"^(\S+\s+){4}\S+$")


class CapacityJobOptions(FixedOptions):
    """A weekly `servescope capacity weekly` against one staging endpoint, its baseline on a claim."""

    capacity_url: OptionalUrl = setting(
        "",
        "--capacity-url",
        "The staging endpoint (OpenAI-compatible, e.g. http://vllm.staging.svc:8000) whose knee a "
        "CronJob measures every week, compared with its baseline and remote-written to Prometheus "
        "(docs/capacity-and-tuning.md). Empty: no CronJob.",
    )
    capacity_target: str = setting(
        "staging",
        "--capacity-target",
        "Name of that endpoint: the target label of the results.",
        pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$",
    )
    capacity_schedule: str = setting(
        "0 3 * * 1", "--capacity-schedule", "When the CronJob runs (cron syntax; default Mondays at 03:00)."
    )
    capacity_slo: list[str] = repeated(
        lambda: ["ttft:0.5"], "--capacity-slo", "SLO of the weekly knee, metric:seconds (repeatable)."
    )
    capacity_args: str = setting(
        "",
        "--capacity-args",
        'More `capacity weekly` options, as one shell-quoted string (e.g. "--start-qps 8 '
        '--prompt-tokens 512 --output-tokens 128").',
    )
    capacity_pvc: OptionalObjectName = setting(
        "",
        "--capacity-pvc",
        "An existing PersistentVolumeClaim for the baseline and past runs. Empty: a 1Gi claim "
        "servescope-capacity is rendered.",
    )
    capacity_remote_write_url: OptionalUrl = setting(
        "",
        "--capacity-remote-write-url",
        "Where the results are written. Empty: kube-prometheus-stack's Prometheus, "
        "http://<fullname>-prometheus.<prometheus-namespace>.svc:9090/api/v1/write (enable its "
        "remote-write receiver).",
    )

    @field_validator("capacity_schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        if not CRON.match(value.strip()):
            raise ValueError(f"{value!r} is not a cron schedule of five fields")
        return value.strip()

    @field_validator("capacity_args")
    @classmethod
    def _args(cls, value: str) -> str:
        try:
            shlex.split(value)
        except ValueError as err:
            raise ValueError(f"{value!r}: {err}") from None
        return value
