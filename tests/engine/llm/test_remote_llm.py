"""RemoteLLM against real HTTP servers on loopback: llama.cpp's OpenAI-compatible server on
the tiny GGUF (`make llama-server` builds it; skipped where it is not, failed in CI), our own server serving
/v1/chat/completions, and standard-library servers that refuse, hang, fail or die mid-stream.
"""

from __future__ import annotations

import threading

import pytest

from engine.answer.assistant import (
    Assistant,
    AssistantSettings,
    DoneEvent,
    ErrorEvent,
    LeadEvent,
    TextEvent,
)
from engine.answer.retrieval import Retriever
from engine.config import Settings
from engine.errors import GenerationError, RemoteEngineError
from engine.llm.remote import (
    DEFAULT_CONTEXT,
    ENV_URL,
    RemoteLLM,
    chosen_engine,
    engine_base,
)
from engine.llm.tokens import TokenCounter
from tests.helpers.http_engines import (
    MODEL_ID,
    WORDS,
    llama_server,
    refused_url,
    scripted_engine,
)
from tests.helpers.tiny_collection import fill, open_store

MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Hello?"}]
ANSWER = AssistantSettings(relevance_threshold=-10.0)  # every question passes the gate


@pytest.fixture(scope="module")
def tiny_gguf(tiny_llm_dir):
    return tiny_llm_dir.parent / "tiny.gguf"  # what the fixture imported: the same tiny model


@pytest.fixture(scope="module")
def llama(tiny_gguf):
    with llama_server(tiny_gguf) as server:
        yield server


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_embedder):
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as opened:
        yield fill(opened, tiny_embedder)


# -- the address, and which engine --------------------------------------------------------------
def test_the_url_is_taken_with_or_without_v1():
    assert engine_base("http://box:8080/v1/") == "http://box:8080"
    assert engine_base(" http://box:8080 ") == "http://box:8080"
    with pytest.raises(RemoteEngineError, match="'box:8080' is not an http"):
        engine_base("box:8080")


def test_the_option_then_the_environment_then_the_settings_choose_the_engine():
    settings = Settings(engine_url="http://settings:1", engine_key="from-settings")
    assert chosen_engine("http://arg:1", None, settings, environ={}) == ("http://arg:1", "from-settings")
    assert chosen_engine(None, None, settings, environ={ENV_URL: "http://env:1"})[0] == "http://env:1"
    assert chosen_engine(None, None, settings, environ={}) == ("http://settings:1", "from-settings")
    assert chosen_engine(None, None, Settings(), environ={}) == (None, None)


def test_the_key_stays_out_of_the_settings_repr():
    assert "s3cret" not in repr(Settings(engine_url="http://x:1", engine_key="s3cret"))


# -- llama.cpp's server ----------------------------------------------------------------------------
def test_llama_cpp_streams_an_answer_with_stats(llama):
    with RemoteLLM(llama.url + "/v1") as llm:
        assert llm.context_length == DEFAULT_CONTEXT  # llama-cpp-python's /v1/models gives none
        assert llm.provider.startswith("remote:127.0.0.1:") and llm.pid is None and llm.alive()
        stream = llm.stream(MESSAGES, max_new_tokens=12)
        text = "".join(stream)
    assert stream.stats.new_tokens == 12 and stream.stats.finish_reason == "length"
    assert stream.stats.prompt_tokens > 0 and isinstance(text, str)
    assert not llm.alive()


def test_llama_cpp_greedy_answers_are_the_same_twice(llama):
    with RemoteLLM(llama.url) as llm:
        first = llm.generate(MESSAGES, max_new_tokens=10)
        second = llm.generate(MESSAGES, max_new_tokens=10)
    assert first.text == second.text and first.stats.new_tokens == 10


def test_the_assistant_answers_on_the_tiny_collection_through_llama_cpp(llama, store, tiny_embedder,
                                                                         tiny_llm_dir):
    counter = TokenCounter.from_folder(tiny_llm_dir)
    with RemoteLLM(llama.url, token_counter=counter) as llm:
        events = list(Assistant(Retriever(store, tiny_embedder), llm, ANSWER).ask(
            "How do I replace the filter cartridge?"))
    assert not [e for e in events if isinstance(e, ErrorEvent)], events
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stats.answerable
    assert done.stats.provider == llm.provider and done.stats.new_tokens > 0
    assert any(isinstance(e, LeadEvent) for e in events)  # the lead sentences stay local
    assert any(isinstance(e, TextEvent) for e in events)
    assert "generate" in done.stats.stages


