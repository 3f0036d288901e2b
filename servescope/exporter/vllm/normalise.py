"""Turn a parsed exposition into the normalised signals of each engine it describes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from servescope.core.catalog.spec import Kind
from servescope.core.vllm.aliases import (
    SIGNALS,
    FamilyLike,
    SampleLike,
    Signal,
    lookup,
    split_name,
)
from servescope.exporter.stores.signals import EngineSignals, Histogram, Normalised


def generation_of(backend: str, bases: set[str]) -> str:
    """Which generation of names the server speaks, from the names it exports."""
    if backend == "vllm":
        new, old = "kv_cache_usage_perc" in bases, "gpu_cache_usage_perc" in bases
        if new and old:
            return "0.9-0.10"  # both spellings: the transition releases
        if new:
            return "0.11+"
        if old:
            return "pre-0.9"
    if backend == "sglang" and "token_usage" in bases:
        return "0.4+"
    return "unknown"


def _choose(families: Iterable[FamilyLike]) -> tuple[str, set[str], dict[str, FamilyLike]]:
    """Pick, per signal, the preferred spelling present (new names over old ones, never both)."""
    found: list[tuple[str, str, FamilyLike]] = []
    for family in families:
        split = split_name(family.name)
        if split is not None:
            found.append((split[0], split[1], family))
    if not found:
        return "unknown", set(), {}
    backend = Counter(b for b, _, _ in found).most_common(1)[0][0]
    bases = {base for b, base, _ in found if b == backend}
    best: dict[str, tuple[int, FamilyLike]] = {}
    for b, base, family in found:
        hit = lookup(b, base) if b == backend else None
        if hit is not None:
            signal, rank = hit
            if signal.name not in best or rank < best[signal.name][0]:
                best[signal.name] = (rank, family)
    return backend, bases, {name: family for name, (_, family) in best.items()}


def _engine(result: Normalised, labels: Mapping[str, str]) -> EngineSignals:
    key = (labels.get("model_name", ""), labels.get("engine", "0"))
    engine = result.engines.get(key)
    if engine is None:
        engine = result.engines[key] = EngineSignals(*key)
    return engine


def _take(result: Normalised, signal: Signal, sample: SampleLike, cache: dict[str, dict[str, str]]) -> None:
    name = sample.name
    if name.endswith("_created"):
        return
    if signal.name == "cache_config":
        # cache_config_info has no model_name label: it is attached to every model of its engine below.
        cache[sample.labels.get("engine", "0")] = dict(sample.labels)
        return
    engine = _engine(result, sample.labels)
    if signal.shape is Kind.HISTOGRAM:
        histogram = engine.histograms.setdefault(signal.name, Histogram())
        if name.endswith("_bucket"):
            le = sample.labels.get("le", "+Inf")
            histogram.buckets[le] = histogram.buckets.get(le, 0.0) + sample.value
        elif name.endswith("_sum"):
            histogram.sum += sample.value
        elif name.endswith("_count"):
            histogram.count += sample.value
    elif signal.name == "requests_finished":
        reason = sample.labels.get("finished_reason", "unknown")
        engine.finished[reason] = engine.finished.get(reason, 0.0) + sample.value
    elif signal.shape is Kind.COUNTER:
        # A leaked `pid` label (vLLM ~0.11, several API servers) splits a counter: the parts add up.
        engine.values[signal.name] = engine.values.get(signal.name, 0.0) + sample.value
    else:
        engine.values[signal.name] = max(engine.values.get(signal.name, sample.value), sample.value)


def normalise(families: Iterable[FamilyLike]) -> Normalised:
    backend, bases, chosen = _choose(families)
    result = Normalised(backend, generation_of(backend, bases))
    cache: dict[str, dict[str, str]] = {}
    signals = {s.name: s for s in SIGNALS}
    for name, family in chosen.items():
        for sample in family.samples:
            _take(result, signals[name], sample, cache)
    for engine in result.engines.values():
        engine.cache = cache.get(engine.engine, {})
        capacity = kv_capacity_tokens(engine)
        if capacity is not None:
            engine.values["kv_capacity_tokens"] = capacity
        utilization = _number(engine.cache.get("gpu_memory_utilization"))
        if utilization is not None:
            engine.values["gpu_memory_utilization"] = utilization
    return result


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "None") else None
    except ValueError:
        return None


def kv_capacity_tokens(engine: EngineSignals) -> float | None:
    """KV capacity: kv_cache_size_tokens when vLLM states it, else block_size x num_gpu_blocks."""
    stated = _number(engine.cache.get("kv_cache_size_tokens"))
    if stated:
        return stated
    block, blocks = _number(engine.cache.get("block_size")), _number(engine.cache.get("num_gpu_blocks"))
    if block and blocks:
        return block * blocks
    used, usage = engine.values.get("sglang_used_tokens"), engine.values.get("kv_usage")
    if used and usage:
        return round(used / usage)  # SGLang states tokens used and the fraction they are
    return None
