"""The registry of runbook actions: `ACTIONS[name]` is an Action with typed params, a kind and `run`.

Read actions: gpu_snapshot, process_list, memory_curve, dcgm_sample, nvlink_errors, serving_snapshot,
promql, batch_size_advice, capacity_advice. Change actions (dry-run unless executed; the reads they
rest on always run): scale_deployment (relative), cordon_node, drain_node (checks budgets and emptyDirs),
lower_max_num_seqs (prints only, always), create_silence.
"""

from __future__ import annotations

from servescope.core.promql_literal import promql_string
from servescope.runbooks.actions import (
    capacity,
    changes,
    dcgm,
    draining,
    gpu,
    nvlink,
    processes,
    promql,
    rollback,
    scaling,
    serving,
)
from servescope.runbooks.actions.base import ACTIONS, Action, ActionError, Kind, RunContext, StepResult
from servescope.runbooks.actions.params import (
    Comment,
    GpuIndex,
    GpuRef,
    HttpUrl,
    K8sLabelValue,
    K8sName,
    LabelName,
    LabelValue,
    LiteralOnly,
    ModelName,
    Params,
    Window,
)
from servescope.runbooks.actions.promql import PromQLTemplate

__all__ = [
    "ACTIONS",
    "Action",
    "ActionError",
    "Comment",
    "GpuIndex",
    "GpuRef",
    "HttpUrl",
    "K8sLabelValue",
    "K8sName",
    "Kind",
    "LabelName",
    "LabelValue",
    "LiteralOnly",
    "ModelName",
    "Params",
    "PromQLTemplate",
    "RunContext",
    "StepResult",
    "Window",
    "capacity",
    "changes",
    "dcgm",
    "draining",
    "gpu",
    "nvlink",
    "processes",
    "promql",
    "promql_string",
    "rollback",
    "scaling",
    "serving",
]
