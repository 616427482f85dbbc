"""The server on a remote engine (ServerConfig.engine_url, `serve --engine-url`): /generate,
/stream_generate, /v1/chat/completions and /v1/ask generate there, while retrieval, the gate and
the embedder stay here and no model process is started; the queue still answers 429; an engine
that cannot be reached is a 502 naming it, and the next request tries it again. Real engines on
loopback: a scripted standard-library engine (what it was sent, the key, going away, dying
mid-answer), our own server on the tiny model, and llama.cpp's server on the tiny GGUF (`make
llama-server`; skipped where it is not built, failed in CI)."""

from __future__ import annotations

import contextlib
import json
from urllib.parse import urlsplit

import httpx
import pytest
from openai import OpenAI

from engine.llm.remote import RemoteLLM
from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from tests.helpers.http_engines import MODEL_ID, WORDS, llama_server, refused_url, scripted_engine
from tests.helpers.live_server import live_server
from tests.helpers.tiny_server import tiny_client, tiny_data_dir

FILTER_Q = "How do I replace the filter cartridge?"
HELLO = [{"role": "user", "content": "Hello"}]
WAIT_S = 60


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_embedder):
    return tiny_data_dir(tmp_path_factory.mktemp("data"), tiny_embedder)


@contextlib.contextmanager
def front(paths, embedder, url: str, **config):
    """Our server on the tiny collection, generating on the engine at `url`; ready."""
    with tiny_client(paths, None, embedder, engine_url=url, **config) as client:
        assert client.get("/ready").status_code == 200, client.app.state.server.load_error
        yield client


def words(count: int) -> str:
    return "".join(WORDS[:count])


def remote(url: str) -> str:
    return f"remote:{urlsplit(url).netloc}"


def sse_data(text: str) -> list:
    events = [block.removeprefix("data: ") for block in text.split("\n\n") if block]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


# -- a scripted engine: what goes there, and what comes back --------------------------------------
def test_chat_completions_are_generated_on_the_engine_and_no_model_process_starts(paths, tiny_embedder):
    with scripted_engine("ok", context_length=4096) as engine, \
            front(paths, tiny_embedder, engine.url + "/v1", engine_key="k1", llm_workers=2) as client:
        pool = client.app.state.server.pool
        llm = pool.any_llm  # (the pool is emptied when the server stops)
        listing = client.get("/v1/models").json()["data"]
        reply = client.post("/v1/chat/completions", json={"messages": HELLO, "max_tokens": 5, "temperature": 0})
    assert pool.workers == 2 and isinstance(llm, RemoteLLM) and llm.pid is None  # no model process
    assert [(m["id"], m["max_model_len"]) for m in listing] == [(MODEL_ID, 4096)]  # the engine's own
    body = reply.json()
    assert reply.status_code == 200 and body["model"] == MODEL_ID
    assert body["choices"][0]["message"]["content"] == words(5)
    assert body["usage"] == {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22,  # the engine's counts
                             "prompt_tokens_details": {"cached_tokens": 0}}
    assert engine.requests[-1]["messages"] == HELLO and engine.requests[-1]["max_tokens"] == 5
    assert all(h.get("Authorization") == "Bearer k1" for h in engine.headers)


def test_the_simple_api_plain_and_streamed_is_generated_on_the_engine(paths, tiny_embedder):
    with scripted_engine("ok") as engine, front(paths, tiny_embedder, engine.url) as client:
        plain = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 4}).json()
        with client.stream("POST", "/stream_generate", json={"prompt": "Hello", "max_new_tokens": 3}) as streamed:
            text = "".join(streamed.iter_text())
    assert plain == {"generated_text": words(4), "tokens_generated": 4, "finish_reason": "length"}
    assert text == words(3)
    assert [r["messages"][-1] for r in engine.requests] == [{"role": "user", "content": "Hello"}] * 2


def test_ask_retrieves_and_quotes_here_and_generates_on_the_engine(paths, tiny_embedder):
    with scripted_engine("ok") as engine, front(paths, tiny_embedder, engine.url) as client:
        record = client.post("/v1/ask", json={"question": FILTER_Q}).json()
    assert record["answerable"] is True and record["lead"][0]["title"] == "filter"  # found here
    assert record["stats"]["provider"] == remote(engine.url) and record["answer"].startswith(WORDS[0].strip())
    prompt = json.dumps(engine.requests[-1]["messages"])
    assert FILTER_Q in prompt and "part F-77" in prompt  # the question and the passage found here


