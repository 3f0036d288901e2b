"""Tuning reports: the trials (in every format: infeasible ones with the engine's last log lines, pruned
ones with the step that pruned them), ties named as ties, the search's progress (beside a random
search's when asked), the Pareto front, and the top candidates' curves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from servescope.core.html import document, render
from servescope.core.svg import Chart, Series
from servescope.kit.capacity.report import capacity_html, capacity_markdown, markdown_table
from servescope.kit.capacity.result import CapacityRun, to_json
from servescope.kit.tune.strategies import Study
from servescope.kit.tune.trials import Trial, pareto_front

TOP_CURVES = 5
TEMPLATES = "servescope.kit.tune"


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
                " / ".join(line.strip() for line in (t.reason or "").splitlines() if line.strip())[:300],
            ]
        )
    return rows


def best_so_far(trials: Sequence[Trial]) -> list[tuple[float, float]]:
    best, out = 0.0, []
    for index, t in enumerate(trials):
        best = max(best, t.objective if t.state == "complete" else 0.0)
        out.append((float(index), best))
    return out


def headline(study: Study) -> list[str]:
    """The best, the configurations tied with it, and the random search beside, in sentences."""
    tied, objective = study.tied(), study.space.objective
    lines = []
    if tied:
        best = tied[0]
        lines.append(
            f"Best: {best.label}: {objective} {best.objective:.2f} [{best.knee[1]:.2f}, {best.knee[2]:.2f}]."
        )
    if len(tied) > 1:
        others = "; ".join(
            f"{t.label} ({t.objective:.2f} [{t.knee[1]:.2f}, {t.knee[2]:.2f}])" for t in tied[1:]
        )
        lines.append(
            f"Tied with it: {others}. Their knee intervals overlap the best's: the measurement cannot tell "
            "them apart (measure them again, or longer, to separate them)."
        )
    if study.random_trials:
        ours, theirs = best_so_far(study.trials), best_so_far(study.random_trials)
        lines.append(
            f"{study.strategy} search: best {ours[-1][1]:.2f} after {len(study.trials)} starts (first "
            f"reached at start {_first(ours) + 1}); random search with the same budget: best "
            f"{theirs[-1][1]:.2f} (first reached at start {_first(theirs) + 1})."
        )
    return lines


def _first(curve: list[tuple[float, float]]) -> int:
    return next(index for index, (_, value) in enumerate(curve) if value == curve[-1][1])


def progress_chart(study: Study) -> Chart:
    """Each trial's objective in order, and the best so far (and a random search's, when run beside)."""
    trials = [(float(index), t.objective) for index, t in enumerate(study.trials)]
    chart = Chart(f"Search progress ({study.strategy})", "trial", study.space.objective, join=False)
    chart.series = [Series("trial", trials), Series("best so far", best_so_far(study.trials))]
    if study.random_trials:
        chart.series.append(Series("random search, best so far", best_so_far(study.random_trials)))
    return chart


def pareto_chart(study: Study) -> Chart:
    chart = Chart("Pareto front", study.space.second_objective or "-", study.space.objective, join=False)
    scored = [(t.second, t.objective) for t in study.trials if t.state == "complete" and t.second is not None]
    front = [(t.second, t.objective) for t in pareto_front(study.trials) if t.second is not None]
    chart.series = [
        Series("trials", [(x, y) for x, y in scored if math.isfinite(x)]),
        Series("front", sorted(front)),
    ]
    return chart


def top_runs(study: Study) -> list[CapacityRun]:
    """The curves of the best trials (re-measured ones where there are)."""
    pool = study.remeasured or [t for t in study.trials if t.state == "complete"]
    ranked = sorted(pool, key=lambda t: -t.objective)[:TOP_CURVES]
    return [t.run for t in ranked if t.run is not None]


def tune_markdown(study: Study) -> str:
    space = study.space
    lines = [f"# Tuning ({study.strategy}, {len(study.trials)} engine starts, space of {space.size()})", ""]
    lines += [*headline(study), ""]
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
    space = study.space
    tables = [("Trials", trial_rows(study.trials, space.objective, space.second_objective))]
    if study.remeasured:
        tables.append(
            (
                "Top candidates measured again",
                trial_rows(study.remeasured, space.objective, space.second_objective),
            )
        )
    if not runs:
        return f"{document(title, render(TEMPLATES, 'no-trial.html', title=title, tables=tables))}\n"
    return capacity_html(runs, title, extra, tables=tables, lead=headline(study))


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
        "tied": [t.number for t in study.tied()[1:]],
        "trials": [trial(t) for t in study.trials],
        "remeasured": [trial(t) for t in study.remeasured],
        "random": [trial(t) for t in study.random_trials],
        "pareto_front": [t.number for t in pareto_front(study.trials)],
    }
