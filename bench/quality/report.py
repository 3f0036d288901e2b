"""The benchmark's results as JSON and as the Markdown page people read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .evaluate import LEAK_ALERTS, AlertScore, Episode, Scores
from .scenarios import Plan
from .targets import LEAK_TARGET_RATE, Target, minutes, ratio

METHOD = """## Method

- **Node library.** Each scenario runs on a simulated node (2 GPUs, one engine per GPU, unless it says
  otherwise: one TP=8 engine on 8 GPUs, an engine serving SGLang's /metrics) on a fake clock, through the
  exporter's own code: the NVML collector over the simulator's pynvml module (every 5 s), the vLLM source
  (parser, normaliser, series export, engine-GPU join, endpoint health), the derived source, the source
  runners and the publisher. Every 30 s the publisher's exposition is one scrape (`instance` the node's
  name, as the ServiceMonitor makes it; `job="servescope"`); kube-state-metrics lists the node. Exporter
  topology.
- **Fleet library.** A Kubernetes fleet as data (`bench/quality/fleet_model.py`): nodes, vLLM pods going
  through loading, serving, crash loops, hangs, deletion; each model's load and lognormal latencies (so the
  share of requests over any bound is exact); the series each topology gives Prometheus: the exporter's
  (engines found, reported down while their pod is listed, dropped when it is gone, as the exporter's
  retention does) or Prometheus' own scrapes of every pod (job `vllm`), kube-state-metrics in both (a
  scrape late: an engine stops before it says its pod is being deleted).
- **Faults** the production simulator lacks (`bench/quality/faults.py`): NVML failing node-wide, a hung
  NVML source, a scheduler that stops, a KV gauge held high on an idle engine, an exporter rollout, an
  NVLink link down, a PCIe link retrained at fewer lanes, each engine on its own load curve.
- **Rules.** promtool's rule engine (`promtool test rules`, the code Prometheus runs: recording rules in
  the bundle's group order, `for`, `keep_firing_for`, staleness) evaluates every rule of the bundle built
  for the run's topology every 30 s over its series, and writes `ALERTS`; the firing episodes are read
  back from `ALERTS_FOR_STATE` (`bench/quality/rule_engine.py`). Nothing re-implements a rule.
- **Pages.** Each run's firing alerts are replayed in order into a real Alertmanager loaded with the
  bundle's configuration: the pager's groups and each alert's inhibition are Alertmanager's own. A page is
  a pager group that gets an alert no inhibition mutes.
- **Truth.** Incident windows are conditions on the ground truth: noise-free GPU load over the configured
  ratio for at least the alert's `for`, KV usage over its ratio, a leak from its start to the recorded OOM,
  an engine's death to the end, fixed fault windows; an SLO's burn from the requests' real latencies (the
  fleet's lognormal shares over the bound, the node's engine histograms) and the endpoints' real states,
  against the same pairs of windows and rates as the pages; an alert that fires where the truth burns at
  0.7 of the rate is correct, not required. An episode is true when it starts inside a window that
  expects or accepts its alert and carries the window's labels (a grace after the end; an SLO's rates may
  lead its truth by 5 minutes); anything else is a false positive.
- **Day-long runs.** `ServescopeKvCacheAnomaly` and `ServescopeHealthyEndpointsLow` compare with the
  value 23 hours earlier, the leak verdict fits a day: a few scenarios simulate a day of history first.
- **Not exercised.** The ECC, row-remap, thermal, PCIe replay and DCGM-based alerts have no scenario and
  are evaluated only for false positives. `info` alerts are routed nowhere and are listed, not scored.
