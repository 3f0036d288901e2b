"""`servescope vllm parse`: the normalised signals of an exposition, for debugging a server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from servescope.core.exposition import ExpositionError, parse_exposition
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.stores.signals import Normalised
from servescope.exporter.vllm.normalise import normalise
from servescope.exporter.vllm.scrape import ScrapeError, Scraper

app = typer.Typer(
    help="vLLM / SGLang helpers: show what servescope reads from a server.", no_args_is_help=True
)


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    if source.startswith(("http://", "https://")):
        scraper = Scraper()
        try:
            return scraper.fetch(source)
        except ScrapeError as exc:
            raise _fail(f"{exc.reason}: {exc.message}") from None
        finally:
            scraper.close()
    try:
        return Path(source).read_text(errors="replace")
    except OSError as exc:
        raise _fail(f"cannot read {source}: {exc.strerror}") from None


def _fail(message: str) -> typer.Exit:
    typer.echo(f"servescope: error: {message}", err=True)
    return typer.Exit(2)


def as_json(normalised: Normalised) -> dict[str, object]:
    engines = []
    for engine in normalised.engines.values():
        signals: dict[str, object] = dict(engine.values)
        if engine.finished:
            signals["requests_finished"] = engine.finished
        for name, histogram in engine.histograms.items():
            signals[name] = {"count": histogram.count, "sum": histogram.sum, "buckets": histogram.buckets}
        engines.append({"model_name": engine.model_name, "engine": engine.engine, "signals": signals})
    return {"backend": normalised.backend, "generation": normalised.generation, "engines": engines}


@app.command()
def parse(
    source: Annotated[
        str, typer.Argument(help="A file, an http(s):// URL of /metrics, or - for stdin.")
    ] = "-",
) -> None:
    """Print the normalised signals as JSON; exit 2 when the input holds no serving-engine metrics."""
    text = _read(source)
    try:
        families = parse_exposition(text, keep=is_engine_family)
    except ExpositionError as exc:
        raise _fail(f"{source}: not a Prometheus exposition: {exc}") from None
    normalised = normalise(families)
    if not normalised.engines:
        raise _fail(f"{source}: no vLLM, SGLang, TensorRT-LLM or TGI metrics found")
    typer.echo(json.dumps(as_json(normalised), indent=2))
