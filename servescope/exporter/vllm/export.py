"""Normalised signals -> servescope_serving_* samples; engines' own families -> pass-through text."""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Mapping, Sequence

from servescope.core import catalog as c
from servescope.core.vllm.aliases import FamilyLike, is_engine_family, is_read
from servescope.exporter.exposition import Sample, escape_help, escape_label_value, format_value
from servescope.exporter.gpu_directory import NO_POD
from servescope.exporter.stores.signals import Normalised

GAUGES = {
    "kv_usage": c.KV_USAGE,
    "running": c.RUNNING,
    "waiting": c.WAITING,
    "kv_capacity_tokens": c.KV_CAPACITY,
    "gpu_memory_utilization": c.GPU_MEMORY_UTILIZATION_SETTING,
}
COUNTERS = {
    "preemptions": c.PREEMPTIONS,
    "prompt_tokens": c.PROMPT_TOKENS,
    "generation_tokens": c.GENERATION_TOKENS,
    "prefix_cache_queries": c.PREFIX_QUERIES,
    "prefix_cache_hits": c.PREFIX_HITS,
}
HISTOGRAMS = {
    "ttft": c.TTFT,
    "itl": c.ITL,
    "e2e": c.E2E,
    "queue_time": c.QUEUE_TIME,
    "prefill_time": c.PREFILL_TIME,
    "decode_time": c.DECODE_TIME,
    "iteration_tokens": c.ITERATION_TOKENS,
}


def _le_order(le: str) -> float:
    try:
        return float(le)
    except ValueError:
        return math.inf


def signal_samples(
    normalised: Normalised, endpoint: str, pod: tuple[str, str, str] = NO_POD, revision: str = ""
) -> list[Sample]:
    """Every engine's signals under the same names whatever the backend and version; `pod` is the
    (namespace, pod, container) holding the endpoint's GPUs and `revision` that pod's rollout revision,
    each empty where not known."""
    samples = [Sample(c.SERVING_ENGINE_INFO, (endpoint, normalised.backend, normalised.generation), 1)]
    for engine in normalised.engines.values():
        labels = (engine.model_name, engine.engine, endpoint, *pod, revision)
        for key, spec in (*GAUGES.items(), *COUNTERS.items()):
            if key in engine.values:
                samples.append(Sample(spec, labels, engine.values[key]))
        for reason, count in sorted(engine.finished.items()):
            samples.append(Sample(c.REQUESTS_FINISHED, (*labels, reason), count))
        for key, spec in HISTOGRAMS.items():
            histogram = engine.histograms.get(key)
            if histogram is None:
                continue
            buckets = dict(histogram.buckets)
            buckets.setdefault("+Inf", histogram.count)  # a histogram without +Inf is invalid
            for le in sorted(buckets, key=_le_order):
                samples.append(Sample(spec, (*labels, le), buckets[le], "_bucket"))
            samples += [
                Sample(spec, labels, histogram.sum, "_sum"),
                Sample(spec, labels, histogram.count, "_count"),
            ]
    return samples


def _labels(labels: Mapping[str, str], endpoint: str) -> str:
    pairs = dict(labels)
    if "endpoint" in pairs:  # keep the engine's own label, as Prometheus does with honor_labels off
        pairs["exported_endpoint"] = pairs.pop("endpoint")
    pairs["endpoint"] = endpoint
    return ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs.items())


def passthrough_text(scrapes: Iterable[tuple[str, list[FamilyLike]]]) -> str:
    """The engines' own families, each endpoint's series labelled `endpoint`, one block per family.

    `_created` samples are dropped: they only carry process start times and double every family.
    """
    blocks: dict[str, tuple[str, str, list[str]]] = {}
    for endpoint, families in scrapes:
        for family in families:
            exposed = f"{family.name}_total" if family.type == "counter" else family.name
            kind = family.type if family.type in ("counter", "gauge", "histogram", "summary") else "untyped"
            doc = family.documentation
            block = blocks.setdefault(exposed, (kind, doc, []))
            block[2].extend(
                f"{s.name}{{{_labels(s.labels, endpoint)}}} {format_value(s.value)}\n"
                for s in family.samples
                if not s.name.endswith("_created")
            )
    return "".join(
        f"# HELP {name} {escape_help(doc)}\n# TYPE {name} {kind}\n" + "".join(lines)
        for name, (kind, doc, lines) in blocks.items()
        if lines
    )


class Passthrough:
    """Which engine families are re-exported as they are: those matching the allow-list's names or
    shell-style patterns; with no list, the families servescope reads itself."""

    def __init__(self, families: Sequence[str] = ()) -> None:
        patterns = [fnmatch.translate(family) for family in families]
        self._allowed = re.compile("|".join(patterns)) if patterns else None

    def allows(self, name: str) -> bool:
        """Counters are named without `_total` by the parser: `vllm:prompt_tokens_total` allows them too."""
        if self._allowed is None:
            return is_read(name)
        return bool(self._allowed.match(name) or self._allowed.match(f"{name}_total"))

    def keep(self, name: str) -> bool:
        """What a scrape parses: the families servescope reads and those passed through."""
        return is_read(name) or (is_engine_family(name) and self.allows(name))

    def select(self, families: list[FamilyLike]) -> list[FamilyLike]:
        return [family for family in families if self.allows(family.name)]
