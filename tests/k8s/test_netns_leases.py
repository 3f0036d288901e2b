"""A pod left behind by a killed test process must not shadow the next run's pods.

A run killed with SIGKILL (a CI timeout, an operator's ^C twice) cannot remove its namespaces, veth pairs
and unreachable routes. The next run used to lease the same /30 again: the stale host-side address won
the route, so its engines answered "connection refused" and a secondary interface's route already
existed. Here a child process wires such a pod and is killed before its cleanup; this process's pods
must then be reachable and the child's leftovers gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from tests.k8s.netns import ip, pod_namespace

pytestmark = pytest.mark.e2e

# The child wires a pod with a secondary interface (so an unreachable route too), says its addresses,
# then waits to be killed inside the context manager: its `finally` never runs.
CHILD = textwrap.dedent(
    """
    import sys, time
    from tests.k8s.netns import pod_namespace
    with pod_namespace(0, secondary=True) as pod:
        print(pod.name, pod.address, pod.secondary_address, flush=True)
        time.sleep(120)
    """
)


def _killed_pod() -> tuple[str, str, str]:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline().split()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    child.stdout.close()
    assert len(line) == 3, "the child did not wire its pod"
    return line[0], line[1], line[2]


def test_a_pod_left_by_a_killed_process_does_not_shadow_the_next_ones() -> None:
    stale_name, stale_address, stale_secondary = _killed_pod()
    assert stale_name in ip("netns", "list").stdout  # left behind, as a killed run leaves it
    with pod_namespace(0, secondary=True) as pod, pod_namespace(1) as other:
        engine, port = pod.start_engine("0.0.0.0:0")
        answer = httpx.get(f"http://{pod.address}:{port}/metrics", timeout=5)
        listed = ip("netns", "list").stdout
    assert answer.status_code == 200 and "vllm:" in answer.text
    assert stale_name not in listed  # reaped: its owner is dead
    # Nothing the new pods hold overlaps the dead one's, whether the /30 was reused after reaping or not.
    assert len({pod.address, pod.secondary_address, other.address}) == 3
    assert engine.poll() is not None  # stopped with its pod
    # The kernel destroys a deleted namespace's devices from a work queue: wait for it, generously.
    deadline = time.monotonic() + 30
    while (
        left := ip("-4", "-o", "addr", "show", "to", f"{stale_address}/30").stdout
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == "", f"the dead pod's host side still holds its /30: {left}"
    routes = ip("-4", "route", "show", "table", "all", "root", f"{stale_secondary}/30").stdout
    assert routes == "", f"the dead pod's unreachable route is still here: {routes}"
