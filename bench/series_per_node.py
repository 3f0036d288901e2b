"""Series per node, as the DaemonSet configures the exporter, and what that makes at fleet scale.

The exporter runs `servescope serve --simulate --cluster --gpus 8 --engines 4` with the SERVESCOPE_*
settings that `servescope deploy render` puts into the DaemonSet by default (read from the rendered
manifest, so the count follows the defaults). The simulated node is a Kubernetes node (`--cluster`): a
kubelet pod-resources socket where each engine is a pod, and an API server with those pods' labels, so
the pod attribution series are counted and the engines' series carry `namespace`, `pod`, `container`
and (exporter topology, --pod-revisions) `revision`, as on a cluster. One substitution: the DaemonSet
reads DCGM from the GPU Operator's dcgm-exporter, which a simulated node does not have; the simulated
node's `dcgmi` serves the same fields instead. Once every source has answered, /metrics is fetched until
its series count holds still, then counted per family. Prometheus adds 5 series of its own per target
(up, scrape_duration_seconds, scrape_samples_scraped, scrape_samples_post_metric_relabeling,
scrape_series_added).

Two topologies are counted: `exporter` (the default: the exporter scrapes the engines; Prometheus does
not store their raw series) and `podmonitor` (Prometheus scrapes the 4 engines itself, the exporter adds
GPU series only; the engines' series the rendered PodMonitor drops, `--vllm-drop-series`, not counted).
Usage: python bench/series_per_node.py [--gpus 8] [--engines 4] [--nodes 1000] [--target 1500]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import SERVESCOPE, Server, get, machine, start, write
from servescope.deploy.exporter import exporter_settings
from servescope.deploy.options import DeployOptions

PER_TARGET = 5  # up, scrape_duration_seconds, scrape_samples_scraped, ..._post_metric_relabeling, ..._added
SUBSTITUTED = ("SERVESCOPE_DCGM_EXPORTER_URL",)  # no dcgm-exporter here: the simulated dcgmi instead
SETTLE_TIMEOUT = 180.0
STABLE_POLLS = 3


def daemonset_settings(options: DeployOptions) -> dict[str, str]:
    """The DaemonSet's settings, but the dcgm-exporter URL (the simulated dcgmi serves instead)."""
    settings = exporter_settings(options)
    return {name: value for name, value in settings.items() if name not in SUBSTITUTED}


def families(text: str, dropped: str = "") -> Counter[str]:
    """Samples (= series) per metric family of one exposition, but those whose name `dropped` matches
    (a metricRelabelings `drop`: anchored at both ends, as Prometheus's regexes are)."""
    drop = re.compile(dropped) if dropped else None
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        kept = [s for s in family.samples if drop is None or not drop.fullmatch(s.name)]
        if kept:
            counts[family.name] = len(kept)
    return counts


def _all_sources_up(text: str) -> bool:
    ups = [line for line in text.splitlines() if line.startswith("servescope_source_up{")]
    return bool(ups) and all(line.endswith(" 1") for line in ups)


def settled(server: Server) -> tuple[str, float]:
    """/metrics once every source is up and the count held still for STABLE_POLLS polls 5 s apart."""
    started = time.monotonic()
    counts: list[int] = []
    while time.monotonic() - started < SETTLE_TIMEOUT:
        status, body = get(server, "/metrics")
        text = body.decode()
        if status == 200 and _all_sources_up(text):
            counts.append(sum(families(text).values()))
            if len(counts) >= STABLE_POLLS and len(set(counts[-STABLE_POLLS:])) == 1:
                return text, time.monotonic() - started
        time.sleep(5.0)
    raise RuntimeError(f"the series count did not settle within {SETTLE_TIMEOUT:.0f} s: {counts}")


def run_exporter(settings: dict[str, str], gpus: int, engines: int) -> tuple[str, float, Counter[str]]:
    """The settled exposition, how long it took, and the engines' own series (scraped meanwhile)."""
    argv = [SERVESCOPE, "serve", "--simulate", "--cluster", "--gpus", str(gpus), "--engines", str(engines)]
    argv += ["--listen", "127.0.0.1:0", "--hostname", "bench-node"]
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)  # start() passes this process's environment on
    try:
        server = start(argv, core=None)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        text, seconds = settled(server)
        return text, seconds, engine_series(text)
    finally:
        server.stop()


