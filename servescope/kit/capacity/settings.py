"""`capacity run`'s options as settings: the engine to load, the search, and the fleet sizing."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servescope.core.settings_cli import setting


class CapacityRunSettings(BaseModel):
    """One field per option of `servescope capacity run`, in the order --help lists them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    simulate: bool = setting(False, "--simulate", "Load the simulated engine (virtual clock).")
    url: str | None = setting(None, "--url", "OpenAI-compatible endpoint to load over HTTP.")
    slo: list[str] | None = setting(
        None, "--slo", "metric:seconds, repeatable (ttft, e2e, itl, tpot); all must hold."
    )
    quantile: float = setting(0.99, "--quantile", "The SLO percentile, as a fraction.")
    duration: float = setting(30.0, "--duration", "Measured seconds per load step.")
    warmup: float = setting(5.0, "--warmup", "Warm-up seconds before each step (simulated engine).")
    repeats: int = setting(3, "--repeats", "Searches with different seeds: the knee's interval.")
    start_qps: float = setting(1.0, "--start-qps", "First offered rate; doubled until a step fails.")
    max_qps: float = setting(1024.0, "--max-qps", "Highest offered rate tried.")
    resolution: float = setting(0.05, "--resolution", "Bisect until the bracket is this share of its top.")
    mode: str = setting("open", "--mode", "open (arrivals on a schedule) or closed (clients wait).")
    seed: int = setting(0, "--seed", "Seed of the first repeat.")
    peak_qps: float | None = setting(None, "--peak-qps", "Size the fleet for this peak rate.")
    buffer: float = setting(0.2, "--buffer", "Headroom kept below the knee's lower bound.")
    gpus_per_replica: int = setting(1, "--gpus-per-replica", "GPUs one engine replica uses.")
    set_flag: list[str] | None = setting(None, "--set", "Simulated engine flag name=value, repeatable.")
    label: str = setting("baseline", "--label", "Name of this configuration in reports.")
    out: Path | None = setting(None, "--out", "Write capacity.json, .md and .html here.")
