"""Reading a child's announced port from its stdout: bounded by the deadline, the pipe kept drained."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.bounds import generous
from tests.support.servers import announced_base

LISTENING = r"serving on 127\.0\.0\.1:(\d+)"


@contextmanager
def _python(code: str) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as process:
        try:
            yield process
        finally:
            process.kill()


def test_a_silent_child_is_given_up_on_at_the_deadline() -> None:
    with _python("import time; time.sleep(30)") as process:
        began = time.monotonic()
        assert announced_base(process, LISTENING, began + 1.0) is None
        assert time.monotonic() - began < generous(1.0)  # not the child's 30 s


def test_the_port_is_read_and_the_output_after_it_never_blocks_the_child() -> None:
    # Four MiB after the announcement: far more than a pipe holds, so the child ends only if read.
    code = "import sys; print('serving on 127.0.0.1:4321', flush=True); sys.stdout.write('x' * (4 << 20))"
    with _python(code) as process:
        assert announced_base(process, LISTENING, time.monotonic() + 20) == "http://127.0.0.1:4321"
        assert process.wait(20) == 0


def test_a_child_that_ends_unannounced_is_seen_at_once() -> None:
    with _python("print('something else')") as process:
        began = time.monotonic()
        assert announced_base(process, LISTENING, began + 60) is None
        assert time.monotonic() - began < generous(0)  # not the 60 s deadline
