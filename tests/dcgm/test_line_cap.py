"""Lines of dcgmi over the cap are dropped and counted; the lines around them are read as usual."""

from __future__ import annotations

import io

from servescope.exporter.dcgm.supervisor import MAX_LINE_CHARS, TOO_LONG_RESTART, DmonSupervisor


def supervisor(dropped: list[str]) -> DmonSupervisor:
    return DmonSupervisor(
        lambda: ["dcgmi"], lambda event: None, delay_seconds=1.0, on_dropped_line=dropped.append
    )


def test_an_overlong_line_is_dropped_whole_and_its_neighbours_kept() -> None:
    dropped: list[str] = []
    text = "GPU 0  1  2\n" + "x" * (MAX_LINE_CHARS + 10) + "\n" + "GPU 1  3  4\n"
    lines = list(supervisor(dropped)._bounded_lines(io.StringIO(text)))
    assert lines == ["GPU 0  1  2\n", "GPU 1  3  4\n"]
    assert len(dropped) == 1


def test_a_line_that_never_ends_stops_the_reading_after_the_restart_threshold() -> None:
    dropped: list[str] = []
    endless = io.StringIO("y" * MAX_LINE_CHARS * (TOO_LONG_RESTART + 5))
    assert list(supervisor(dropped)._bounded_lines(endless)) == []
    assert len(dropped) == TOO_LONG_RESTART
    assert endless.tell() == MAX_LINE_CHARS * TOO_LONG_RESTART  # nothing read past the threshold