def engine_urls(text: str) -> list[str]:
    """The engines' /metrics URLs, as the exporter labels its per-engine series."""
    urls = {
        sample.labels["endpoint"]
        for family in text_string_to_metric_families(text)
        if family.name == "servescope_engine_gpu_info"
        for sample in family.samples
    }
    return sorted(urls)


def engine_series(text: str) -> Counter[str]:
    """What Prometheus would store scraping each engine itself through the rendered PodMonitor (its
    metricRelabelings applied), summed over the engines."""
    dropped = DeployOptions(topology="podmonitor").vllm_drop_series
    total: Counter[str] = Counter()
    for url in engine_urls(text):
        with urllib.request.urlopen(url, timeout=10) as response:  # loopback, the simulated engines
            total.update(families(response.read().decode(), dropped))
    return total


def measure(options: DeployOptions, gpus: int, engines: int) -> tuple[dict[str, Any], Counter[str]]:
    """One topology's exporter series; and the engines' own, when this topology's exporter found them."""
    settings = daemonset_settings(options)
    text, seconds, direct = run_exporter(settings, gpus, engines)
    exporter = families(text)
    result: dict[str, Any] = {
        "settings": settings,
        "settle_seconds": round(seconds, 1),
        "exporter_families": dict(exporter.most_common()),
        "exporter_series": sum(exporter.values()),
    }
    return result, direct


def per_node(result: dict[str, Any], engines: int) -> int:
    targets = 1 + (engines if "engine_series" in result else 0)
    return int(result["exporter_series"]) + int(result.get("engine_series", 0)) + PER_TARGET * targets


def _family_rows(counts: dict[str, int], gpus: int) -> list[str]:
    rows = ["| family | series | per GPU |", "| --- | ---: | ---: |"]
    rows += [f"| `{name}` | {count} | {count / gpus:.1f} |" for name, count in counts.items()]
    return rows


def markdown(data: dict[str, Any]) -> str:
    gpus, engines, nodes, target = data["gpus"], data["engines"], data["nodes"], data["target"]
    lines = [
        "# Series per node",
        "",
        f"Machine: {data['machine']}",
        "",
        f"`servescope serve --simulate --cluster --gpus {gpus} --engines {engines}` with the DaemonSet's "
        "settings (`servescope deploy render` defaults; DCGM from the simulated dcgmi instead of the GPU "
        "Operator's dcgm-exporter; the engines are pods of a simulated Kubernetes node, with their revision "
        f"labels), {PER_TARGET} series per scrape target added for Prometheus's own.",
        "",
        "| topology | exporter series | engines' own series | per node | "
        f"{nodes:,} nodes x {gpus} GPUs | target <= {target:,}/node |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, result in data["topologies"].items():
        node = result["per_node"]
        verdict = "met" if node <= target else f"**not met** (+{node - target:,})"
        lines.append(
            f"| {name} | {result['exporter_series']:,} | {result.get('engine_series', 0):,} | {node:,} | "
            f"{node * nodes:,} | {verdict} |"
        )
    default = data["topologies"]["exporter"]
    lines += ["", f"Exporter families, topology `exporter` ({default['settle_seconds']} s to settle):", ""]
    lines += _family_rows(default["exporter_families"], gpus)
    engines_only = data["topologies"]["podmonitor"].get("engine_families", {})
    lines += ["", "The engines' own families, topology `podmonitor` (all engines together):", ""]
    lines += _family_rows(engines_only, gpus)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--target", type=int, default=1500)
    args = parser.parse_args()
    # The engines are the same in both runs (same seed); the exporter topology's run finds their URLs.
    exporter, direct = measure(DeployOptions(), args.gpus, args.engines)
    podmonitor, _ = measure(DeployOptions(topology="podmonitor"), args.gpus, args.engines)
    podmonitor["engine_families"] = dict(direct.most_common())
    podmonitor["engine_series"] = sum(direct.values())
    topologies = {"exporter": exporter, "podmonitor": podmonitor}
    for result in topologies.values():
        result["per_node"] = per_node(result, args.engines)
    data: dict[str, Any] = {
        "machine": machine(),
        "gpus": args.gpus,
        "engines": args.engines,
        "nodes": args.nodes,
        "target": args.target,
        "topologies": topologies,
    }
    write("series-per-node", data, markdown(data))


if __name__ == "__main__":
    main()
