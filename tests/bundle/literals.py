"""How a config value is written in a runbook page or a dashboard, to find copies of it.

Each threshold or bound the alerts config defines is written in one or more forms: a ratio as `70%` or
`0.7`, a latency bound as `le="0.5"` or `0.5 s`, a rate as `0.1/s`. `FORMS` names the forms of each
field; `find(text, field, value)` returns where one of them occurs. The forms are bounded so that `0.7`
does not match inside `0.75` or `10.7`, nor `5%` inside `15%`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from servescope.core.config import AlertsConfig
from servescope.core.config_text import config_value

TIMES, SIGMA = "\N{MULTIPLICATION SIGN}", "\N{GREEK SMALL LETTER SIGMA}"
# Not the tail of a longer number, a name, a change (+20%) or a factor (x0.8, with the multiplication sign).
_NOT_AFTER = rf"(?<![\w.\-+{TIMES}])"
# Not a number with a unit: `0.5 s` is a bound, `0.1/s` a rate, written in their own forms.
_NO_UNIT = rf"(?![\d]|\.\d| ?(?:s\b|ms\b|/|%|{TIMES}|x\b|GiB))"


def _decimal(value: float) -> str:
    text = f"{value:g}"
    if "." not in text:
        return ""  # an integer is written everywhere: only its forms with a unit are looked for
    # Nor a quantile: histogram_quantile(0.99, ...) is the P99, whatever the objective.
    return rf"{_NOT_AFTER}(?<!quantile\()(?<!quantile_over_time\(){re.escape(text)}0*{_NO_UNIT}"


def _percent(value: float) -> str:
    return rf"{_NOT_AFTER}{re.escape(f'{value * 100:g}')}(?:\.0+)? ?%"


def _seconds(value: float) -> str:
    number = re.escape(f"{value:g}")
    return (
        rf"{_NOT_AFTER}{number}(?:\.0+)? ?(?:s|seconds?)\b|{_NOT_AFTER}{re.escape(f'{value * 1000:g}')} ?ms\b"
    )


def _bucket(value: str) -> str:
    return rf'le="{re.escape(value)}"|le=\\"{re.escape(value)}\\"|{_seconds(float(value))}'


def _unit(unit: str, scale: float = 1) -> Callable[[float], str]:
    """The form `<value / scale> <unit>`: `1 GiB`, `0.1/s`, `500 requests` (`unit` is a regex)."""

    def form(value: float) -> str:
        return rf"{_NOT_AFTER}{re.escape(f'{value / scale:g}')} ?(?:{unit})"

    return form


_per_second = _unit(r"(?:requests )?(?:/ ?s\b|per second)")
_times = _unit(f"[x{TIMES}]")
_gib = _unit("GiB", 2**30)
_mib = _unit("MiB", 2**20)
_requests = _unit("requests")
_deviations = _unit(f"(?:daily )?(?:standard deviations|{SIGMA}|sigma)")


Form = Callable[[float], str]
RATIO: tuple[Form, ...] = (_decimal, _percent)
# field -> the forms it is written in. Durations (`_for`, windows) and the XID lists are left out: a
# duration is written in words as often as not, and XID numbers name the driver's events in prose; so are
# the counts (queue_ratio 1 is "more wait than run", where `1x` is a burn rate).
FORMS: dict[str, tuple[Callable[..., str], ...]] = {
    "gpu_saturated_ratio": RATIO,
    "gpu_saturated_sm_active_ratio": RATIO,
    "kv_pressure_ratio": RATIO,
    "kv_anomaly_sigmas": (_deviations,),
    "kv_anomaly_min_stddev": (_decimal,),
    "slo_objective": RATIO,
    "error_budget": RATIO,
    "slo_latency_le": (_bucket,),
    "slo_e2e_latency_le": (_bucket,),
    "p99_threshold_seconds": (_seconds,),
    "preemptions_per_second": (_per_second,),
    "underutilised_ratio": RATIO,
    "capacity_buffer_ratio": RATIO,
    "request_error_ratio": RATIO,
    "request_error_min_rate": (_per_second,),
    "endpoints_ratio": RATIO,
    "memory_headroom_ratio": RATIO,
    "memory_headroom_budget_share": RATIO,
    "over_budget_bytes": (_gib,),
    "over_budget_ratio": RATIO,
    "pcie_link_busy_ratio": RATIO,
    "exhaustion_seconds": (_seconds,),
    "source_stale_min_seconds": (_seconds,),
    "availability_objective": RATIO,
    "blind_share": RATIO,
    "leak_min_bytes_per_minute": (_mib,),
    "leak_min_load_stddev": (_decimal,),
    "leak_load_wander": (_decimal,),
    "capacity_regression_drop": RATIO,
    "canary.min_requests": (_requests,),
    "canary.latency_ratio": (_times,),
    "canary.slo_miss_increase": RATIO,
    "canary.error_increase": RATIO,
}


def find(text: str, field: str, cfg: AlertsConfig) -> list[str]:
    """The places `text` writes `field`'s value in `cfg` in one of its forms: `line N: <match>`."""
    value = config_value(cfg, field)
    patterns = [p for p in (form(value) for form in FORMS[field]) if p]
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern in patterns:
            found += [f"line {number}: {m.group(0)!r}" for m in re.finditer(pattern, line)]
    return found
