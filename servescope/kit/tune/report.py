"""Tuning reports: the trials, the search's progress, the Pareto front, and the top candidates' curves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from servescope.kit.capacity.report import capacity_html, capacity_markdown, markdown_table
from servescope.kit.capacity.result import CapacityRun, to_json
from servescope.kit.capacity.svg import Chart
from servescope.kit.tune.strategies import Study
from servescope.kit.tune.trials import Trial, pareto_front

TOP_CURVES = 5


def trial_rows(trials: Sequence[Trial], objective: str, second: str | None) -> list[list[str]]:
    head = ["#", "configuration", "state", objective, "knee interval", second or "-", "steps", "note"]
    rows = [head]
    for t in trials:
        rows.append(
            [
                str(t.number),
                t.label,
                t.state,
                f"{t.objective:.2f}",
                f"[{t.knee[1]:.2f}, {t.knee[2]:.2f}]",
                "-" if t.second is None else f"{t.second:g}",
                str(t.steps),
                (t.reason or "")[:120],
            ]
        )
    return rows


def progress_chart(study: Study) -> Chart:
    """Each trial's objective in order, and the best so far."""
    best, running = [], 0.0
    for t in study.trials:
        running = max(running, t.objective if t.state == "complete" else 0.0)
        best.append((float(t.number), running))
    trials = [(float(t.number), t.objective) for t in study.trials]
    chart = Chart(f"Search progress ({study.strategy})", "trial", study.space.objective, lines=False)
    chart.series = [("trial", trials), ("best so far", best)]
    return chart


def pareto_chart(study: Study) -> Chart:
    chart = Chart("Pareto front", study.space.second_objective or "-", study.space.objective, lines=False)
    scored = [(t.second, t.objective) for t in study.trials if t.state == "complete" and t.second is not None]
    front = [(t.second, t.objective) for t in pareto_front(study.trials) if t.second is not None]
    chart.series = [("trials", [(x, y) for x, y in scored if math.isfinite(x)]), ("front", sorted(front))]
    return chart


def top_runs(study: Study) -> list[CapacityRun]:
    """The curves of the best trials (re-measured ones where there are)."""
    pool = study.remeasured or [t for t in study.trials if t.state == "complete"]
    ranked = sorted(pool, key=lambda t: -t.objective)[:TOP_CURVES]
    return [t.run for t in ranked if t.run is not None]


def tune_markdown(study: Study) -> str:
    space = study.space
    best = study.best
    lines = [f"# Tuning ({study.strategy}, {len(study.trials)} engine starts, space of {space.size()})", ""]
    if best is not None:
        lines += [f"Best: {best.label}: {space.objective} {best.objective:.2f}.", ""]
    lines += [markdown_table(trial_rows(study.trials, space.objective, space.second_objective)), ""]
    if study.remeasured:
        lines += ["## Top candidates measured again (fresh seeds)", ""]
        lines += [markdown_table(trial_rows(study.remeasured, space.objective, space.second_objective)), ""]
    if space.second_objective is not None:
        front = ", ".join(f"{t.label} ({t.objective:.2f}, {t.second:g})" for t in pareto_front(study.trials))
        lines += [f"Pareto front ({space.objective} up, {space.second_objective} down): {front}", ""]
    runs = top_runs(study)
    if runs:
        lines.append(
            capacity_markdown(runs, "Top candidates").replace("# Top candidates", "## Top candidates")
        )
    return "\n".join(lines) + "\n"


def tune_html(study: Study) -> str:
    runs = top_runs(study)
    extra = [progress_chart(study)]
    if study.space.second_objective is not None:
        extra.append(pareto_chart(study))
    title = f"Tuning ({study.strategy}): {len(study.trials)} engine starts"
    if not runs:
        return f"<!doctype html>\n<html><body><h1>{title}</h1><p>No trial completed.</p></body></html>\n"
    return capacity_html(runs, title, extra)


def tune_json(study: Study) -> dict[str, Any]:
    def trial(t: Trial) -> dict[str, Any]:
        data = {
            k: getattr(t, k) for k in ("number", "params", "state", "objective", "reason", "seconds", "steps")
        }
        data |= {
            "second": t.second if t.second is None or math.isfinite(t.second) else None,
            "knee": list(t.knee),
        }
        return data | {"capacity": None if t.run is None else to_json(t.run)["knee"]}

    best = study.best
    return {
        "kind": "servescope-tune",
        "strategy": study.strategy,
        "space_size": study.space.size(),
        "best": None if best is None else trial(best),
        "trials": [trial(t) for t in study.trials],
        "remeasured": [trial(t) for t in study.remeasured],
        "pareto_front": [t.number for t in pareto_front(study.trials)],
    }
