"""Peak memory of the exporter fed hostile inputs, against the DaemonSet's memory limit.

The exporter runs as the DaemonSet configures it (the SERVESCOPE_* settings `deploy render` puts there,
passthrough off), over 8 simulated GPUs (`--simulate --engines 0`: NVML says which GPUs exist), with:
- 8 engines (--vllm-url), each answering every scrape with a page just under the 4 MiB cap of series
  servescope reads, with fresh label values every time (a new engine label, a new model name, and one line
  in ten with a label value over the length limit), from a separate process;
- a `dcgmi dmon` that prints a row for each of 20,000 entity ids every second.
It runs for --seconds (default 120: 20 scrapes of every engine); RSS is sampled every second and the
peak is the kernel's high-water mark (VmHWM) at the end. The figures: peak RSS against the rendered limit
and 75 % of it, the series /metrics holds at the end (bounded whatever the pages hold), and the drops
counted by reason.
Usage: python bench/memory.py [--seconds 120] [--engines 8] [--entities 20000]
"""

from __future__ import annotations

import argparse
import http.server
import multiprocessing
import os
import re
import socketserver
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import SERVESCOPE, get, machine, start, write
from servescope.deploy.dcgm import exporter_env
from servescope.deploy.exporter import EXPORTER_MEMORY_LIMIT, exporter_settings
from servescope.deploy.options import DeployOptions
from servescope.exporter.vllm.scrape import DEFAULT_MAX_BYTES

MIB = 2**20
DROPPED = re.compile(
    r'^servescope_(vllm_series|dcgm_entities)_dropped_total\{(.*?)reason="(\w+)"\} (\S+)$', re.M
)
# A dcgmi that answers `dmon -e <ids> -d <ms>` with a row for every one of $ENTITIES entity ids.
DCGMI = """
import os, sys, time
from servescope.core.dcgm.dmon_format import LAYOUTS, render_header, render_row
from servescope_sim.fake_dcgmi import columns
if sys.argv[1] != "dmon":
    sys.exit(0)  # `dcgmi discovery -l`: no GPU listed
ids = [int(i) for i in sys.argv[sys.argv.index("-e") + 1].split(",")]
cols, layout = columns(ids), LAYOUTS["4.5"]
rows = [render_row(layout, f"GPU {e}", cols, ["1"] * len(ids)) for e in range(int(os.environ["ENTITIES"]))]
block = "\\n".join(["\\n".join(render_header(layout, cols)), *rows]) + "\\n"
while True:
    sys.stdout.write(block)
    sys.stdout.flush()
    time.sleep(1)
"""


def hostile_page(size: int) -> str:
    """A template page just under `size` bytes; `@@` becomes the scrape's number (fresh values)."""
    lines = ["# TYPE vllm:num_requests_running gauge", "# TYPE vllm:time_to_first_token_seconds histogram"]
    total, i = 0, 0
    long_value = "x" * 600
    while True:
        if i % 10 == 9:
            line = f'vllm:num_requests_running{{model_name="{long_value}",engine="@@-{i}"}} 1'
        elif i % 2:
            line = f'vllm:time_to_first_token_seconds_bucket{{model_name="m-@@-{i}",engine="0",le="0.5"}} {i}'
        else:
            line = f'vllm:num_requests_running{{model_name="tiny-llm",engine="@@-{i}"}} {i}'
        if total + len(line) + 1 > size - 16:
            return "\n".join(lines) + "\n"
        lines.append(line)
        total += len(line) + 1
        i += 1


