"""Per-stage wall-clock timings, for answers' stats and the metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StageTimes:
    timings_s: dict[str, float] = field(default_factory=dict)
    stages: list[str] = field(default_factory=list)  # in the order they first ran

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - start)

    def add(self, stage: str, seconds: float) -> None:
        self.timings_s[stage] = self.timings_s.get(stage, 0.0) + seconds
        if stage not in self.stages:
            self.stages.append(stage)

    def merge(self, other: "StageTimes") -> None:
        for stage in other.stages:
            self.add(stage, other.timings_s[stage])