"""


def to_json(
    scores: Scores, plans: list[Plan], seeds: list[int], meta: dict[str, Any], found: list[Target]
) -> dict[str, Any]:
    return {
        **meta,
        "seeds": seeds,
        "scenarios": [_plan_json(p) for p in plans],
        "targets": [{"target": t.name, "value": t.value, "met": t.met} for t in found],
        "alerts": [_alert_json(s) for s in sorted(scores.alerts.values(), key=lambda s: s.alert)],
        "false_positives": [_episode_json(e) for e in scores.false_positives],
        "true_positives": [_episode_json(e) for e in scores.true_positives],
        "missed": [vars(m) for m in scores.missed],
        "leak_lead_times": [
            {**vars(lt), "lead_s": lt.lead} for lt in sorted(scores.lead_times, key=_lead_order)
        ],
        "info_episodes": [_episode_json(e) for e in scores.info],
    }


def _plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "name": plan.name,
        "description": plan.description,
        "duration_s": plan.duration,
        "gpu_model": plan.gpu_model,
        "layout": [list(group) for group in plan.layout],
        "incidents": [_attributes(i, "name", "expect", "accept", "gpu", "engine") for i in plan.incidents],
    }


def _alert_json(s: AlertScore) -> dict[str, Any]:
    scored = ("episodes", "true", "repeats", "false", "precision", "incidents", "detected", "recall")
    return {
        **_attributes(s, "alert", "severity", *scored),
        "latency_p50_s": s.latency_p50,
        "latency_max_s": s.latency_max,
    }


def _attributes(obj: object, *names: str) -> dict[str, Any]:
    """`obj`'s attributes under their own names (tuples as JSON lists), in the order given."""
    values = {name: getattr(obj, name, None) for name in names}
    return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items()}


def _episode_json(e: Episode) -> dict[str, Any]:
    return {
        **_attributes(e, "alert", "scenario", "seed"),
        "start_s": e.start,
        "end_s": e.end,
        "labels": dict(e.labels),
    }


def _lead_order(lt: Any) -> tuple[str, int, str]:
    return (lt.scenario, lt.seed, lt.alert)


# --- Markdown -----------------------------------------------------------------------------------------


def markdown(
    scores: Scores, plans: list[Plan], seeds: list[int], meta: dict[str, Any], found: list[Target]
) -> str:
    parts = [
        "# Alert quality benchmark\n",
        _headline(meta["summary"], meta["timing_s"]["total"]),
        f"Machine: {meta['machine']}\n",
        _summary(plans, seeds, meta),
        _targets_table(found),
        _alerts_table(scores),
        _leads_table(scores),
        _false_positives(scores.false_positives),
        _missed(scores),
        _info(scores.info),
        _scenarios(plans),
        METHOD,
    ]
    return "\n".join(parts)


def _headline(figures: dict[str, float | None], wall: float) -> str:
    rows = [
        ("precision, all scored episodes", ratio(figures["precision"])),
        ("recall, all expected detections", ratio(figures["recall"])),
        ("false positives", f"{figures['false_positives']:g}"),
        (
            f"leak alert lead before OOM at {LEAK_TARGET_RATE:g} MiB/min (worst seed)",
            minutes(_seconds(figures)),
        ),
        ("wall time", f"{wall:.0f} s"),
    ]
    return "| measure | value |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"


def _seconds(figures: dict[str, float | None]) -> float | None:
    minutes = figures["leak_lead_minutes"]
    return None if minutes is None else minutes * 60


def _summary(plans: list[Plan], seeds: list[int], meta: dict[str, Any]) -> str:
    hours = sum(p.duration for p in plans) * len(seeds) / 3600
    timing = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in meta["timing_s"].items())
    stale = " (STALE: differs from a fresh build)" if meta["rules"]["stale"] else ""
    return (
        f"{len(plans)} scenarios x {len(seeds)} seeds ({', '.join(map(str, seeds))}): "
        f"{hours:.1f} simulated hours, "
        f"{meta['samples']:,} node samples. Rules: `{meta['rules']['file']}`{stale} (and its PodMonitor "
        f"variant), evaluated by promtool {meta['promtool']}'s rule engine every {meta['step_s']:g} s. "
        f"Scrapes every {meta['scrape_s']:g} s, NVML every {meta['nvml_s']:g} s.\n\n"
        f"Wall time: {timing}.\n"
    )


def _targets_table(found: list[Target]) -> str:
    rows = [f"| {t.name} | {t.value} | {'met' if t.met else 'NOT MET'} |" for t in found]
    return "## Targets\n\n| target | result | |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n"


