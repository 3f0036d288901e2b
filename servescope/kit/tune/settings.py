"""`tune run`'s options as settings: the search, the launcher that restarts the engine, the reports."""

from __future__ import annotations

from pathlib import Path

from servescope.core.settings_cli import FixedOptions, setting


class TuneRunSettings(FixedOptions):
    """One field per option of `servescope tune run`, in the order --help lists them."""

    strategy: str = setting("bayes", "--strategy", "grid, random or bayes (Optuna TPE).")
    trials: int | None = setting(None, "--trials", "Engine starts at most (default: the grid's size).")
    seed: int = setting(0, "--seed", "Seed of the random and Bayesian samplers.")
    prune: bool = setting(True, "--prune/--no-prune", "Stop a trial whose early steps fall below the best.")
    remeasure: int = setting(
        3, "--remeasure", "Measure the top N again with fresh seeds (pruned ones that may tie included)."
    )
    compare_random: bool = setting(
        False,
        "--compare-random/--no-compare-random",
        "After a Bayesian (or grid) study, run a random one with the same budget and report both.",
    )
    calibrate: bool = setting(
        True,
        "--calibrate/--no-calibrate",
        "HTTP launchers: measure this client's ceiling for the space's workload before the first trial.",
    )
    storage: str | None = setting(None, "--storage", "Optuna storage, e.g. sqlite:///tune.db (resumable).")
    study_name: str = setting("servescope-tune", "--study-name", "Name of the study in the storage.")
    # The launcher and what each kind needs (make_launcher names what is missing).
    launcher: str = setting("simulated", "--launcher", "simulated, command or kubernetes.")
    url: str | None = setting(None, "--url", "Endpoint to load (command and kubernetes).")
    command: str | None = setting(None, "--command", "Engine command with a {flags} word.")
    health_url: str | None = setting(None, "--health-url", "Polled until 200 after each start.")
    deployment: str | None = setting(None, "--deployment", "Deployment to patch (kubernetes).")
    namespace: str | None = setting(None, "--namespace", "Its namespace (kubernetes).")
    base_args: str | None = setting(None, "--base-args", "Container args kept before the flags.")
    execute: bool = setting(
        False, "--execute/--no-execute", "Apply the Kubernetes patches (default: print them)."
    )
    out: Path | None = setting(None, "--out", "Write tune.json, .md and .html here.")
