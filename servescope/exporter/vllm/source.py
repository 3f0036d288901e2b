"""Source `vllm`: scrape every serving endpoint in parallel, normalise, join engines to GPUs."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from servescope import catalog as c
from servescope.catalog import placement
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import NO_POD, GpuDirectory
from servescope.exporter.sources.base import Collection, Problem
from servescope.exporter.sources.bounded_http import LARGE_BODIES
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.stores.signals import GpuProcess, Normalised
from servescope.exporter.vllm import retention
from servescope.exporter.vllm.aliases import FamilyLike, is_engine_family
from servescope.exporter.vllm.discovery import Discovery, discover
from servescope.exporter.vllm.export import passthrough_text, signal_samples
from servescope.exporter.vllm.join import EndpointGpus, engine_gpus, join_endpoint
from servescope.exporter.vllm.normalise import normalise
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.retention import GRACE_SECONDS, Lost, Pod
from servescope.exporter.vllm.scrape import Fetcher, ScrapeError, Scraper
from servescope.exporter.vllm.text_parser import ExpositionError, ExpositionParser, parse_exposition

log = logging.getLogger(__name__)

JOIN_REFRESH_SECONDS = 30.0
JOIN_RETRY_SECONDS = 10.0  # sooner while an endpoint has no GPU yet (NVML may not have listed it)
DISCOVERY_SECONDS = 60.0
# An endpoint discovery found once and no longer finds stays, as down, while its pod does; where no pod
# is known, this long after its last good scrape (retention.py).
DISCOVERY_GRACE_SECONDS = GRACE_SECONDS


@dataclass
class EndpointState:
    url: str
    up: bool = False
    last_success: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    gpus: list[GpuProcess] = field(default_factory=list)
    joined: EndpointGpus = field(default_factory=EndpointGpus)
    ambiguous_logged: bool = False
    joined_at: float = float("-inf")
    # The endpoint's own parser: what it remembers of this server's series serves this server's next
    # scrape, and one scrape of an endpoint runs at a time, so no two threads share one.
    parser: ExpositionParser = field(default_factory=ExpositionParser)
    pod: Pod | None = None  # the pod the kubelet said holds all its GPUs, when it last answered


class VllmSource:
    """Endpoints from configuration, else discovered from NVML's processes every minute."""

    name = "vllm"

    def __init__(
        self,
        urls: list[str],
        *,
        directory: GpuDirectory,
        procfs: ProcFs | None = None,
        scraper: Fetcher | None = None,
        interval_seconds: float = 5.0,
        passthrough: bool = True,
        discovery: bool = True,
        board: ServingBoard | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._configured = list(dict.fromkeys(urls))
        self._directory = directory
        self._procfs = procfs or ProcFs()
        self._scraper: Fetcher = scraper or Scraper()
        self._passthrough = passthrough
        self.board = board
        self._discovery = discovery and not urls  # --vllm-url wins
        self._monotonic, self._wall = monotonic, wall
        self._states: dict[str, EndpointState] = {url: EndpointState(url) for url in self._configured}
        self._discovered_at = float("-inf")
        self._gpu_pids: frozenset[int] = frozenset()
        self._missing: set[str] = set()  # kept after discovery lost them, already logged
        self._found = Discovery()
        self._reports: list[Problem] = []  # what the last discovery could not reach, counted once
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="vllm-scrape")
        self._in_flight: dict[str, Future[list[FamilyLike] | ScrapeError]] = {}

    # --- endpoints ---------------------------------------------------------------------------------
    def endpoints(self) -> list[str]:
        if self._discovery:
            # Every minute, and at once when NVML's set of GPU processes changes (an engine started).
            pids = frozenset(pid for _, _, pid in self._directory.processes())
            if pids != self._gpu_pids or self._monotonic() - self._discovered_at >= DISCOVERY_SECONDS:
                self._gpu_pids = pids
                self._discovered_at = self._monotonic()
                self._rediscover()
        return list(self._states)

    def _rediscover(self) -> None:
        own = frozenset({os.getpid()})
        previous, self._found = self._found, discover(self._procfs, self._directory, own)
        found = [url for url in self._found.urls if self._speaks_engine(url)]
        self._report(previous, found)
        now, listed = self._wall(), self._directory.listed_pods()
        serving = {state.pod for url, state in self._states.items() if url in found and state.pod}
        kept = [
            url
            for url, state in self._states.items()
            if url not in found
            and retention.kept(Lost(url, state.last_success, state.pod), now, listed, serving)
        ]
        if set(found) != set(self._states):
            log.info("serving endpoints discovered on this node: %s", ", ".join(found) or "none")
        for url in set(kept) - self._missing:
            log.warning("endpoint %s no longer found: reported down until it returns or is forgotten", url)
        self._missing = set(kept)
        self._states = {url: self._states.get(url) or EndpointState(url) for url in [*found, *kept]}

    def _report(self, previous: Discovery, found: list[str]) -> None:
        """Log what discovery looked at when it changes; count what it cannot reach once a cycle."""
        now, reports = self._found, self._found.reports()
        self._reports = [Problem(reason, what) for reason, what in reports]
        if (now.gpu_pids, now.urls, reports) == (previous.gpu_pids, previous.urls, previous.reports()):
            return
        pids = ", ".join(map(str, now.gpu_pids)) or "none"
        urls, engines = ", ".join(now.urls) or "none", ", ".join(found) or "none"
        log.info(
            "discovery looked at GPU processes %s: API-server listeners %s, engines %s", pids, urls, engines
        )
        for reason, what in reports:
            log.warning("serving engine not reachable from this exporter (%s): %s", reason, what)

    def _speaks_engine(self, url: str) -> bool:
        try:
            with LARGE_BODIES.hold():
                text = self._scraper.fetch(url)
                families = parse_exposition(text, keep=is_engine_family)
        except (ScrapeError, ExpositionError):
            return False
        # A servescope exporter re-exports engine series: it is never an engine itself.
        return bool(families) and "servescope_build_info" not in text

    # --- one cycle ---------------------------------------------------------------------------------
    def collect(self) -> Collection:
        urls = self.endpoints()
        samples: list[Sample] = []
        scrapes: list[tuple[str, list[FamilyLike]]] = []
        for url, result in self._scrape_all(urls).items():
            state = self._states[url]
            families = self._record(state, result)
            samples += self._health_samples(state)
            if families is None:
                continue
            normalised = normalise(families)
            samples += self._join_samples(state, normalised)
            # The pod of the endpoint's series: only when one container holds every GPU of the endpoint.
            holder = self._directory.sole_holder(g.uuid for g in state.gpus)
            samples += signal_samples(normalised, url, holder)
            state.pod = holder[:2] if holder != NO_POD else state.pod
            if holder != NO_POD:
                samples.append(Sample(placement.ENDPOINT_POD_INFO, (state.url, *holder), 1))
            if self.board is not None:
                # Load, KV usage and latency over time feed the leak verdict, KV trend and advisor.
                self.board.record(url, normalised, state.gpus, self._monotonic())
            scrapes.append((url, families))
        raw = passthrough_text(scrapes) if self._passthrough else None
        if self._discovery:
            samples.append(Sample(placement.DISCOVERED_ENDPOINTS, (), len(urls)))
        problems, self._reports = self._reports, []
        return Collection(samples, problems, raw)

    def _scrape_all(self, urls: list[str]) -> dict[str, list[FamilyLike] | ScrapeError]:
        """Every endpoint's answer, or its error; the cycle waits at most one interval for them.

        Each fetch has its own total deadline, so this wait is only a backstop: an endpoint still
        busy at the interval's end is reported as timing out, and not asked again until it returns.
        """
        for url in urls:
            running = self._in_flight.get(url)
            if running is None or running.done():
                self._in_flight[url] = self._pool.submit(self._scrape, self._states[url])
        futures = {url: self._in_flight[url] for url in urls}
        for gone in [url for url, future in self._in_flight.items() if url not in futures and future.done()]:
            del self._in_flight[gone]  # an endpoint discovery no longer lists
        wait(futures.values(), timeout=self.interval_seconds)
        results: dict[str, list[FamilyLike] | ScrapeError] = {}
        for url, future in futures.items():
            if future.done():
                del self._in_flight[url]
                results[url] = future.result()
            else:
                results[url] = ScrapeError(
                    "timeout", f"{url}: still scraping after {self.interval_seconds:g} s"
                )
        return results

    def _scrape(self, state: EndpointState) -> list[FamilyLike] | ScrapeError:
        # A large page is fetched and parsed under the process's one large-body slot.
        url = state.url
        with LARGE_BODIES.hold():
            try:
                return list(state.parser.parse(self._scraper.fetch(url), keep=is_engine_family))
            except ScrapeError as exc:
                failure = ScrapeError(exc.reason, exc.message)
            except ExpositionError as exc:
                failure = ScrapeError("parse", f"{url}: {exc}")
        # A new error, made outside the handler: the caught one's traceback holds the body it refused.
        return failure

    def _record(
        self, state: EndpointState, result: list[FamilyLike] | ScrapeError
    ) -> list[FamilyLike] | None:
        if isinstance(result, ScrapeError):
            return self._failed(state, result.reason, result.message)
        if state.last_error is not None:
            log.info("endpoint %s recovered", state.url)
        state.up, state.last_error, state.last_success = True, None, self._wall()
        return result

    def _failed(self, state: EndpointState, reason: str, message: str) -> list[FamilyLike] | None:
        if state.last_error is None or not state.last_error.startswith(reason):
            log.warning("endpoint %s down (%s): %s", state.url, reason, message)
        state.up, state.last_error = False, f"{reason}: {message}"
        state.errors[reason] += 1
        return None

    def _health_samples(self, state: EndpointState) -> list[Sample]:
        labels = ("vllm", state.url)
        samples = [
            Sample(c.SOURCE_UP_ENDPOINT, labels, 1 if state.up else 0),
            Sample(c.SOURCE_LAST_SUCCESS_ENDPOINT, labels, state.last_success),
        ]
        samples += [
            Sample(c.SOURCE_ERRORS_ENDPOINT, (*labels, reason), n)
            for reason, n in sorted(state.errors.items())
        ]
        return samples

    def _join_samples(self, state: EndpointState, normalised: Normalised) -> list[Sample]:
        # Walking /proc costs a scan of every process's fds: do it every 30 s, not every scrape.
        due = JOIN_REFRESH_SECONDS if state.gpus else JOIN_RETRY_SECONDS
        if self._monotonic() - state.joined_at >= due:
            owners = self._found.owners.get(state.url)
            state.joined = join_endpoint(state.url, self._procfs, self._directory, owners)
            state.gpus, state.joined_at = state.joined.gpus, self._monotonic()
        engines = normalised.engines
        mapping = engine_gpus(sorted({engine for _, engine in engines}), state.joined)
        if mapping is None:
            # Every engine on every GPU would page for engine 0 on engine 1's GPU: say nothing instead.
            why = f"{state.url}: the GPUs of its {len(engines)} data-parallel engines cannot be told apart"
            self._reports.append(Problem("ambiguous_dp", why))
            if not state.ambiguous_logged:
                log.warning(
                    "%s (no VLLM::EngineCore_DP<n> per rank, or ranks on one GPU): no engine-GPU map", why
                )
            state.ambiguous_logged = True
            return []
        state.ambiguous_logged = False
        return [
            Sample(c.ENGINE_GPU_INFO, (model, engine, state.url, g.uuid, g.gpu, str(g.pid)), 1)
            for (model, engine) in engines
            for g in mapping[engine]
        ]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._scraper.close()
