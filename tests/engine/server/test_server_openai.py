"""The official `openai` client against a live uvicorn on loopback: /v1/models, chat
completions plain and streamed, a client that disconnects (its generation is cancelled), and
an LLM child killed mid-stream (that client gets an error, the next request succeeds)."""

from __future__ import annotations

import os
import signal
import threading
import time

import openai
import pytest
from openai import OpenAI

from engine.llm import DEFAULT_SYSTEM
from engine.llm.local import GenerationStream
from engine.llm.process import LLMClient
from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from tests.helpers.live_server import live_server

WAIT_S = 30
LONG = 1500  # tokens: the tiny model never ends this early at temperature 0 (finish "length")
HELLO = [{"role": "user", "content": "Hello"}]


class Run:
    """One generation as the server's thread saw it: its pieces, when its cancel flag was
    first found set, its stats; optionally its child paused (SIGSTOP) at the first piece, so
    that a test acts while the generation is surely unfinished."""

    def __init__(self, cancel, pause_pid: int | None, hold: bool = False):
        self._cancel = cancel
        self._pause_pid = pause_pid
        self._hold = hold  # after the first piece, the server's thread gets nothing more until released
        self.released = threading.Event()
        self.pieces = 0
        self.pieces_after_cancel = 0
        self.cancel_seen = threading.Event()
        self.first_piece = threading.Event()
        self.ended = threading.Event()
        self.stats = None

    def is_set(self) -> bool:  # the flag the LLM client polls
        if self._cancel is not None and self._cancel.is_set():
            self.cancel_seen.set()
        return self.cancel_seen.is_set()

    def watch(self, stream):
        try:
            for piece in stream:
                self.pieces += 1
                self.pieces_after_cancel += self.cancel_seen.is_set()
                if self.pieces == 1 and self._pause_pid:
                    os.kill(self._pause_pid, signal.SIGSTOP)
                self.first_piece.set()
                yield piece
                while self._hold and not self.released.wait(0.05):
                    self.is_set()  # the server's cancel, seen while its client waits for text
            self.stats = stream.stats
            yield stream.stats
        finally:
            # The request's thread may find the flag set between two pieces and close the stream
            # before this generator polls it while held: the flag is looked at once more here.
            self.is_set()
            self.ended.set()


class WatchedLLM(LLMClient):
    """The real LLM client, whose runs the tests can look at."""

    def __init__(self, folder):
        super().__init__(folder, "cpu")
        self.runs: list[Run] = []
        self.pause_next = False
        self.hold_next = False

    def stream(self, messages, *, cancel=None, **options):
        run = Run(cancel, self.pid if self.pause_next else None, self.hold_next)
        self.pause_next = self.hold_next = False
        self.runs.append(run)
        return GenerationStream(run.watch(super().stream(messages, cancel=run, **options)))


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_llm_dir, tiny_embedder):
    paths = AppPaths(tmp_path_factory.mktemp("server_openai")).ensure()
    config = ServerConfig(paths, provider="cpu", max_new_tokens=LONG, model_name="tiny")
    llms: list[WatchedLLM] = []

    def make_llm():
        llms.append(WatchedLLM(tiny_llm_dir))
        return llms[-1]

    app = create_app(config, tiny_llm_dir, make_llm=make_llm, embedder=tiny_embedder)
    with live_server(app) as base_url:
        assert app.state.server.wait_loaded(60), app.state.server.load_error
        client = OpenAI(base_url=base_url + "/v1", api_key="not-needed-on-loopback", max_retries=0, timeout=WAIT_S)
        yield client, llms[0]


def test_models_list_names_the_served_model(served):
    client, _ = served
    assert [model.id for model in client.models.list()] == ["tiny"]


def test_a_chat_completion_through_the_openai_client(served):
    client, _ = served
    reply = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=10, temperature=0)
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    assert reply.usage.completion_tokens == 10
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 10


