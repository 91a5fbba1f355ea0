"""The progress line: redrawn in place on a terminal, one line per step in a log."""

from __future__ import annotations

import io

from ge_plugin.measure.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_prints_a_line_per_step_when_not_a_terminal():
    out = io.StringIO()
    bar = Progress(4, stream=out, width=8)
    bar.show("building")
    bar.advance("measuring")
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[--------] 0/4 00:00 building")
    assert lines[1].startswith("[##------] 1/4 ") and lines[1].endswith("measuring")
    assert lines[2].startswith("[########] 4/4 ") and lines[2].endswith("done")


def test_progress_redraws_in_place_on_a_terminal():
    out = _Tty()
    bar = Progress(2, stream=out, width=4)
    bar.show("a")
    bar.advance("b")
    bar.close()
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 3 and text.endswith("\n") and text.count("\n") == 1


def test_progress_never_counts_past_the_total():
    bar = Progress(1, stream=io.StringIO())
    bar.advance()
    bar.advance()
    assert bar.done == 1
