"""Simulated vLLM engines as real child processes, each bound to a group of simulated GPUs.

Each engine is its own process listening on a loopback port, and the simulated NVML lists that
process's PID on its GPUs, so discovery and the engine-GPU join run exactly as on a real node.
"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys
from dataclasses import dataclass

from servescope_sim.fleet import SimulatedFleet

log = logging.getLogger(__name__)
MODEL_NAME = "deepseek-ai/DeepSeek-V3"


# The module each simulated engine runs (`python -m`): discovery finds the engines by it (wiring.py).
ENGINE_MODULE = "servescope_sim.vllm_server"


@dataclass
class SimEngine:
    process: subprocess.Popen[str]
    url: str
    gpus: list[int]


def gpu_groups(gpus: int, engines: int) -> list[list[int]]:
    """Split GPUs into `engines` contiguous groups, as tensor-parallel deployments are laid out."""
    engines = min(engines, gpus)
    size = gpus // engines if engines else 0
    return [list(range(i * size, (i + 1) * size)) for i in range(engines)]


def start_engines(fleet: SimulatedFleet, engines: int, seed: int) -> list[SimEngine]:
    started = []
    for i, group in enumerate(gpu_groups(len(fleet.gpus), engines)):
        argv = [
            sys.executable,
            "-m",
            ENGINE_MODULE,
            "--listen",
            "127.0.0.1:0",
            "--model-name",
            MODEL_NAME,
            "--engine",
            "0",
            "--seed",
            str(seed * 1000 + i),
            "--exit-with-parent",  # a SIGKILLed exporter must not leave engines behind
        ]
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
        started.append(SimEngine(process, "", group))
    for engine in started:
        assert engine.process.stdout is not None
        line = engine.process.stdout.readline()
        found = re.search(r"serving on (\S+):(\d+)", line)
        if not found:
            log.warning("a simulated vLLM engine did not start: %r", line)
            continue
        engine.url = f"http://{found.group(1)}:{found.group(2)}/metrics"
        for index in engine.gpus:
            fleet.assign_process(index, engine.process.pid)
        log.info("simulated vLLM engine on GPUs %s: %s", engine.gpus, engine.url)
    return started


def stop_engines(engines: list[SimEngine]) -> None:
    for engine in engines:
        with contextlib.suppress(ProcessLookupError):
            engine.process.terminate()
    for engine in engines:
        try:
            engine.process.wait(5)
        except subprocess.TimeoutExpired:
            engine.process.kill()
            engine.process.wait()
