"""`capacity run`'s options as settings: the engine to load, the search, the client, and the sizing."""

from __future__ import annotations

from pathlib import Path

from servescope.core.settings_cli import FixedOptions, setting


class CapacityRunSettings(FixedOptions):
    """One field per option of `servescope capacity run`, in the order --help lists them."""

    simulate: bool = setting(False, "--simulate", "Load the simulated engine (virtual clock).")
    url: str | None = setting(None, "--url", "OpenAI-compatible endpoint to load over HTTP.")
    slo: list[str] | None = setting(
        None, "--slo", "metric:seconds, repeatable (ttft, e2e, itl, tpot); all must hold."
    )
    quantile: float = setting(0.99, "--quantile", "The SLO percentile, as a fraction.")
    duration: float = setting(30.0, "--duration", "Measured seconds per load step (one part of it).")
    min_requests: int = setting(
        1000,
        "--min-requests",
        "Each part of a step lasts long enough for this many requests (at least --duration): near "
        "capacity slow requests come in clusters a short part misses.",
    )
    max_parts: int = setting(
        4,
        "--max-parts",
        "A step near the knee is measured again, in parts pooled together, until its quantile's "
        "confidence interval excludes the bound, or it has this many parts (a step near its bound is "
        "decided with 3 at least).",
    )
    confidence: float = setting(0.95, "--confidence", "Confidence of each step's quantile interval.")
    warmup: float = setting(5.0, "--warmup", "Warm-up seconds at the step's rate before each step.")
    repeats: int = setting(1, "--repeats", "Searches with different seeds, pooled into one interval.")
    start_qps: float = setting(1.0, "--start-qps", "First offered rate; doubled until a step misses.")
    max_qps: float = setting(1024.0, "--max-qps", "Highest offered rate tried.")
    resolution: float = setting(0.05, "--resolution", "Bisect until the bracket is this share of its top.")
    probe_qps: float | None = setting(
        None, "--probe-qps", "Also measure this rate (powered), for `capacity compare` against a baseline."
    )
    probe_share: float | None = setting(
        None,
        "--probe-share",
        "Without --probe-qps: also measure this share of the knee just found, recorded as the run's probe "
        "rate (a baseline for `compare`; the weekly job uses 0.9).",
    )
    probe_from: Path | None = setting(
        None, "--probe-from", "capacity.json of a baseline: measure its probe rate (as the weekly job does)."
    )
    mode: str = setting("open", "--mode", "open (arrivals on a schedule) or closed (clients wait).")
    seed: int = setting(0, "--seed", "Seed of the first repeat.")
    max_lag: float = setting(
        0.0,
        "--max-lag",
        "Schedule-lag p99 above which a step is the client's, not the engine's, seconds. 0: a tenth of "
        "the tightest SLO bound (lag adds to every latency measured from the schedule).",
    )
    timeout: float = setting(30.0, "--timeout", "Per-request timeout, seconds.")
    calibrate: bool = setting(
        True,
        "--calibrate/--no-calibrate",
        "With --url: measure this client's ceiling for the run's request shape first; steps above 70 % of "
        "it are the client's.",
    )
    locust_workers: int = setting(
        0,
        "--locust-workers",
        "With --url: measure a step the client could not drive again through this many Locust workers. "
        "0: again in this process.",
    )
    peak_qps: float | None = setting(None, "--peak-qps", "Size the fleet for this peak rate.")
    buffer: float = setting(0.2, "--buffer", "Headroom kept below the knee's lower bound.")
    gpus_per_replica: int = setting(1, "--gpus-per-replica", "GPUs one engine replica uses.")
    set_flag: list[str] | None = setting(None, "--set", "Simulated engine flag name=value, repeatable.")
    label: str = setting("baseline", "--label", "Name of this configuration in reports.")
    out: Path | None = setting(None, "--out", "Write capacity.json, .md and .html here.")
