"""PromptCache: the KV caches of recent greedy answers, kept so that a later prompt that begins
the same way computes only the rest, as llama.cpp's server keeps each slot's last prompt.

    cuts = prompt_cuts(ids, ends)           # where a prompt is cut into the pieces it goes in by
    kept = cache.take(ids, needed)          # a kept generator holding the prompt's first pieces
    cache.keep(Kept(generator, ids, capacity))

Exact by construction. A prompt goes in by pieces cut where `prompt_cuts` says, and the cuts up to
any point depend only on the tokens before it. A later prompt that shares a kept prompt's first
pieces resumes right after them (Generator.rewind_to) and computes the rest in the very pieces a
fresh generator would: the same sums in the same order, so temperature 0 gives the same text
whatever the process answered before. Resuming in the middle of a piece computed the prompt in
other pieces and flipped a greedy near-tie (branch i33peer); resuming at a cut was identical to a
fresh generator on the built-in model, 20 of 20 prompts of 120-1,400 tokens.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

# The prompt goes in by pieces of at most this many tokens, as llama.cpp's batches do: attention's
# scratch grows with piece x context, not prompt x context, and a cancel is seen between
# pieces. A 1,500-token prompt peaked at 446 MiB whole, 334 in pieces of 256 and 320 in
# pieces of 128 on the built-in model (1,275, 970 and 911 at Qwen2.5-0.5B's shape), and ran
# 10-25% faster in pieces of 128 or 256 than whole.
PREFILL_CHUNK = 128
ROOM = 256  # a kept generator is sized in steps of this many tokens, so a longer prompt fits too


def prompt_cuts(ids: Sequence[int], ends: Collection[int], chunk: int = PREFILL_CHUNK) -> list[int]:
    """Where a prompt is cut into the pieces it goes in by, ascending, 0 and len(ids) left out:
    after each end-of-turn token (each message of a chat ends with one, so a shared system
    message or conversation ends on a cut), and wherever `chunk` tokens have gone in since the
    cut before. The window's prompts are cut the same way, so it and a server that keeps
    prompts compute alike."""
    cuts, last = [], 0
    for at, token in enumerate(ids[:-1], 1):
        if token in ends or at - last == chunk:
            cuts.append(at)
            last = at
    return cuts


@dataclass
class Kept:
    generator: object  # onnxruntime-genai's Generator, its sequence the prompt and its answer
    prompt: list[int]
    capacity: int  # the tokens it was sized for (its max_length)
    held: int = 0  # when taken: the prompt's first tokens it holds, rewound to their end
    cuts: list[int] = field(default_factory=list)  # the prompt's, worked out once when kept


class PromptCache:
    """At most `budget_tokens` tokens of KV cache kept, most recently used first."""

    def __init__(self, budget_tokens: int, ends: Collection[int], context_length: int):
        self.budget_tokens = budget_tokens
        self.ends = frozenset(ends)
        self.context_length = context_length
        self._kept: list[Kept] = []
        self.reused_tokens = 0  # prompt tokens taken from kept generators, in all

    def capacity_for(self, needed: int) -> int:
        """What a new generator is sized for: room for `needed` tokens, rounded up when it will
        be kept, so that a longer prompt after the same beginning fits in it too."""
        if not self.budget_tokens:
            return needed
        return max(needed, min(-(-needed // ROOM) * ROOM, self.context_length, self.budget_tokens))

    def take(self, prompt: Sequence[int], needed: int) -> Kept | None:
        """The kept generator with room for `needed` tokens that holds the most of the prompt's
        first pieces, taken out of the cache and rewound to their end (`held`); None when none
        holds a whole piece of it. One that shares only the first pieces of its own prompt (a
        system message) is left for that prompt to come again while the cache has room for a
        new generator: taking it would overwrite what it holds."""
        best, held, whole = None, 0, False
        for kept in self._kept:
            shared = _shared(kept, prompt) if kept.capacity >= needed else 0
            all_of_it = shared >= (kept.cuts[-1] if kept.cuts else 0)
            if shared and (shared, all_of_it) > (held, whole):
                best, held, whole = kept, shared, all_of_it
        if best is None or (not whole and self._has_room(needed)):
            return None
        self._kept.remove(best)
        best.generator.rewind_to(held)
        best.held = held
        self.reused_tokens += held
        return best

    def keep(self, kept: Kept) -> None:
        """Keeps a generator whose prompt went in whole, dropping the least recently used over
        the budget."""
        if kept.capacity > self.budget_tokens:
            return
        kept.cuts = prompt_cuts(kept.prompt, self.ends)
        self._kept.insert(0, kept)
        while sum(k.capacity for k in self._kept) > self.budget_tokens:
            self._kept.pop()

    def _has_room(self, needed: int) -> bool:
        return sum(k.capacity for k in self._kept) + self.capacity_for(needed) <= self.budget_tokens

    def clear(self) -> None:
        self._kept.clear()


def _shared(kept: Kept, prompt: Sequence[int]) -> int:
    """The longest run of first pieces the two prompts share: the last cut of the kept prompt
    at which both still agree, and that leaves the new prompt a token to put in."""
    limit = min(len(kept.prompt), len(prompt) - 1)
    same = next((i for i in range(limit) if kept.prompt[i] != prompt[i]), limit)
    return max((c for c in kept.cuts if c <= same), default=0)
