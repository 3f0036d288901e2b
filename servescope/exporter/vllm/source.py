"""Source `vllm`: scrape every serving endpoint in parallel, normalise, join engines to GPUs."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from servescope.core import catalog as c
from servescope.core.catalog import placement
from servescope.core.exposition import ExpositionError, ExpositionParser, SeriesLimits
from servescope.core.vllm.aliases import FamilyLike, is_engine_family, is_read
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import NO_POD, GpuDirectory
from servescope.exporter.sources.base import Collection, Problem
from servescope.exporter.sources.bounded_http import LARGE_BODIES
from servescope.exporter.stores.pod_revisions import PodRevisions
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.stores.signals import Normalised
from servescope.exporter.vllm import retention
from servescope.exporter.vllm.endpoint import EndpointState
from servescope.exporter.vllm.export import Passthrough, passthrough_text, signal_samples
from servescope.exporter.vllm.finding import Finder
from servescope.exporter.vllm.join import engine_gpus, join_endpoint
from servescope.exporter.vllm.normalise import normalise
from servescope.exporter.vllm.probing import Connect, tcp_connect
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.retention import GRACE_SECONDS, Lost
from servescope.exporter.vllm.scrape import Fetcher, ScrapeError, Scraper

log = logging.getLogger(__name__)

JOIN_REFRESH_SECONDS = 30.0
JOIN_RETRY_SECONDS = 10.0  # sooner while an endpoint has no GPU yet (NVML may not have listed it)
DISCOVERY_SECONDS = 60.0
# An endpoint discovery found once and no longer finds stays, as down, while its pod does; where no pod
# is known, this long after its last good scrape (retention.py).
DISCOVERY_GRACE_SECONDS = GRACE_SECONDS


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
        passthrough: bool = False,
        passthrough_families: Sequence[str] = (),
        limits: SeriesLimits | None = None,
        discovery: bool = True,
        engine_patterns: Sequence[str] = (),
        board: ServingBoard | None = None,
        revisions: PodRevisions | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        connect: Connect = tcp_connect,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._configured = list(dict.fromkeys(urls))
        self._directory = directory
        self._procfs = procfs or ProcFs()
        self._scraper: Fetcher = scraper or Scraper()
        # Which families are parsed: those servescope reads, plus those re-exported when asked.
        self._passthrough = Passthrough(passthrough_families) if passthrough else None
        self._limits = limits or SeriesLimits()
        # The pods' revisions come from the pod-labels source (none known without it).
        self.board, self._revisions = board, PodRevisions() if revisions is None else revisions
        self._discovery = discovery and not urls  # --vllm-url wins
        self._monotonic, self._wall = monotonic, wall
        self._states: dict[str, EndpointState] = {url: self._state(url) for url in self._configured}
        self._discovered_at = float("-inf")
        self._gpu_pids: frozenset[int] = frozenset()
        self._missing: set[str] = set()  # kept after discovery lost them, already logged
        self.finder = Finder(self._procfs, directory, self._engine_answer, connect, engine_patterns)
        self._reports: list[Problem] = []  # engines' problems found while scraping (ambiguous DP)
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

    def _state(self, url: str) -> EndpointState:
        return EndpointState(url, self._limits)

    def _rediscover(self) -> None:
        own = frozenset({os.getpid()})
        found = self.finder.run(own).urls
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
        self._states = {url: self._states.get(url) or self._state(url) for url in [*found, *kept]}

    def _engine_answer(self, url: str) -> str | None:
        """None when `url` serves an engine's /metrics, else what it answered instead."""
        try:
            with LARGE_BODIES.hold():
                text = self._scraper.fetch(url)
                # A parser of its own, bounded: nothing of a page that may not be an engine's is kept.
                families = ExpositionParser(limits=self._limits).parse(text, keep=is_engine_family)
        except ScrapeError as exc:
            return f"did not answer /metrics ({exc.reason}: {exc.message})"
        except ExpositionError as exc:
            return f"answered what is not a Prometheus exposition ({exc})"
        if "servescope_build_info" in text:  # a servescope exporter re-exports engine series
            return "is a servescope exporter, not an engine"
        return None if families else "answered no vLLM, SGLang or TGI series"

    # --- one cycle ---------------------------------------------------------------------------------
    def collect(self) -> Collection:
        urls = self.endpoints()
        samples: list[Sample] = []
        scrapes: list[tuple[str, list[FamilyLike]]] = []
        for url, result in self._scrape_all(urls).items():
            state = self._states[url]
            families = self._record(state, result)
            samples += state.health_samples(self.name)
            if families is None:
                continue
            normalised = normalise(families)
            samples += self._join_samples(state, normalised)
            # The pod of the endpoint's series: only when one container holds every GPU of the endpoint.
            holder = self._directory.sole_holder(g.uuid for g in state.gpus)
            revision = self._revisions.revision(*holder[:2]) if holder != NO_POD else ""
            samples += signal_samples(normalised, url, holder, revision)
            state.pod = holder[:2] if holder != NO_POD else state.pod
            if holder != NO_POD:
                samples.append(Sample(placement.ENDPOINT_POD_INFO, (state.url, *holder, revision), 1))
            if self.board is not None:
                # Load, KV usage and latency over time feed the leak verdict, KV trend and advisor.
                self.board.record(url, normalised, state.gpus, self._monotonic())
            if self._passthrough is not None:  # else the page's families are let go here, one at a time
                scrapes.append((url, self._passthrough.select(families)))
        raw = passthrough_text(scrapes) if self._passthrough is not None else None
        problems, self._reports = self._reports, []
        if not self._discovery:
            return Collection(samples, problems, raw)
        samples.append(Sample(placement.DISCOVERED_ENDPOINTS, (), len(urls)))
        samples += self.finder.samples()
        unready = self.finder.unready(any(state.up for state in self._states.values()))
        return Collection(samples, [*self.finder.problems(), *problems], raw, unready, self.finder.report())

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
                keep = self._passthrough.keep if self._passthrough is not None else is_read
                families: list[FamilyLike] = list(state.parser.parse(self._scraper.fetch(url), keep=keep))
                state.count_dropped(state.parser.dropped)
                return families
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

    def _join_samples(self, state: EndpointState, normalised: Normalised) -> list[Sample]:
        # Walking /proc costs a scan of every process's fds: do it every 30 s, not every scrape.
        due = JOIN_REFRESH_SECONDS if state.gpus else JOIN_RETRY_SECONDS
        if self._monotonic() - state.joined_at >= due:
            owners = self.finder.found.owners.get(state.url)
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