def _alerts_table(scores: Scores) -> str:
    rows, silent = [], []
    for s in sorted(scores.alerts.values(), key=lambda s: (s.severity == "info", s.alert)):
        if not s.episodes and not s.incidents:
            silent.append(f"`{s.alert}`")
            continue
        rows.append(
            f"| `{s.alert}` | {s.severity} | {s.episodes} | {s.true} | {s.repeats} | {s.false} | "
            f"{ratio(s.precision)} | "
            f"{s.detected}/{s.incidents} | {ratio(s.recall)} | {minutes(s.latency_p50)} | "
            f"{minutes(s.latency_max)} |"
        )
    header = (
        "## Per alert\n\nEpisodes: firing episodes (one notification each); true: inside an incident that "
        "expects or accepts the alert; repeats: true episodes of a series that had already fired for the "
        "same incident (the alert resolved and fired again: flapping). Latency: first firing minus the "
        "incident's start.\n\n"
        "| alert | severity | episodes | true | repeats | false | precision | detected | recall | "
        "latency p50 | latency max |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    tail = f"\nEvaluated, never fired and never expected: {', '.join(silent)}.\n" if silent else ""
    return header + "\n".join(rows) + "\n" + tail


def _leads_table(scores: Scores) -> str:
    by_run: dict[tuple[str, int], dict[str, Any]] = {}
    for lt in scores.lead_times:
        row = by_run.setdefault((lt.scenario, lt.seed), {"oom": lt.oom_at})
        row[lt.alert] = lt.lead
    rows = [
        f"| {scenario} | {seed} | {minutes(row['oom'])} | "
        + " | ".join(minutes(row.get(alert), missing="never") for alert in LEAK_ALERTS)
        + " |"
        for (scenario, seed), row in sorted(by_run.items())
    ]
    return (
        "## Leak lead time before the OOM\n\nOOM: simulated time of the engine's death; leads: OOM minus "
        "the first firing during the leak.\n\n| scenario | seed | OOM at | "
        + " | ".join(f"`{a}`" for a in LEAK_ALERTS)
        + " |\n| --- | --- | --- | --- | --- |\n"
        + "\n".join(rows)
        + "\n"
    )


def _false_positives(episodes: list[Episode]) -> str:
    if not episodes:
        return "## False positives\n\nNone.\n"
    rows = [
        f"| `{e.alert}` | {e.scenario} | {e.seed} | {minutes(e.start)} | {minutes(e.end)} | {_labels(e)} |"
        for e in sorted(episodes, key=lambda e: (e.alert, e.scenario, e.seed, e.start))
    ]
    return (
        "## False positives\n\n| alert | scenario | seed | from | to | labels |\n"
        "| --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )


def _missed(scores: Scores) -> str:
    if not scores.missed:
        return "## Missed incidents\n\nNone.\n"
    rows = [
        f"| `{m.alert}` | {m.incident} | {m.scenario} | {m.seed} | {minutes(m.start)} - {minutes(m.end)} |"
        for m in scores.missed
    ]
    return (
        "## Missed incidents\n\n| alert | incident | scenario | seed | window |\n"
        "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )


def _info(episodes: list[Episode]) -> str:
    if not episodes:
        return "## Info alerts (routed nowhere, not scored)\n\nNone fired.\n"
    counts = Counter((e.alert, e.scenario) for e in episodes)
    rows = [f"| `{alert}` | {scenario} | {n} |" for (alert, scenario), n in sorted(counts.items())]
    return (
        "## Info alerts (routed nowhere, not scored)\n\n| alert | scenario | episodes (all seeds) |\n"
        "| --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )


def _scenarios(plans: list[Plan]) -> str:
    rows = []
    for p in plans:
        incidents = "; ".join(
            f"{i.name}: "
            + ", ".join(f"`{a}`" for a in i.expect)
            + (f" (+{len(i.accept)} accepted)" if i.accept else "")
            for i in p.incidents
            if i.expect
        )
        rows.append(
            f"| {p.name} | {p.gpu_model} | {minutes(p.duration)} | {p.description} | {incidents or 'none'} |"
        )
    accepted = sorted({a for p in plans for i in p.incidents if not i.expect for a in i.accept})
    return (
        "## Scenarios\n\n| scenario | GPU | length | what happens | incidents: expected alerts |\n"
        "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n\n"
        "Every node scenario also carries latency incidents judged from the engines' own histograms (the SLO "
        "breached while more than its 1 % budget of the last 30 minutes' requests were over the bound; P99 "
        "over its threshold over 5 minutes): they accept " + ", ".join(f"`{a}`" for a in accepted) + ". The "
        "fleet scenarios state their SLO incidents from the truth (see Method).\n"
    )


def _labels(e: Episode) -> str:
    return ", ".join(f"{k}={v}" for k, v in e.labels if k not in ("hostname", "uuid")) or "-"
