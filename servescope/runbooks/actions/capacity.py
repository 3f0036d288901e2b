"""`capacity_advice`: utilisation of the exporter's GPUs and the spare capacity left for bursts."""

from __future__ import annotations

import math
from typing import Any

from servescope.runbooks.actions.base import RunContext, StepResult, action
from servescope.runbooks.actions.metrics import Metrics, scrape
from servescope.runbooks.actions.params import NoParams
from servescope.runbooks.actions.text import percent, table

SPARE_BUFFER = 0.2  # the operators keep 20% of the fleet's GPU capacity spare for bursts


def _gpus_up(metrics: Metrics) -> list[dict[str, Any]]:
    """The utilisation of every GPU that is up."""
    up = {
        (s.labels.get("gpu"), s.labels.get("uuid")) for s in metrics.get("servescope_gpu_up") if s.value == 1
    }
    return [
        {
            "gpu": s.labels.get("gpu"),
            "uuid": s.labels.get("uuid"),
            "hostname": s.labels.get("hostname"),
            "utilization_ratio": s.value,
        }
        for s in metrics.get("servescope_gpu_utilization_ratio")
        if (s.labels.get("gpu"), s.labels.get("uuid")) in up
    ]


def _lines(data: dict[str, Any]) -> list[str]:
    mean, spare, needed, busiest = (
        data["mean_utilization_ratio"],
        data["spare_ratio"],
        data["additional_gpus_needed"],
        data["busiest"],
    )
    verdict = (
        f"BELOW the {percent(SPARE_BUFFER)} buffer: add about {needed} GPU(s) (workers take 3-5 min to come "
        "up) or shed load; lowering the batch size acts immediately but costs throughput"
        if spare < SPARE_BUFFER
        else f"within the {percent(SPARE_BUFFER)} buffer kept for bursts"
    )
    gpus = data["gpus"]
    return [
        f"{len(gpus)} GPU(s) up on this exporter, mean utilisation {percent(mean)}, spare {percent(spare)}: "
        + verdict,
        f"  busiest: GPU {busiest['gpu']} on {busiest['hostname']} at "
        f"{percent(busiest['utilization_ratio'])}",
        table(
            ["gpu", "hostname", "utilisation"],
            [[str(g["gpu"]), str(g["hostname"]), percent(g["utilization_ratio"])] for g in gpus],
        ),
        "  note: one exporter sees one node; the fleet-wide figure is "
        "1 - avg(servescope_gpu_utilization_ratio) in Prometheus.",
    ]


@action("capacity_advice", "read", NoParams)
def capacity_advice(params: NoParams, ctx: RunContext) -> StepResult:
    """Utilisation of the exporter's GPUs and the spare capacity left against the 20% burst buffer."""
    gpus = _gpus_up(scrape(ctx))
    if not gpus:
        return StepResult(
            ok=False,
            title="Capacity",
            output="no GPU that is up reports utilisation on this exporter",
            data={"gpus": []},
        )
    total = sum(g["utilization_ratio"] for g in gpus)
    mean = total / len(gpus)
    spare = 1.0 - mean
    data = {
        "gpus": gpus,
        "gpu_count": len(gpus),
        "mean_utilization_ratio": mean,
        "spare_ratio": spare,
        "buffer_ratio": SPARE_BUFFER,
        "below_buffer": spare < SPARE_BUFFER,
        # GPUs needed so that the same load leaves the buffer spare: load / (1 - buffer).
        "additional_gpus_needed": max(0, math.ceil(total / (1.0 - SPARE_BUFFER) - 1e-9) - len(gpus)),
        "busiest": max(gpus, key=lambda g: g["utilization_ratio"]),
    }
    return StepResult(ok=True, title="Spare GPU capacity", output="\n".join(_lines(data)), data=data)
