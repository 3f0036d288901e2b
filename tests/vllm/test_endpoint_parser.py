"""Each endpoint parses with its own parser: what a parser remembers is one server's series, and no two
scrape threads ever use one parser at once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from servescope.core import catalog as c
from servescope.core.exposition import ExpositionParser, ParsedFamily
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values

TEXT = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
URLS = [f"http://10.0.0.{n}:8000/metrics" for n in range(1, 9)]


class Pages:
    """The engines' /metrics, each server's page with its own model name."""

    def fetch(self, url: str) -> str:
        return TEXT.replace('model_name="', f'model_name="m{URLS.index(url)}-')

    def close(self) -> None:
        pass


def _source(tmp_path: Path) -> VllmSource:
    return VllmSource(
        URLS,
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=Pages(),
        discovery=False,
        passthrough=False,
    )


def test_every_endpoint_keeps_its_own_parser_across_cycles(tmp_path: Path) -> None:
    source = _source(tmp_path)
    source.collect()
    parsers = {url: source._states[url].parser for url in URLS}
    assert len({id(parser) for parser in parsers.values()}) == len(URLS)
    collection = source.collect()
    assert all(source._states[url].parser is parsers[url] for url in URLS)
    ups = values(collection.samples, c.SOURCE_UP_ENDPOINT.name)
    assert ups == [1] * len(URLS)


def test_no_parser_is_used_by_two_scrape_threads_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original: Callable[..., list[ParsedFamily]] = ExpositionParser.parse
    lock = threading.Lock()
    active: Counter[int] = Counter()
    overlaps: list[int] = []
    threads: dict[int, set[str]] = {}

    def watched(
        self: ExpositionParser, text: str, keep: Callable[[str], bool] | None = None
    ) -> list[ParsedFamily]:
        with lock:
            active[id(self)] += 1
            if active[id(self)] > 1:
                overlaps.append(id(self))
            threads.setdefault(id(self), set()).add(threading.current_thread().name)
        time.sleep(0.005)  # widen the window two threads would have to meet in
        try:
            return original(self, text, keep)
        finally:
            with lock:
                active[id(self)] -= 1

    monkeypatch.setattr(ExpositionParser, "parse", watched)
    source = _source(tmp_path)
    for _ in range(5):
        source.collect()
    assert overlaps == []
    endpoint_parsers = {id(source._states[url].parser) for url in URLS}
    assert endpoint_parsers <= set(threads)  # every endpoint parsed with its own parser
    # The pool's threads take whichever endpoint is due: parsers move between threads, never at once.
    assert any(name.startswith("vllm-scrape") for names in threads.values() for name in names)
