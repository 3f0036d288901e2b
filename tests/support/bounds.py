"""Bounds on the waits a test asserts. A bound tells behaviour apart (a deadline held; an answer came
beside a hung peer, not after it), never speed: how fast something is, is bench/'s to measure.

`make test` passes on two busy cores: eight test workers, their servers, and two CPU-bound neighbours,
where a process may wait seconds for a CPU. So a bound is the wait the test expects plus STARVED_S
(`generous`), and the hang it stands against lasts far longer than that; the test says which hang.
"""

from __future__ import annotations

# What a starved 2-core machine may add to a wait: seconds a process may go without a CPU, summed
# over the few steps of one wait (a connect, a read, a reply).
STARVED_S = 8.0
# How long a test waits for a child it starts (an exporter, a runbook service) to announce its port and
# answer. How long a start takes is no claim of any test, and on a starved machine importing the package
# alone has taken over 20 s; a child that cannot start at all still fails the test, naming its log.
STARTUP_S = 60.0


def generous(expected_s: float) -> float:
    """The bound on a wait expected to take `expected_s` seconds, on a machine as busy as it gets."""
    return expected_s + STARVED_S
