"""One discovery cycle with its consequences: probed, logged when it changes, and said out loud.

Every GPU process ends with an outcome (listening.py's reasons). Those the exporter could not reach are
counted as problems once a cycle and logged when they change, each with what to do about it; a node
whose GPU processes run engines this exporter cannot reach, with no endpoint answering, is not ready.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from servescope.core.catalog import bounds
from servescope.core.vllm.reach import PID_NOT_VISIBLE, PTRACE_DENIED, REACH_FAILURES, V6ONLY_LISTENER
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import Problem
from servescope.exporter.vllm.discovery import Discovery, discover
from servescope.exporter.vllm.probing import Connect, settle
from servescope.exporter.vllm.procfs import ProcFs

log = logging.getLogger(__name__)

HINTS = {
    PTRACE_DENIED: "give the exporter hostPID, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (as `servescope "
    "deploy render` does for --topology exporter), and if it still is denied, an AppArmor profile that "
    "allows ptrace read: containerd's default profile on Ubuntu refuses it (`--apparmor-profile "
    "unconfined`, docs/kubernetes.md)",
    PID_NOT_VISIBLE: "run the exporter with hostPID (NVML reports the host's PIDs) and --procfs on the "
    "host's /proc",
    V6ONLY_LISTENER: "start the engine on 0.0.0.0, or on [::] without IPV6_V6ONLY, or give this exporter "
    "an IPv6 route to the pod",
}


class Finder:
    """Runs discovery and the probes; keeps the last cycle's outcome for the series and the API."""

    def __init__(
        self,
        procfs: ProcFs,
        directory: GpuDirectory,
        answer: Callable[[str], str | None],
        connect: Connect,
        patterns: Sequence[str] = (),
    ) -> None:
        self._procfs, self._directory = procfs, directory
        self._answer, self._connect = answer, connect
        self._patterns = [re.compile(pattern) for pattern in patterns]
        self.found = Discovery()
        self._pending: list[Problem] = []  # what the last cycle could not reach, counted once

    def run(self, exclude: frozenset[int]) -> Discovery:
        previous = self.found
        candidates = discover(self._procfs, self._directory, exclude, self._patterns)
        self.found = settle(candidates, self._connect, self._answer)
        reports = self.found.reports()
        # Counted when it begins, not again each cycle it lasts (the outcome series says it lasts).
        known = set(previous.reports())
        self._pending = [Problem(reason, what) for reason, what in reports if (reason, what) not in known]
        seen = (previous.tally(), previous.urls, previous.reports())
        if (self.found.tally(), self.found.urls, reports) != seen:
            self._log(reports)
        return self.found

    def _log(self, reports: list[tuple[str, str]]) -> None:
        found = self.found
        pids = ", ".join(map(str, found.gpu_pids)) or "none"
        outcomes = ", ".join(f"{reason} {n}" for reason, n in found.tally().items()) or "none"
        log.info(
            "discovery looked at GPU processes %s: %s; engines %s",
            pids,
            outcomes,
            ", ".join(found.urls) or "none",
        )
        for reason, what in reports:
            hint = HINTS.get(reason)
            log.warning(
                "serving engine not scraped (%s): %s%s", reason, what, f"; to fix: {hint}" if hint else ""
            )

    def problems(self) -> list[Problem]:
        """The engines the last cycle found newly unreachable, once: the next collections count nothing."""
        problems, self._pending = self._pending, []
        return problems

    def samples(self) -> list[Sample]:
        return [Sample(bounds.DISCOVERY_GPU_PROCESSES, (r,), n) for r, n in self.found.tally().items()]

    def unready(self, any_up: bool) -> str | None:
        """Why the node is blind: GPU processes run engines this exporter cannot reach, none answers."""
        failing = {o.reason for o in self.found.outcomes.values() if o.reason in REACH_FAILURES}
        if not failing or any_up:
            return None
        reasons = ", ".join(sorted(failing))
        return f"GPU processes run serving engines but none can be scraped from here: {reasons}"

    def report(self) -> dict[str, object]:
        """What /api/v1/sources shows of discovery."""
        found = self.found
        return {
            "gpu_processes": found.tally(),
            "endpoints": found.urls,
            "not_scraped": [
                {"reason": reason, "detail": what, **({"hint": HINTS[reason]} if reason in HINTS else {})}
                for reason, what in found.reports()
            ],
        }
