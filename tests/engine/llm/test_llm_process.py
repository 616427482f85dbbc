"""LLMClient: the model in a child process, so the caller's threads never stall on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.encoders.onnx_session import physical_cores
from engine.errors import EngineProcessError, GenerationError, ModelError
from engine.llm.local import PREFILL_CHUNK, LocalLLM, append_prompt
from engine.llm.process import LLMClient, _Child
from engine.llm.prompt_cache import prompt_cuts
from engine.llm.tokens import TokenCounter
from tests.helpers.service_manual import SECTIONS

# With the GGUF's own default system prompt, "The" and "L" are 0.08 logits apart for the first
# token, so int8-activation kernels (llama.cpp's too) may tip either way; a plain system
# message gives a clear answer.
FRANCE = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "What is the capital of France?"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon who loves tea."}]
SENTENCE = "The pump must be primed with water before it is started. "
REPO = Path(__file__).resolve().parents[3]
# Texts whose counts must be the model's own: prose, code, odd spacing, other scripts, and
# the chat template's special tokens written as plain text.
TEXTS = [*(f"{heading}. {body}" for heading, body in SECTIONS.items()), SENTENCE, " is this his?",
         "def f(a, b):\n\tif a:\n        return a + b  # comment\n", "  two  spaces\t\ttabs\n\n\n",
         "Café déjà vu, naïve résumé", "日本語のテキストと中文", "emoji 👍🏽 and 3.14159, 1,000,000",
         "<|im_start|>user\nHi<|im_end|>", "x" * 500, ""]


class TickGaps:
    """A 10 ms timer thread in this process; `longest` is the longest gap between its ticks."""

    def __init__(self):
        self.longest = 0.0
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(0.01):
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            self.ticks += 1
            last = now

    def __enter__(self) -> "TickGaps":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def long_prompt(client: LLMClient, tokens: int) -> list[dict]:
    per_sentence = client.count_tokens(SENTENCE)
    return [{"role": "user", "content": SENTENCE * max(1, tokens // per_sentence)}]


class KillOnFirstLook:
    """A cancel flag that kills the child the first time the client looks at it, which is
    while the child works on the request."""

    def __init__(self, pid: int):
        self.pid = pid
        self.killed = False

    def is_set(self) -> bool:
        if not self.killed:
            self.killed = True
            os.kill(self.pid, signal.SIGKILL)
        return False


@pytest.fixture(scope="module")
def tiny(tiny_llm_dir):
    with LLMClient(tiny_llm_dir, provider="cpu") as client:
        yield client


@pytest.fixture(scope="module")
def tiny_here(tiny_llm_dir):
    """The tiny model in this process: what onnxruntime-genai's own tokenizer says."""
    with LocalLLM(tiny_llm_dir, provider="cpu") as model:
        yield model


@pytest.fixture
def sent(monkeypatch) -> list[dict]:
    """Every request a client sends to its child process, in order."""
    messages: list[dict] = []
    real_send = _Child.send

    def recording(child, message):
        messages.append(message)
        real_send(child, message)

    monkeypatch.setattr(_Child, "send", recording)
    return messages


def a_chat(content: str) -> list[dict]:
    return [{"role": "system", "content": "Answer from the sources."},
            {"role": "user", "content": "How do I change the filter?"},
            {"role": "assistant", "content": "Open the side cover [1]."},
            {"role": "user", "content": content}]


def counts_agree(client: LLMClient, model: LocalLLM) -> None:
    assert [client.count_tokens(t) for t in TEXTS] == [model.count_tokens(t) for t in TEXTS]
    assert client.template_overhead == model.template_overhead
    for chat in (a_chat(" ".join(SECTIONS.values())), a_chat(SENTENCE)[::3], a_chat("\n leading")):
        read = len(model.prompt_ids(chat, 1))
        # Counted piece by piece plus the template: a piece that merges with the template's
        # text around it reads a token or two fewer, never more.
        counted = sum(client.count_tokens(m["content"]) for m in chat) + client.template_tokens(len(chat))
        assert read <= counted <= read + 2, chat


@pytest.fixture(scope="module")
def real(builtin_llm_dir):
    with LLMClient(builtin_llm_dir, provider="cpu") as client:
        yield client


# -- the tiny model: fast --------------------------------------------------------------------
def test_load_runs_the_model_in_another_process(tiny):
    assert tiny.pid is not None and tiny.pid != os.getpid()
    assert tiny.provider == "cpu"
    assert tiny.context_length > 0