def test_a_full_queue_still_gets_429_at_once(paths, tiny_embedder):
    with scripted_engine("ok") as engine, front(paths, tiny_embedder, engine.url, queue_size=0) as client:
        held = client.app.state.server.pool.admit()  # the one slot is taken, and the queue holds none
        try:
            refused = client.post("/generate", json={"prompt": "Hello"})
        finally:
            held.release_unused()
        after = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 2})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert after.status_code == 200 and len(engine.requests) == 1  # the refused one never went there


def test_an_unreachable_engine_is_a_502_naming_it_and_is_tried_again(paths, tiny_embedder):
    url = refused_url()
    said = f"The engine at {url}: it cannot be reached"
    with front(paths, tiny_embedder, url) as client:  # ready: the manuals' routes do not need it
        assert client.get("/v1/models").json()["data"][0]["id"] == "remote"
        replies = [client.post("/generate", json={"prompt": "Hello"}),
                   client.post("/v1/chat/completions", json={"messages": HELLO, "stream": True}),
                   client.post("/v1/ask", json={"question": FILTER_Q})]
        for reply in replies:
            assert reply.status_code == 502, reply.text
            error = reply.json()["error"]
            assert said in error["message"] and error["code"] == "remote_engine_error"
            assert error["type"] == "server_error"
        with scripted_engine("ok", port=urlsplit(url).port) as back:  # the engine comes (back) up
            again = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 2})
            assert client.get("/v1/models").json()["data"][0]["id"] == MODEL_ID
    assert again.status_code == 200 and again.json()["generated_text"] == words(2) and back.requests


def test_an_engine_that_dies_mid_answer_ends_the_stream_with_an_error_naming_it(paths, tiny_embedder):
    with scripted_engine("dies") as engine, front(paths, tiny_embedder, engine.url) as client:
        chat = client.post("/v1/chat/completions", json={"messages": HELLO, "max_tokens": 10, "stream": True})
        with client.stream("POST", "/stream_generate", json={"prompt": "Hello", "max_new_tokens": 10}) as plain:
            text = "".join(plain.iter_text())
    events = sse_data(chat.text)
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == words(2)
    assert f"The engine at {engine.url}" in events[-1]["error"]["message"]
    assert text.startswith(words(2) + "\n[error] The engine at " + engine.url)


# -- real engines: our own server, llama.cpp's ------------------------------------------------------
def test_our_own_server_as_the_engine_gives_the_same_greedy_text(tmp_path, paths, tiny_llm_dir, tiny_embedder):
    config = ServerConfig(AppPaths(tmp_path).ensure(), provider="cpu", model_name="tiny")
    engine_app = create_app(config, tiny_llm_dir, embedder=tiny_embedder)
    with live_server(engine_app) as engine_url:
        assert engine_app.state.server.wait_loaded(WAIT_S), engine_app.state.server.load_error
        direct = httpx.post(engine_url + "/generate", json={"prompt": "Hello", "max_new_tokens": 8},
                            timeout=WAIT_S).json()
        with front(paths, tiny_embedder, engine_url) as client:
            through = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 8}).json()
            models = client.get("/v1/models").json()["data"]
    assert through == direct and through["tokens_generated"] == 8
    assert [(m["id"], m["max_model_len"]) for m in models] == [("tiny", 2048)]  # the engine's model and context


def test_llama_cpp_as_the_engine_answers_the_openai_client_and_ask(paths, tiny_llm_dir, tiny_embedder):
    with llama_server(tiny_llm_dir.parent / "tiny.gguf") as llama:
        engine_model = httpx.get(llama.url + "/v1/models", timeout=WAIT_S).json()["data"][0]["id"]
        app = create_app(ServerConfig(paths, engine_url=llama.url), None, embedder=tiny_embedder)
        with live_server(app) as base_url:
            assert app.state.server.wait_loaded(WAIT_S), app.state.server.load_error
            client = OpenAI(base_url=base_url + "/v1", api_key="-", max_retries=0, timeout=WAIT_S)
            assert [model.id for model in client.models.list()] == [engine_model]
            stream = client.chat.completions.create(model=engine_model, messages=HELLO, max_tokens=6,
                                                    temperature=0, stream=True)
            chunks = list(stream)
            record = httpx.post(base_url + "/v1/ask", json={"question": FILTER_Q}, timeout=WAIT_S).json()
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[-1].choices[0].finish_reason
    assert "".join(c.choices[0].delta.content or "" for c in chunks)  # llama.cpp's text, relayed
    assert record["stats"]["provider"] == remote(llama.url) and record["stats"]["new_tokens"] > 0
    assert record["lead"][0]["title"] == "filter"
