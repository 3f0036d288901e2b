"""The simulated engines are what `serve --simulate` tells discovery to probe: their command line matches
the pattern it passes as --vllm-engine-processes, or the node serves no engine series at all."""

from __future__ import annotations

import re

from servescope_sim.engines import start_engines, stop_engines
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.wiring import SIMULATED_ENGINE_PROCESS


def test_the_simulated_engines_command_line_is_the_one_discovery_probes() -> None:
    fleet = SimulatedFleet(2, "H200", seed=1)
    engines = start_engines(fleet, 2, seed=1)
    try:
        assert len(engines) == 2
        for engine in engines:
            argv = engine.process.args
            assert isinstance(argv, list)
            command_line = " ".join(str(part) for part in argv)
            assert re.search(SIMULATED_ENGINE_PROCESS, command_line), command_line
            assert engine.url.startswith("http://127.0.0.1:")
    finally:
        stop_engines(engines)
        for engine in engines:  # the exporter keeps these pipes for the process's life; a test closes them
            if engine.process.stdout is not None:
                engine.process.stdout.close()