def test_prefill_does_not_stall_the_callers_threads(tiny):
    tokens = min(600, tiny.context_length - 32)
    with TickGaps() as gaps:
        result = tiny.generate(long_prompt(tiny, tokens), max_new_tokens=4)
    assert result.stats.prompt_tokens >= tokens * 0.8
    assert gaps.longest < 0.1, f"a 10 ms timer stalled for {gaps.longest * 1000:.0f} ms"


def test_greedy_gives_the_same_text_twice(tiny):
    first = tiny.generate(FRANCE, max_new_tokens=16, temperature=0)
    second = tiny.generate(FRANCE, max_new_tokens=16, temperature=0)
    assert first.text == second.text
    assert first.stats.new_tokens == second.stats.new_tokens > 0


def test_stats_come_back_as_generation_stats(tiny):
    result = tiny.generate(FRANCE, max_new_tokens=3)
    assert result.stats.new_tokens <= 3
    assert result.stats.finish_reason in ("stop", "length")
    assert result.stats.provider == "cpu"
    assert result.stats.prompt_tokens > 5


def test_cancel_stops_the_stream_at_once(tiny):
    limit = min(200, tiny.context_length // 2)
    cancel = threading.Event()
    stream = tiny.stream(STORY, max_new_tokens=limit, cancel=cancel)
    pieces = 0
    for _ in stream:
        pieces += 1
        cancel.set()
    assert pieces == 1
    assert stream.stats.finish_reason == "cancelled"
    assert stream.stats.new_tokens < limit
    # the client is ready for the next request
    assert tiny.generate(FRANCE, max_new_tokens=2).stats.new_tokens > 0


class RecordingGenerator:
    """Stands in for onnxruntime-genai's generator: the chunks it was given."""

    def __init__(self):
        self.chunks: list[list[int]] = []

    def append_tokens(self, ids):
        self.chunks.append([int(i) for i in ids])


class SetAfter:
    """A cancel flag that turns set after `calls` checks."""

    def __init__(self, calls: int):
        self.calls = calls

    def is_set(self) -> bool:
        self.calls -= 1
        return self.calls < 0


def test_the_prompt_goes_in_by_chunks_in_order():
    generator = RecordingGenerator()
    ids = list(range(2 * PREFILL_CHUNK + 7))
    assert append_prompt(generator, ids)
    assert [len(c) for c in generator.chunks] == [PREFILL_CHUNK, PREFILL_CHUNK, 7]
    assert sum(generator.chunks, []) == ids


def test_a_cancel_during_the_prompt_stops_before_its_next_chunk():
    generator = RecordingGenerator()
    assert not append_prompt(generator, list(range(3 * PREFILL_CHUNK)), SetAfter(1))
    assert len(generator.chunks) == 1


def test_a_prompt_in_chunks_gives_the_tokens_of_the_whole_prompt(tiny_here):
    """onnxruntime-genai continues from its KV cache: chunks change nothing but memory."""
    import onnxruntime_genai as og

    ids = tiny_here.prompt_ids([{"role": "user", "content": SENTENCE * 12}], 16)
    assert len(ids) > 2 * 64

    def greedy(chunk: int) -> list[int]:
        params = og.GeneratorParams(tiny_here._model)
        params.set_search_options(max_length=len(ids) + 16, min_length=len(ids) + 16, do_sample=False)
        generator = og.Generator(tiny_here._model, params)
        append_prompt(generator, ids, chunk=chunk)
        tokens = []
        while not generator.is_done():
            generator.generate_next_token()
            tokens.append(int(generator.get_next_tokens()[0]))
        return tokens

    assert greedy(64) == greedy(len(ids))


def test_a_long_prompt_pauses_between_its_pieces_with_no_text(tiny_here):
    """Between a prompt's pieces the stream yields "" (a turn for the other generations of its
    process); iterating the stream never shows one, and the text is the same."""
    chat = [{"role": "user", "content": SENTENCE * 40}]
    ids = tiny_here.prompt_ids(chat, 8)
    pieces = len([c for c in prompt_cuts(ids, tiny_here.prompt_cache.ends) if c > 0]) + 1
    assert pieces >= 3
    turns = list(tiny_here.stream(chat, max_new_tokens=8).turns())
    assert turns[:pieces - 1] == [""] * (pieces - 1) and all(turns[pieces - 1:])  # then tokens' text
    shown = list(tiny_here.stream(chat, max_new_tokens=8))
    assert "" not in shown and "".join(shown) == "".join(turns)


def test_a_pause_of_a_stream_sends_nothing_to_the_caller():
    """The child's side: a generation's turn with no text sends no message, and the turn ends."""
    from multiprocessing import Pipe

    from engine.llm.process import _Stream
    from engine.types import GenerationStats, GenerationStream

    class Paused:
        def stream(self, messages, cancel=None, **params):
            return GenerationStream(iter(["", "", "Hi", GenerationStats(9, 1, 0.1, 10.0, 0.1, "stop", "cpu")]))

    caller, child = Pipe()
    stream = _Stream(Paused(), {"id": 7, "messages": [], "params": {}}, cancel=None)
    assert [stream.step(child), stream.step(child)] == [True, True] and not caller.poll()
    assert stream.step(child) and json.loads(caller.recv_bytes()) == {"type": "piece", "id": 7, "text": "Hi"}
    assert not stream.step(child) and json.loads(caller.recv_bytes())["type"] == "done"


@pytest.mark.parametrize("prompting, cancelled, turns", [
    ({7: True, 3: False}, (), [7, 3]),         # a new prompt goes in between the other's tokens
    ({7: True, 5: True, 3: False}, (), [5, 3]),  # two prompts: the first come first, whole
    ({7: True, 5: True}, (7,), [7, 5]),  # a cancelled one ends at its turn, without waiting
    ({7: False, 5: False}, (), [7, 5]),
    ({}, (), [])])
def test_prompts_go_in_one_after_another_and_text_is_never_held(prompting, cancelled, turns):
    from types import SimpleNamespace

    from engine.llm.process import _this_round

    streams = {i: SimpleNamespace(prompting=flag) for i, flag in prompting.items()}
    assert _this_round(streams, cancelled) == turns


def test_the_child_forgets_cancels_of_generations_that_ended():
    """A cancel may come after its generation ended; only the running and waiting ones' stay."""
    from multiprocessing import Pipe

    from engine.llm.process import _Inbox

    caller, child = Pipe()
    for message in ({"op": "cancel", "id": 3}, {"op": "generate", "id": 4}, {"op": "cancel", "id": 4},
                    {"op": "cancel", "id": 5}):
        caller.send_bytes(json.dumps(message).encode())
    inbox = _Inbox(child)
    inbox.read()
    assert inbox.cancelled == {3, 4, 5}
    inbox.keep_cancels_of({5})
    assert inbox.cancelled == {4, 5}  # 4 waits to start, 5 runs; 3 ended before its cancel came


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _threads_added(folder: Path, threads: int | None) -> int:
    """Threads a LocalLLM adds when it loads, counted in a fresh interpreter (this one's other
    threads come and go with other tests)."""
    script = (
        "import os, sys; from engine.llm.local import LocalLLM\n"
        "count = lambda: len(os.listdir('/proc/self/task'))\n"
        "before = count()\n"
        f"with LocalLLM(sys.argv[1], provider='cpu', threads={threads!r}):\n"
        "    print(count() - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_the_model_runs_on_the_threads_asked_for(tiny_llm_dir):
    """onnxruntime's pool adds threads - 1 workers to the caller's thread; left to itself
    onnxruntime-genai ran one on a 2-core machine."""
    assert _threads_added(tiny_llm_dir, 3) == 2
    assert _threads_added(tiny_llm_dir, None) == physical_cores() - 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_folder_that_sets_its_threads_keeps_them(tiny_llm_dir, tmp_path):
    import json
    import shutil

    folder = shutil.copytree(tiny_llm_dir, tmp_path / "model")
    config_file = folder / "genai_config.json"
    config = json.loads(config_file.read_text())
    config["model"]["decoder"].setdefault("session_options", {})["intra_op_num_threads"] = 2
    config_file.write_text(json.dumps(config))
    assert _threads_added(folder, 4) == 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_the_child_runs_on_the_threads_asked_for(tiny_llm_dir):
    counts = {}
    for threads in (1, 3):
        with LLMClient(tiny_llm_dir, provider="cpu", threads=threads) as client:
            counts[threads] = _threads(client.pid)
    assert counts[3] - counts[1] == 2


def test_a_client_with_two_streams_answers_two_threads_at_once_token_by_token(tiny_llm_dir):
    """A server's process takes two requests at once: the second, sent once the first has begun,
    gets text before the first ends, and each gets the text it gets alone."""
    chats = [FRANCE, STORY]
    tokens = 400  # the first stream runs ~0.15 s after its first piece (48 left too short a gap under load)
    with LLMClient(tiny_llm_dir, provider="cpu", streams=2) as client:
        alone = [client.generate(chat, max_new_tokens=tokens, temperature=0).text for chat in chats]
        events: list[tuple[int, str]] = []
        texts: dict[int, str] = {}
        first_began = threading.Event()

        def answer(n: int) -> None:
            if n == 1:
                first_began.wait(60)
            pieces = []
            for piece in client.stream(chats[n], max_new_tokens=tokens, temperature=0):
                events.append((n, "piece"))
                pieces.append(piece)
                first_began.set()
            events.append((n, "done"))
            texts[n] = "".join(pieces)

        threads = [threading.Thread(target=answer, args=(n,)) for n in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert [texts[0], texts[1]] == alone
    first_done = min(events.index((n, "done")) for n in (0, 1))
    assert {n for n, kind in events[:first_done] if kind == "piece"} == {0, 1}  # interleaved


def test_a_stream_left_unfinished_is_cancelled_by_the_next_request(tiny):
    expected = tiny.generate(FRANCE, max_new_tokens=8).text
    stream = iter(tiny.stream(STORY, max_new_tokens=min(200, tiny.context_length // 2)))
    next(stream)
    assert tiny.generate(FRANCE, max_new_tokens=8).text == expected
    with pytest.raises(GenerationError, match="newer request"):
        next(stream)


def test_breaking_out_of_a_stream_leaves_the_client_ready(tiny):
    expected = tiny.generate(FRANCE, max_new_tokens=8).text
    for _ in tiny.stream(STORY, max_new_tokens=min(200, tiny.context_length // 2)):
        break  # the dropped stream cancels the child's work and reads up to its end
    assert tiny.generate(FRANCE, max_new_tokens=8).text == expected


def test_an_engine_error_in_the_child_arrives_as_the_same_class(tiny):
    too_long = [{"role": "user", "content": "word " * (tiny.context_length * 2)}]
    pid = tiny.pid
    with pytest.raises(GenerationError, match="too long") as caught:
        tiny.generate(too_long, max_new_tokens=4)
    assert type(caught.value) is GenerationError
    assert tiny.pid == pid  # the child lives on
    assert tiny.generate(FRANCE, max_new_tokens=2).stats.new_tokens > 0


def test_token_counts_come_from_the_models_tokenizer(tiny):
    assert tiny.count_tokens("") == 0
    assert tiny.count_tokens(SENTENCE * 2) > tiny.count_tokens(SENTENCE) > 0


def test_token_counts_are_onnxruntime_genais_own(tiny, tiny_here):
    counts_agree(tiny, tiny_here)


def test_counting_tokens_sends_nothing_to_the_child(tiny, sent):
    assert tiny.token_counter is not None
    for text in TEXTS:
        tiny.count_tokens(text)
    tiny.template_tokens(4)
    assert sent == []


def test_a_folder_without_tokenizer_json_is_counted_by_the_child(tiny, sent, monkeypatch):
    expected = tiny.count_tokens(SENTENCE)
    monkeypatch.setattr(tiny, "token_counter", None)  # as for a SentencePiece tokenizer.model only
    assert tiny.count_tokens(SENTENCE) == expected
    assert [m["op"] for m in sent] == ["count_tokens"]


def test_a_token_counter_needs_a_readable_tokenizer_json(tmp_path):
    assert TokenCounter.from_folder(tmp_path) is None
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="tokenizer"):
        TokenCounter.from_folder(tmp_path)


def test_the_model_refuses_a_prompt_too_long_and_never_shortens_it(tiny_here):
    """The caller fits the prompt; the model no longer drops turns of its own accord."""
    half = "word " * (tiny_here.context_length // 2)
    chat = [{"role": "user", "content": half}, {"role": "assistant", "content": half},
            {"role": "user", "content": "and now?"}]
    with pytest.raises(GenerationError, match="too long"):
        tiny_here.generate(chat, max_new_tokens=4)
    assert tiny_here.generate(chat[-1:], max_new_tokens=2).stats.new_tokens > 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_child_gives_an_engine_process_error_then_restarts(tiny_llm_dir):
    with LLMClient(tiny_llm_dir, provider="cpu") as client:
        first_pid = client.pid
        killer = KillOnFirstLook(first_pid)
        stream = client.stream(STORY, max_new_tokens=min(200, client.context_length // 2),
                               cancel=killer)
        with pytest.raises(EngineProcessError, match="stopped unexpectedly.*SIGKILL"):
            list(stream)
        assert killer.killed
        result = client.generate(FRANCE, max_new_tokens=4)
        assert result.stats.new_tokens > 0
        assert client.pid not in (None, first_pid)


def test_requests_need_load_first(tiny_llm_dir):
    client = LLMClient(tiny_llm_dir, provider="cpu")
    with pytest.raises(GenerationError, match="not loaded"):
        client.generate(FRANCE, max_new_tokens=2)
    client.load()
    client.close()
    with pytest.raises(GenerationError, match="not loaded"):
        client.generate(FRANCE, max_new_tokens=2)


def test_close_stops_the_child(tiny_llm_dir):
    client = LLMClient(tiny_llm_dir, provider="cpu").load()
    pid = client.pid
    client.close()
    client.close()  # twice is fine
    assert client.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped


def test_a_folder_that_is_no_model_gives_model_error(tmp_path):
    client = LLMClient(tmp_path, provider="cpu")
    with pytest.raises(ModelError):
        client.load()
    assert client.pid is None


def test_the_child_does_not_rerun_the_callers_script(tmp_path, tiny_llm_dir):
    """A GUI's main script imports Qt; the spawned child must not run it again."""
    marks = tmp_path / "marks.txt"
    script = tmp_path / "caller.py"
    script.write_text(
        "import sys\n"
        f"open({str(marks)!r}, 'a').write('ran\\n')\n"
        "import PySide6.QtCore  # as the GUI's main module would\n"
        "if __name__ == '__main__':\n"
        "    from engine.llm.process import LLMClient\n"
        f"    with LLMClient({str(tiny_llm_dir)!r}, provider='cpu') as client:\n"
        "        print(client.generate([{'role': 'user', 'content': 'hi'}],"
        " max_new_tokens=2).stats.finish_reason)\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert marks.read_text().splitlines() == ["ran"]


# -- the real built-in model: slow -----------------------------------------------------------
@pytest.mark.slow
def test_real_600_token_prefill_does_not_stall_the_callers_threads(real):
    prompt = long_prompt(real, 600)
    with TickGaps() as gaps:
        result = real.generate(prompt, max_new_tokens=2)
    print(f"\n600-token prefill: {result.stats.prompt_tokens} prompt tokens, first token after "
          f"{result.stats.time_to_first_token_s:.2f} s, longest timer gap "
          f"{gaps.longest * 1000:.1f} ms over {gaps.ticks} ticks")
    assert result.stats.prompt_tokens >= 550
    assert gaps.longest < 0.1, f"a 10 ms timer stalled for {gaps.longest * 1000:.0f} ms"


@pytest.mark.slow
def test_real_token_counts_are_onnxruntime_genais_own(real, builtin_llm_dir):
    with LocalLLM(builtin_llm_dir, provider="cpu") as model:
        counts_agree(real, model)
    assert real.template_tokens(2) <= 40  # grounding.TEMPLATE_TOKENS covers a chat without history


# "What is the capital of France?" is a near tie for SmolLM2-135M's first token on some CPUs
# (here an AMD EPYC greedily wrote "La femme de France..."); this wording is not, with or
# without a system message.
FRANCE_PLAIN = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Name the capital of France."}]


@pytest.mark.slow
def test_real_model_knows_the_capital_of_france(real):
    first = real.generate(FRANCE_PLAIN, max_new_tokens=24, temperature=0)
    second = real.generate(FRANCE_PLAIN, max_new_tokens=24, temperature=0)
    assert first.text == second.text
    assert "Paris" in first.text


@pytest.mark.slow
def test_real_cancel_stops_within_one_token(real):
    cancel = threading.Event()
    stream = real.stream(STORY, max_new_tokens=64, cancel=cancel)
    pieces = 0
    for _ in stream:
        pieces += 1
        cancel.set()
    assert pieces == 1
    assert stream.stats.finish_reason == "cancelled"
    assert stream.stats.new_tokens <= 3  # the child saw the cancel before its next token


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_real_child_killed_mid_stream(builtin_llm_dir):
    started = time.perf_counter()
    with LLMClient(builtin_llm_dir, provider="cpu") as client:
        print(f"\nchild process start + model load: {time.perf_counter() - started:.2f} s")
        pid = client.pid
        pieces = 0
        with pytest.raises(EngineProcessError, match="SIGKILL"):
            for _ in client.stream(STORY, max_new_tokens=64):
                pieces += 1
                if pieces == 1:
                    os.kill(pid, signal.SIGKILL)
        assert pieces < 64
        assert client.generate(FRANCE, max_new_tokens=4).stats.new_tokens > 0
        assert client.pid != pid
