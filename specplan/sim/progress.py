"""Progress of `specplan simulate`, per decode round, on stderr (stdout keeps the report):
a live line on a terminal, one line per finished round when stderr is piped or a file."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress


class RoundProgress:
    """`update(r)` with the last round rank 0 finished; a round is printed once, in order,
    even when the runner polls past several rounds at a time."""

    def __init__(self, total: int, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._bar: Progress | None = None

    def __enter__(self) -> RoundProgress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = (TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"),
                       TimeElapsedColumn())
            bar = self._bar = Progress(*columns, console=Console(file=self.stream), transient=True)
            bar.__enter__()
            self._task = bar.add_task("rounds", total=self.total)
        return self

    def update(self, finished: int) -> None:
        if finished <= self.done:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=finished)
        else:
            for r in range(self.done + 1, min(finished, self.total) + 1):
                self.stream.write(f"simulate: round {r}/{self.total} done\n")
            self.stream.flush()
        self.done = finished

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
