"""The prompt cache: a kept KV cache serves a later prompt that begins the same way, and the
answer is the one a fresh generator gives."""

from __future__ import annotations

import pytest

from engine.llm.local import LocalLLM, append_prompt
from engine.llm.prompt_cache import PREFILL_CHUNK, Kept, PromptCache, prompt_cuts

END = 2  # an end-of-turn token
SYSTEM = {"role": "system", "content": "You answer from the service manual. " * 6}


def chat(*turns: str) -> list[dict]:
    """A chat with the shared system message; turns alternate user and assistant."""
    return [SYSTEM, *({"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(turns))]


QUESTIONS = ["How do I prime the pump?", "What is the torque of the M8 bolts?",
             "What does alarm E12 mean?", "How often is the filter changed?"]


@pytest.mark.parametrize("ids, cuts", [
    (list(range(10, 2 * PREFILL_CHUNK + 17)), [PREFILL_CHUNK, 2 * PREFILL_CHUNK]),
    ([5, 6, END, 7, 8, END, 9], [3, 6]),  # after each end of a turn
    ([5, 6, 7, END], []),  # not at the end: the last piece holds at least one token
    ([END] * 3, [1, 2]),
    ([END] + list(range(10, 10 + PREFILL_CHUNK + 1)), [1, 1 + PREFILL_CHUNK]),  # counted from the cut before
])
def test_a_prompt_is_cut_after_each_turn_and_every_chunk_of_tokens(ids, cuts):
    assert prompt_cuts(ids, {END}) == cuts


def test_the_cuts_before_a_point_depend_only_on_the_tokens_before_it():
    """What makes resuming exact: two prompts that share their first tokens are cut alike there."""
    shared = [5, 6, END, *range(10, 200), END, 7]
    one, other = prompt_cuts(shared + [1, 2, 3], {END}), prompt_cuts(shared + list(range(300, 600)), {END})
    assert [c for c in one if c < len(shared)] == [c for c in other if c < len(shared)]


class FakeGenerator:
    def __init__(self):
        self.chunks: list[list[int]] = []
        self.rewound: list[int] = []

    def append_tokens(self, ids):
        self.chunks.append([int(i) for i in ids])

    def rewind_to(self, length: int):
        self.rewound.append(length)


def test_the_prompt_goes_in_from_where_the_kept_cache_ends_in_the_pieces_a_fresh_one_uses():
    ids = [5, 6, END, 7, 8, END, 9, 10]
    fresh, resumed = FakeGenerator(), FakeGenerator()
    assert append_prompt(fresh, ids, ends={END})
    assert append_prompt(resumed, ids, start=3, ends={END})
    assert fresh.chunks == [[5, 6, END], [7, 8, END], [9, 10]]
    assert resumed.chunks == fresh.chunks[1:]


def test_the_cache_gives_the_generator_that_shares_the_most_whole_pieces():
    cache = PromptCache(budget_tokens=4096, ends={END}, context_length=8192)
    other_turns, same_turns = FakeGenerator(), FakeGenerator()
    cache.keep(Kept(other_turns, [5, 6, END, 9, 9, END, 1], 512))
    cache.keep(Kept(same_turns, [5, 6, END, 7, 8, END, 1], 512))
    kept = cache.take([5, 6, END, 7, 8, END, 3, 4], needed=100)
    assert kept.generator is same_turns and kept.held == 6 and same_turns.rewound == [6]
    assert cache.take([5, 6, END, 7, 8, END, 3, 4], needed=100) is None  # taken: not twice
    assert cache.reused_tokens == 6


@pytest.mark.parametrize("budget, taken", [(4096, False), (1024, True)])
def test_a_generator_that_shares_only_a_system_message_is_taken_only_when_the_cache_is_full(budget, taken):
    """With room, a new generator is made and the kept one stays for its own chat to come again."""
    cache = PromptCache(budget_tokens=budget, ends={END}, context_length=8192)
    cache.keep(Kept(FakeGenerator(), [5, 6, END, 9, 9, END, 1], 512))
    cache.keep(Kept(FakeGenerator(), [5, 6, END, 8, 8, END, 1], 512))
    kept = cache.take([5, 6, END, 7, 8, END, 3, 4], needed=100)
    assert (kept is not None) == taken and (not taken or kept.held == 3)


@pytest.mark.parametrize("kept, prompt, needed", [
    ([5, 6, END, 1], [5, 7, END, 1], 10),  # differs inside the first piece
    ([5, 6, END, 1], [5, 6, END, 1], 600),  # no room for the answer
    ([5, 6], [5, 6, 7], 10),  # shares tokens but no whole piece
])
def test_the_cache_gives_nothing_without_a_whole_shared_piece_and_room(kept, prompt, needed):
    cache = PromptCache(budget_tokens=4096, ends={END}, context_length=8192)
    cache.keep(Kept(FakeGenerator(), kept, 512))
    assert cache.take(prompt, needed) is None


def test_the_cache_drops_the_least_recently_used_over_its_budget():
    cache = PromptCache(budget_tokens=1024, ends={END}, context_length=8192)
    oldest, newer, newest = FakeGenerator(), FakeGenerator(), FakeGenerator()
    for generator, first in ((oldest, 1), (newer, 2), (newest, 3)):
        cache.keep(Kept(generator, [first, END, 9], 512))
    assert cache.take([1, END, 8], 10) is None
    assert cache.take([2, END, 8], 10).generator is newer
    cache.keep(Kept(FakeGenerator(), [4, END], 2048))  # larger than the whole budget: not kept
    assert cache.take([3, END, 8], 10).generator is newest


def test_sizes_round_up_to_leave_room_only_when_generators_are_kept():
    assert PromptCache(0, {END}, 8192).capacity_for(300) == 300
    assert PromptCache(4096, {END}, 8192).capacity_for(300) == 512
    assert PromptCache(4096, {END}, 8192).capacity_for(256) == 256
    assert PromptCache(4096, {END}, 600).capacity_for(520) == 600  # never past the context
    assert PromptCache(4096, {END}, 8192).capacity_for(5000) == 5000  # over the budget: not kept later


# -- on a model ------------------------------------------------------------------------------
def answers(model: LocalLLM, chats, **kwargs) -> list[tuple[str, int]]:
    results = [model.generate(c, max_new_tokens=12, temperature=0, **kwargs) for c in chats]
    return [(r.text, r.stats.cached_tokens) for r in results]


CHATS = [chat(q) for q in QUESTIONS] + [chat(QUESTIONS[0], "Open the valve.", "And then?"),
                                         chat(QUESTIONS[0])]


def test_a_kept_prompt_gives_the_text_of_a_fresh_generator_on_the_tiny_model(tiny_llm_dir):
    """Questions, a conversation going on, then the same again: each question after the first
    round computes only its answer's header, and every text is the fresh generator's."""
    with LocalLLM(tiny_llm_dir, provider="cpu") as fresh:
        expected = answers(fresh, CHATS * 2)
    assert all(cached == 0 for _, cached in expected)
    with LocalLLM(tiny_llm_dir, provider="cpu", prompt_cache_mib=64) as cached:
        got = answers(cached, CHATS * 2)
        last_cuts = [prompt_cuts(cached.prompt_ids(c, 12), {END})[-1] for c in CHATS]
        assert cached.prompt_cache.reused_tokens == sum(n for _, n in got)
    assert [text for text, _ in got] == [text for text, _ in expected]
    assert [n for _, n in got[:4]] == [0, 0, 0, 0]  # the cache had room: each kept its own
    assert got[4][1] == last_cuts[0]  # the conversation goes on from its first question's cache
    assert [n for _, n in got[len(CHATS):]] == last_cuts


def test_a_sampled_answer_neither_takes_nor_keeps_a_generator(tiny_llm_dir):
    with LocalLLM(tiny_llm_dir, provider="cpu", prompt_cache_mib=64) as model:
        model.generate(CHATS[0], max_new_tokens=4, temperature=0)
        sampled = model.generate(CHATS[0], max_new_tokens=4, temperature=0.8, seed=3)
        assert sampled.stats.cached_tokens == 0
        assert model.generate(CHATS[0], max_new_tokens=4, temperature=0).stats.cached_tokens > 0


@pytest.mark.parametrize("cut_after", ["first text", "first prompt piece"])
def test_an_answer_cut_short_keeps_its_prompt_only_when_the_prompt_went_in_whole(tiny_llm_dir, cut_after):
    """The app cuts an answer short at a stop string or a loop: its prompt is kept all the same
    (the next questions begin with the same rules and example, and the same question may come
    again). A prompt cancelled before it went in whole is not kept."""
    import threading

    with LocalLLM(tiny_llm_dir, provider="cpu") as fresh:
        expected = fresh.generate(CHATS[0], max_new_tokens=12, temperature=0).text
    with LocalLLM(tiny_llm_dir, provider="cpu", prompt_cache_mib=64) as model:
        cancel = threading.Event()
        for piece in model.stream(CHATS[0], max_new_tokens=12, temperature=0, cancel=cancel).turns():
            if piece or cut_after == "first prompt piece":
                cancel.set()
        again = model.generate(CHATS[0], max_new_tokens=12, temperature=0)
    assert again.text == expected
    assert (again.stats.cached_tokens > 0) == (cut_after == "first text")


@pytest.mark.slow
def test_the_real_model_answers_the_same_through_its_prompt_cache(builtin_llm_dir):
    """The built-in model, a conversation going on and questions asked again: the same text,
    word for word, as a model that keeps nothing, with most of each prompt reused."""
    with LocalLLM(builtin_llm_dir, provider="cpu") as fresh:
        expected = answers(fresh, CHATS * 2)
    with LocalLLM(builtin_llm_dir, provider="cpu", prompt_cache_mib=256) as cached:  # room for 11
        got = answers(cached, CHATS * 2)
        prompts = sum(len(cached.prompt_ids(c, 12)) for c in CHATS)
    assert [text for text, _ in got] == [text for text, _ in expected]
    assert sum(n for _, n in got[len(CHATS):]) > 0.8 * prompts  # the second round: nearly all reused
