"""Small immutable records that cross module and process boundaries (plain data, no pickle needed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 means greedy: the same text every time
    top_p: float = 1.0
    top_k: int = 50
    seed: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    new_tokens: int
    time_to_first_token_s: float
    tokens_per_s: float
    total_s: float
    finish_reason: FinishReason
    provider: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GenerationResult:
    text: str
    stats: GenerationStats
