"""`servescope serve` with NVML replaced at the hardware boundary: GPU i's compute process is the i-th PID
of --gpu-pids (the simulator's pynvml-shaped module, as `serve --simulate` plugs in); everything else,
from discovery to the HTTP server, is the real exporter.

    python -m tests.k8s.fake_nvml_serve --gpu-pids 1234,5678 [--as-uid 65534] -- SERVE-OPTIONS...

With --as-uid the exporter drops to that UID and GID, with no supplementary group and no capability
(setuid from root clears them all), once its socket is bound and its runtime built, before any source
starts: what a pod with runAsUser and no added capability runs as. Its modules are loaded before that,
as the interpreter's own files may not be readable by that UID.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from servescope.exporter import runtime as runtime_module
from servescope.exporter.nvml.library import NvmlLibrary
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml

# What the server and the sources import later, on first use.
LATER = (
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
    "uvicorn.lifespan.off",
    "encodings.idna",
    "asyncio.base_events",
    "concurrent.futures.thread",
    "servescope.exporter.app",
    "servescope.runbooks.server",
)


def drop_to(uid: int) -> None:
    for name in LATER:
        try:
            importlib.import_module(name)
        except ImportError:
            continue  # an optional part (httptools, websockets) not installed: not used either
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # from root to another UID: every capability set is cleared


def main() -> None:
    argv = sys.argv[1:]
    own, serve = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-pids", required=True)
    parser.add_argument("--as-uid", type=int)
    args = parser.parse_args(own)
    pids = [int(pid) for pid in args.gpu_pids.split(",")]
    fleet = SimulatedFleet(len(pids), "H200", seed=1)
    for index, pid in enumerate(pids):
        fleet.assign_process(index, pid)
    real = runtime_module.build_runtime

    def build(settings: Any, hardware: Any = None) -> Any:
        built = real(settings, runtime_module.Hardware(nvml=NvmlLibrary(SimulatedPynvml(fleet))))
        if args.as_uid is not None:
            drop_to(args.as_uid)
        return built

    runtime_module.build_runtime = build  # type: ignore[assignment]
    from servescope.cli import main as servescope

    sys.argv = ["servescope", "serve", *serve]
    servescope()


if __name__ == "__main__":
    main()
