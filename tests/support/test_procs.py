"""The helpers that check a process left nothing running, on a real shell and the child it forks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest

from tests.support import descendants, wait_all_exited, wait_for, zombie


def test_descendants_and_their_exit_are_seen() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        children = wait_for("the shell to fork its sleep", lambda: descendants(shell.pid), 10, every=0.1)
        assert shell.pid not in children and not zombie(shell.pid), children
        with pytest.raises(AssertionError, match="still running"):
            wait_all_exited(children, 0.5)
        os.killpg(shell.pid, signal.SIGTERM)
        wait_all_exited({shell.pid, *children}, 10)
        assert zombie(shell.pid)  # exited and not reaped yet: counted as gone
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
