"""An HTTP step runner for an engine known only by its URL: what `capacity --url` and `tune` drive.

The model name is read from the engine's `/v1/models` at the first step, not when the runner is made:
`tune` makes its runner before the engine it restarts is up. Random prompts are then fitted to the
engine's tokenizer (`token_fit`). The engine's own `/metrics` on the same
URL is sampled beside the client's view, for the backlog test, the TTFT cross-check and the throughput
check; its `/version` goes into the result's provenance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from servescope.kit.load.client import Api, RequestSpec
from servescope.kit.load.engine_metrics import engine_version, metrics_url
from servescope.kit.load.records import LoopMode, StepResult
from servescope.kit.load.runner import HttpStepRunner, ShapeSource
from servescope.kit.load.token_fit import fit_to_engine
from servescope.kit.load.validity import ValidityRules
from servescope.kit.load.workload import Workload


def listed_model(base_url: str, timeout_s: float = 10.0) -> str:
    """The first model the server lists at /v1/models; ValueError naming the URL when there is none."""
    try:
        listing = httpx.get(f"{base_url}/v1/models", timeout=timeout_s, trust_env=False).json()
        return str(listing["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{base_url}/v1/models: cannot read a model name ({exc})") from None


@dataclass
class EndpointStepRunner:
    """`HttpStepRunner` against `base_url`, its model and metrics URL found from the URL alone."""

    base_url: str
    mode: LoopMode = "open"
    workload: ShapeSource = field(default_factory=Workload)
    api: Api = "completions"
    warmup_s: float = 0.0
    rules: ValidityRules = field(default_factory=ValidityRules)
    priority: bool = False  # send vLLM's `priority` field (the engine schedules by priority)
    progress: Callable[[str], None] | None = None
    timeout_s: float = 30.0
    model: str = field(default="", init=False)
    version: str = field(default="unknown", init=False)
    _runner: HttpStepRunner | None = field(default=None, init=False, repr=False)

    def check(self) -> None:
        """Reach the engine now (raises ValueError naming it), so a wrong URL fails before any step."""
        self._connected()

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        return self._connected().run_step(offered, duration_s, seed=seed)

    def _connected(self) -> HttpStepRunner:
        if self._runner is None:
            url = self.base_url.rstrip("/")
            self.model = listed_model(url)
            self.version = engine_version(url)
            self.workload, fitted = fit_to_engine(self.workload, url, self.model)
            if fitted and self.progress is not None:
                self.progress(fitted)
            spec = RequestSpec(url, self.model, self.api, timeout_s=self.timeout_s, priority=self.priority)
            self._runner = HttpStepRunner(
                spec,
                self.workload,
                mode=self.mode,
                rules=self.rules,
                engine_metrics_url=metrics_url(url),
                warmup_s=self.warmup_s,
                progress=self.progress,
                max_in_flight=None,  # bounded by the deadlines: a slow engine's latency is not client lag
            )
        return self._runner