def serve_engines(count: int, ports: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """`count` engines answering hostile pages, each in its own thread of this process."""
    template = hostile_page(DEFAULT_MAX_BYTES)
    scrapes = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            scrapes[0] += 1
            body = template.replace("@@", str(scrapes[0])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    servers = []
    for _ in range(count):
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        servers.append(server)
        ports.put(server.server_address[1])
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def limit_mib() -> float:
    assert EXPORTER_MEMORY_LIMIT.endswith("Mi"), EXPORTER_MEMORY_LIMIT
    return float(EXPORTER_MEMORY_LIMIT.removesuffix("Mi"))


def exporter_argv(state: Path, urls: list[str], entities: int) -> list[str]:
    """`serve` as the DaemonSet runs it, its DCGM from the hostile dcgmi (not a dcgm-exporter)."""
    dcgmi = state / "dcgmi"
    dcgmi.write_text(f"#!{sys.executable}\n{DCGMI}")
    dcgmi.chmod(0o755)
    settings = exporter_settings(DeployOptions())
    for item in exporter_env(DeployOptions()):
        settings.pop(item["name"], None)
    os.environ.update({**settings, "ENTITIES": str(entities)})
    argv = [SERVESCOPE, "serve", "--simulate", "--gpus", "8", "--engines", "0", "--listen", "127.0.0.1:0"]
    return [*argv, "--dcgmi", str(dcgmi), *(arg for url in urls for arg in ("--vllm-url", url))]


def measure(argv: list[str], seconds: float) -> tuple[float, list[float], str]:
    """Peak RSS (MiB), the RSS every second, and /metrics at the end."""
    server = start(argv, core=None, ready_path="/healthz")  # readiness is measured, not awaited
    rss: list[float] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rss.append(status_kib(server.process.pid, "VmRSS") / 1024)
            time.sleep(1.0)
        _, body = get(server, "/metrics")
        peak = status_kib(server.process.pid, "VmHWM") / 1024
    finally:
        server.stop()
    return peak, rss, body.decode()


def run(seconds: float, engines: int, entities: int) -> dict[str, Any]:
    ports: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    peers = multiprocessing.Process(target=serve_engines, args=(engines, ports), daemon=True)
    peers.start()
    try:
        urls = [f"http://127.0.0.1:{ports.get(timeout=60)}/metrics" for _ in range(engines)]
        argv = exporter_argv(Path(tempfile.mkdtemp(prefix="bench-memory-")), urls, entities)
        peak, rss, text = measure(argv, seconds)
    finally:
        peers.terminate()
    dropped: dict[str, float] = {}
    for _, labels, reason, value in DROPPED.findall(text):
        key = f"{'vllm' if 'endpoint=' in labels else 'dcgm'}:{reason}"
        dropped[key] = dropped.get(key, 0.0) + float(value)
    limit = limit_mib()
    return {
        "engines": engines,
        "page_bytes": DEFAULT_MAX_BYTES,
        "dcgm_entities": entities,
        "seconds": seconds,
        "peak_rss_mib": round(peak, 1),
        "rss_mib_last": round(rss[-1], 1) if rss else None,
        "limit_mib": limit,
        "target_mib": 0.75 * limit,
        "peak_share_of_limit": round(peak / limit, 3),
        "series_at_end": sum(1 for line in text.splitlines() if line and not line.startswith("#")),
        "engine_series_at_end": len(re.findall(r"^servescope_serving_\w+\{", text, re.M)),
        "dcgm_gpus_at_end": len(set(re.findall(r'^servescope_dcgm_\w+\{gpu="(\d+)"', text, re.M))),
        "dropped": dropped,
        "machine": machine(),
    }


def markdown(r: dict[str, Any]) -> str:
    drops = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(r["dropped"].items())) or "none"
    verdict = "met" if r["peak_rss_mib"] < r["target_mib"] else "NOT met"
    return "\n".join(
        [
            "# Memory under hostile inputs",
            "",
            f"Machine: {r['machine']}",
            "",
            f"The exporter with the DaemonSet's settings, {r['engines']} engines answering "
            f"{r['page_bytes'] // MIB} MiB pages of fresh high-cardinality series every scrape, and a "
            f"dcgmi streaming {r['dcgm_entities']:,} entities every second, for {r['seconds']:g} s.",
            "",
            "| peak RSS (VmHWM) | limit | target (75 %) | verdict | series in /metrics at the end |",
            "| --- | --- | --- | --- | --- |",
            f"| {r['peak_rss_mib']} MiB ({r['peak_share_of_limit']:.0%} of the limit) "
            f"| {r['limit_mib']:g} Mi | < {r['target_mib']:g} MiB | {verdict} "
            f"| {r['series_at_end']:,} ({r['engine_series_at_end']:,} serving, "
            f"DCGM for {r['dcgm_gpus_at_end']} GPUs) |",
            "",
            f"Dropped and counted (cumulative at the end): {drops}.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--engines", type=int, default=8)
    parser.add_argument("--entities", type=int, default=20_000)
    args = parser.parse_args()
    result = run(args.seconds, args.engines, args.entities)
    write("memory", result, markdown(result))


if __name__ == "__main__":
    main()