def test_llama_cpp_going_away_is_said_with_its_url(tiny_gguf):
    with llama_server(tiny_gguf) as server:
        llm = RemoteLLM(server.url).load()
        server.stop()
        with pytest.raises(RemoteEngineError, match=f"The engine at {server.url}: it cannot be reached"):
            llm.generate(MESSAGES, max_new_tokens=4)
        llm.close()


# -- our own server --------------------------------------------------------------------------------
def test_our_own_server_is_an_engine(tmp_path, tiny_llm_dir, tiny_embedder):
    from engine.paths import AppPaths
    from engine.server.app import create_app
    from engine.server.config import ServerConfig
    from tests.helpers.live_server import live_server

    app = create_app(ServerConfig(AppPaths(tmp_path).ensure()), tiny_llm_dir, embedder=tiny_embedder)
    with live_server(app) as url:
        assert app.state.server.wait_loaded(60), app.state.server.load_error  # 503 until then
        llm = RemoteLLM(url, token_counter=TokenCounter.from_folder(tiny_llm_dir)).load()
        assert llm.model and llm.context_length == 2048  # the tiny model's (and the default)
        stream = llm.stream(MESSAGES, max_new_tokens=8)
        "".join(stream)
        llm.close()
    assert stream.stats.new_tokens == 8 and stream.stats.finish_reason == "length"


# -- a scripted engine: what it says back --------------------------------------------------------
def test_the_request_asks_for_usage_and_sends_the_key_and_model():
    with scripted_engine("ok", context_length=4096) as engine, RemoteLLM(engine.url, key="k1") as llm:
        stream = llm.stream(MESSAGES, max_new_tokens=5)
        text = "".join(stream)
    assert llm.context_length == 4096 and llm.model == MODEL_ID
    assert text == "".join(WORDS[:5])
    assert (stream.stats.prompt_tokens, stream.stats.new_tokens) == (17, 5)  # the usage chunk's
    body = engine.requests[0]
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["model"] == MODEL_ID and body["max_tokens"] == 5 and body["messages"] == MESSAGES
    assert all(h.get("Authorization") == "Bearer k1" for h in engine.headers)


def test_cancel_stops_within_one_token_and_closes_the_stream():
    cancel = threading.Event()
    with scripted_engine("ok") as engine, RemoteLLM(engine.url) as llm:
        stream = llm.stream(MESSAGES, max_new_tokens=200, cancel=cancel)
        pieces = []
        for piece in stream:
            pieces.append(piece)
            cancel.set()
        assert engine.client_left.wait(10)  # the engine was told: its next write failed
    assert pieces == [WORDS[0]] and stream.stats.finish_reason == "cancelled"


def test_a_refused_connection_names_the_url_and_what_to_do():
    url = refused_url()
    with pytest.raises(RemoteEngineError) as raised:
        RemoteLLM(url).load()
    assert f"The engine at {url}: it cannot be reached" in str(raised.value)
    assert "engine_url" in str(raised.value) and raised.value.url == url


def test_a_refused_key_says_to_set_it():
    with scripted_engine("unauthorized") as engine:
        with pytest.raises(RemoteEngineError, match=r"refused the key \(401: Invalid API key\).*engine_key"):
            RemoteLLM(engine.url, key="wrong").load()


@pytest.mark.parametrize("behaviour, said", [("busy", r"it is busy \(429: queue full\)"),
                                             ("fails", r"it failed \(500: out of memory\)")])
def test_a_busy_or_failing_engine_is_a_remote_error(behaviour, said):
    with scripted_engine(behaviour) as engine, RemoteLLM(engine.url) as llm:
        with pytest.raises(RemoteEngineError, match=said):
            llm.generate(MESSAGES, max_new_tokens=4)


def test_a_hanging_engine_times_out():
    with scripted_engine("hangs") as engine, RemoteLLM(engine.url, read_timeout_s=0.3) as llm:
        with pytest.raises(RemoteEngineError, match=r"did not answer within 0.3 s"):
            llm.generate(MESSAGES, max_new_tokens=4)


def test_an_engine_that_dies_mid_stream_is_said_after_the_text_so_far():
    with scripted_engine("dies") as engine, RemoteLLM(engine.url) as llm:
        pieces = []
        with pytest.raises(RemoteEngineError, match="mid-answer|before its end"):
            for piece in llm.stream(MESSAGES, max_new_tokens=10):
                pieces.append(piece)
    assert pieces == WORDS[:2]


