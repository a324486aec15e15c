"""A resampling stage's time limit, checked by a pilot before its work, and its progress bar."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from tqdm.auto import tqdm

from paraeval.correlation.table import MapFn
from paraeval.pipeline.errors import ConfigError


@dataclass(frozen=True)
class Limit:
    minutes: float = math.inf  # inf: no pilot
    progress: bool = False
    file: IO[str] | None = None  # the bar's stream; None: stderr

    def check(
        self, stage: str, setting: str, n: int, pilot: Callable[[int], object], share: float
    ) -> float:
        """``pilot(k)``: the work with k resamples on ``share`` of the jobs, from a copy of the
        generator. Its time per resample bounds the stage's from above (fixed costs and warm-up
        counted in); a bound over the limit is refined by pilots 4 times larger until resamples
        outweigh the rest, then extrapolated linearly. The estimate, in seconds."""

        def seconds(k: int) -> float:
            start = time.perf_counter()
            pilot(k)
            return (time.perf_counter() - start) / share

        size = min(max(10, n // 100), 100, n)
        took = seconds(size) if math.isfinite(self.minutes) else 0.0
        estimate = took * n / size
        while estimate > 60 * self.minutes and size < n:
            before, size = (took, size), min(4 * size, n)
            took = seconds(size)
            estimate = took * n / size
            if took > 3 * before[0]:
                rate = (took - before[0]) / (size - before[1])
                estimate = min(estimate, before[0] + rate * (n - before[1]))
                break
        if estimate > 60 * self.minutes:
            raise ConfigError(
                f"limits.max_stage_minutes: {stage} ({setting}={n:,}) would take about "
                f"{estimate / 60:,.1f} minutes, more than the limit of {self.minutes:g}; lower "
                f"{setting} or raise limits.max_stage_minutes"
            )
        return estimate

    def bar(self, desc: str, total: int) -> tqdm:
        """No bar where its stream is not a terminal, as the score stage's."""
        off = None if self.progress else True
        return tqdm(total=total, desc=desc, disable=off, leave=False, file=self.file)

    def counted(self, map_: MapFn, desc: str) -> MapFn:
        def counting(fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[Any]:
            jobs = list(jobs)
            with self.bar(desc, len(jobs)) as bar:
                for out in map_(fn, jobs):
                    bar.update()
                    yield out

        return counting


NO_LIMIT = Limit()