def test_a_streamed_chat_matches_the_plain_one_with_role_first_finish_last_and_usage(served):
    client, _ = served
    plain = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=16, temperature=0)
    chunks = list(client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    *choices, usage = chunks
    assert {chunk.id for chunk in chunks} == {chunks[0].id}
    assert choices[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in choices] == [None] * (len(choices) - 1) + ["length"]
    assert "".join(c.choices[0].delta.content or "" for c in choices) == plain.choices[0].message.content
    assert usage.choices == [] and usage.usage == plain.usage


def test_a_client_that_disconnects_cancels_its_generation(served):
    client, llm = served
    # Its child stops at the first piece, so the generation is unfinished when the client leaves:
    # the tiny model writes LONG tokens in a fraction of a second, faster than a loaded machine
    # lets the client read one chunk. Under load the child could still finish before its SIGSTOP
    # (the suite failed so once), so the server's thread is also held after the first piece.
    llm.pause_next = llm.hold_next = True
    stream = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=LONG, temperature=0, stream=True)
    next(chunk for chunk in stream if chunk.choices and chunk.choices[0].delta.content)
    closed_at = time.perf_counter()
    stream.close()
    run = llm.runs[-1]
    try:
        assert run.cancel_seen.wait(WAIT_S), "the server did not cancel the generation"
        latency_ms = (time.perf_counter() - closed_at) * 1000
    finally:
        os.kill(llm.pid, signal.SIGCONT)  # it reads the cancel and ends
        run.released.set()
    assert run.ended.wait(WAIT_S)
    print(f"disconnect -> cancel seen: {latency_ms:.1f} ms; {run.pieces} pieces read")
    # no stats: the request's thread closed the stream first (the client read it to its end)
    assert run.stats is None or (run.stats.finish_reason == "cancelled" and run.stats.new_tokens < LONG)
    assert run.pieces_after_cancel == 0  # not one piece more once the flag was seen
    assert client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=2).usage.completion_tokens == 2


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_child_killed_mid_stream_gives_that_client_an_error_and_the_next_request_succeeds(served):
    client, llm = served
    llm.pause_next = True  # its child stops at the first piece: the kill lands mid-generation
    stream = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=LONG, temperature=0, stream=True)
    with pytest.raises(openai.APIError, match="stopped unexpectedly"):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content and llm.alive():
                os.kill(llm.pid, signal.SIGKILL)
    stream.close()
    dead = llm.runs[-1]
    assert dead.ended.wait(WAIT_S) and dead.stats is None
    again = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=4, temperature=0)
    assert again.usage.completion_tokens == 4 and llm.alive()


def test_a_child_killed_during_a_plain_request_gives_a_json_error(served):
    client, llm = served
    llm.pause_next = True
    outcome = {}

    def ask() -> None:
        try:
            client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=LONG, temperature=0)
        except openai.APIStatusError as exc:
            outcome["error"] = exc

    asking = threading.Thread(target=ask)
    asking.start()
    assert _next_run(llm).first_piece.wait(WAIT_S)
    os.kill(llm.pid, signal.SIGKILL)
    asking.join(WAIT_S)
    error = outcome["error"]
    assert error.status_code in (500, 503)
    assert "stopped unexpectedly" in error.message
    assert client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=3).usage.completion_tokens == 3


def _next_run(llm: WatchedLLM) -> Run:
    """The run the request just sent starts (waited for: it starts in the server's thread)."""
    count = len(llm.runs)
    deadline = time.monotonic() + WAIT_S
    tick = threading.Event()
    while len(llm.runs) == count and llm.pause_next:
        assert time.monotonic() < deadline, "the request never reached the model"
        tick.wait(0.005)
    return llm.runs[-1]


@pytest.mark.slow
def test_the_builtin_model_through_the_openai_client(tmp_path, builtin_llm_dir, tiny_embedder):
    config = ServerConfig(AppPaths(tmp_path).ensure(), max_new_tokens=64)
    app = create_app(config, builtin_llm_dir, embedder=tiny_embedder)
    with live_server(app) as base_url:
        assert app.state.server.wait_loaded(120), app.state.server.load_error
        client = OpenAI(base_url=base_url + "/v1", api_key="-", max_retries=0, timeout=120)
        question = [{"role": "system", "content": DEFAULT_SYSTEM},
                    {"role": "user", "content": "Name the capital of France."}]
        reply = client.chat.completions.create(model=app.state.server.model_name, messages=question,
                                               max_tokens=16, temperature=0)
        streamed = list(client.chat.completions.create(model="x", messages=question, max_tokens=16, temperature=0,
                                                       stream=True, stream_options={"include_usage": True}))
    text = reply.choices[0].message.content
    assert "Paris" in text
    assert reply.choices[0].finish_reason in ("stop", "length")
    usage = reply.usage
    assert 0 < usage.completion_tokens <= 16 and usage.prompt_tokens > 10
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert (reply.choices[0].finish_reason == "length") == (usage.completion_tokens == 16)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text
    again = streamed[-1].usage  # the same chat again: its prompt from the cache, the same text
    assert (again.prompt_tokens, again.completion_tokens) == (usage.prompt_tokens, usage.completion_tokens)
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.prompt_tokens - 8 < again.prompt_tokens_details.cached_tokens < usage.prompt_tokens