def test_a_stream_ended_with_no_finish_reason_is_said_not_taken_as_whole():
    """llama.cpp's server, by default, ends a running stream with [DONE] and no finish reason when
    another request arrives: the answer was cut short, and must not pass for a complete one."""
    with scripted_engine("cut") as engine, RemoteLLM(engine.url) as llm:
        pieces = []
        with pytest.raises(RemoteEngineError, match="without saying why.*--interrupt_requests False"):
            for piece in llm.stream(MESSAGES, max_new_tokens=5):
                pieces.append(piece)
    assert pieces == WORDS[:5]


def test_a_garbled_stream_is_said():
    with scripted_engine("garbled") as engine, RemoteLLM(engine.url) as llm:
        with pytest.raises(RemoteEngineError, match="not JSON"):
            llm.generate(MESSAGES, max_new_tokens=10)


def test_the_assistant_says_an_engine_gone_as_an_error_event(store, tiny_embedder):
    with scripted_engine("ok") as engine:
        llm = RemoteLLM(engine.url).load()
    try:  # the engine went away after it was loaded
        events = list(Assistant(Retriever(store, tiny_embedder), llm, ANSWER).ask("How do I prime the pump?"))
    finally:
        llm.close()
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.error == "RemoteEngineError"
    assert engine.url in error.message
    assert any(isinstance(e, LeadEvent) for e in events)  # what is local was still shown


def test_nothing_to_answer_is_refused_before_any_request():
    with scripted_engine("ok") as engine, RemoteLLM(engine.url) as llm:
        with pytest.raises(GenerationError, match="empty"):
            llm.generate([], max_new_tokens=4)
    assert engine.requests == []


# -- the settings file and the CLI ------------------------------------------------------------------
def test_the_settings_file_keeps_an_engine_and_drops_a_bad_url(tmp_path):
    from engine.config import load_settings, save_settings

    file = tmp_path / "settings.toml"
    save_settings(file, Settings(engine_url="http://gpu-box:8080/v1", engine_model="smol"))
    assert load_settings(file).engine_url == "http://gpu-box:8080/v1"
    assert load_settings(file).engine_model == "smol"
    file.write_text('engine_url = "gpu-box:8080"\nengine_key = 7\n', encoding="utf-8")
    assert (load_settings(file).engine_url, load_settings(file).engine_key) == (None, None)


def test_generate_streams_from_the_engine_of_engine_url(tmp_path, capsys, monkeypatch):
    import json

    from engine.cli.main import main

    monkeypatch.delenv(ENV_URL, raising=False)
    with scripted_engine("ok") as engine:
        code = main(["generate", "Hello?", "--engine-url", engine.url + "/v1", "--engine-key", "k2",
                     "--max-new-tokens", "3", "--json", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0] == "".join(WORDS[:3])
    stats = json.loads(out[-1])
    assert stats["model"] == MODEL_ID and stats["provider"] == remote_provider(engine.url)
    assert stats["new_tokens"] == 3 and engine.headers[-1].get("Authorization") == "Bearer k2"


def test_generate_says_an_unreachable_engine_named_by_the_environment(tmp_path, capsys, monkeypatch):
    from engine.cli.main import main

    url = refused_url()
    monkeypatch.setenv(ENV_URL, url)
    code = main(["generate", "Hello?", "--data-dir", str(tmp_path)])
    assert code == 1 and f"The engine at {url}: it cannot be reached" in capsys.readouterr().err


def remote_provider(url: str) -> str:
    return "remote:" + url.split("//", 1)[1]


@pytest.mark.slow
def test_the_built_in_model_on_llama_cpp_answers_from_the_manuals(builtin_data_dir, store, tiny_embedder):
    """The built-in SmolLM2's GGUF served by llama.cpp, counted with its prepared tokenizer."""
    from engine.llm.remote import remote_llm
    from engine.models.registry import BUILTIN_LLM, find_package_file
    from engine.paths import AppPaths

    gguf = find_package_file(BUILTIN_LLM.files[0])
    with llama_server(gguf) as server, remote_llm(AppPaths(builtin_data_dir), server.url) as llm:
        assert llm.token_counter is not None  # the built-in tokenizer.json: the served model's own here
        events = list(Assistant(Retriever(store, tiny_embedder), llm, ANSWER).ask(
            "What does error E-12 mean?"))
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stats.answerable and done.answer, events
    assert done.stats.provider == llm.provider and done.stats.new_tokens > 0
