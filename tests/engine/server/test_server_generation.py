"""The generation routes through FastAPI's test client, on the tiny LLM: the shapes of
/generate, /stream_generate, /v1/models and /v1/chat/completions, the caps (413, a cut
max_new_tokens, 400 for a prompt the context cannot hold), 422, 429 with Retry-After, greedy
determinism and stop strings."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.generation import StopCut

MAX_NEW = 48
MAX_CHARS = 10_000
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory, tiny_llm_dir, tiny_embedder):
    paths = AppPaths(tmp_path_factory.mktemp("server_generation")).ensure()
    config = ServerConfig(paths, provider="cpu", queue_size=0, max_new_tokens=MAX_NEW, max_prompt_chars=MAX_CHARS)
    app = create_app(config, tiny_llm_dir, embedder=tiny_embedder)
    with TestClient(app) as test_client:
        assert app.state.server.wait_loaded(60), app.state.server.load_error
        yield test_client


def state_of(client):
    return client.app.state.server


def chat(client, **fields):
    return client.post("/v1/chat/completions", json={"messages": HELLO, "temperature": 0, **fields})


def sse_events(text: str) -> list:
    events = [line.removeprefix("data: ") for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


# -- the simple API -------------------------------------------------------------------------
def test_generate_answers_in_the_simple_apis_shape(client):
    reply = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 8, "temperature": 0})
    assert reply.status_code == 200
    body = reply.json()
    assert set(body) == {"generated_text", "tokens_generated", "finish_reason"}
    assert body["generated_text"] and 0 < body["tokens_generated"] <= 8
    assert body["finish_reason"] in ("stop", "length")


def generated_tokens(client) -> float:
    line = next(line for line in client.get("/metrics").text.splitlines()
                if line.startswith('offline_assistant_tokens_total{kind="generated"}'))
    return float(line.split()[-1])


def test_generated_tokens_count_in_the_metrics(client):
    before = generated_tokens(client)
    body = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 8, "temperature": 0}).json()
    assert generated_tokens(client) == before + body["tokens_generated"] > before


def test_greedy_generation_is_the_same_every_time_and_streamed_the_same(client):
    request = {"prompt": "Tell me about pumps.", "max_new_tokens": 24, "temperature": 0}
    first = client.post("/generate", json=request).json()
    second = client.post("/generate", json=request).json()
    assert first == second
    with client.stream("POST", "/stream_generate", json=request) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["content-type"].startswith("text/plain")
        pieces = list(streamed.iter_text())
    assert "".join(pieces) == first["generated_text"]


def test_the_prompt_goes_after_the_default_system_message_as_the_cli_does(client):
    from engine.llm import DEFAULT_SYSTEM

    simple = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 12}).json()
    messages = [{"role": "system", "content": DEFAULT_SYSTEM}, *HELLO]
    same = client.post("/v1/chat/completions", json={"messages": messages, "temperature": 0, "max_tokens": 12}).json()
    assert same["choices"][0]["message"]["content"] == simple["generated_text"]


def test_max_new_tokens_over_the_servers_limit_is_cut_to_it(client):
    reply = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 100_000}).json()
    assert reply["tokens_generated"] == MAX_NEW and reply["finish_reason"] == "length"
    usage = chat(client, max_tokens=100_000).json()["usage"]
    assert usage["completion_tokens"] == MAX_NEW


def test_a_prompt_over_the_character_limit_gets_413_naming_the_limit(client):
    reply = client.post("/generate", json={"prompt": "x" * (MAX_CHARS + 1)})
    assert reply.status_code == 413
    assert "max_prompt_chars" in reply.json()["error"]["message"] and str(MAX_CHARS) in reply.json()["error"]["message"]
    halves = [{"role": "system", "content": "x" * (MAX_CHARS // 2)}, {"role": "user", "content": "y" * (MAX_CHARS // 2 + 1)}]
    assert client.post("/v1/chat/completions", json={"messages": halves}).status_code == 413
    assert client.post("/stream_generate", json={"prompt": "x" * (MAX_CHARS + 1)}).status_code == 413


def test_a_prompt_longer_than_the_models_context_gets_400_not_500(client):
    long = "hello " * 1500  # under the character limit, over the tiny model's 2048 tokens
    for route in ("/generate", "/stream_generate"):
        reply = client.post(route, json={"prompt": long, "max_new_tokens": 8})
        assert reply.status_code == 400, route
        assert "too long for the model" in reply.json()["error"]["message"]
    streamed = chat(client, messages=[{"role": "user", "content": long}], stream=True)
    assert streamed.status_code == 400
    assert client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 2}).status_code == 200


@pytest.mark.parametrize("body, problem", [
    (b'{"prompt": "Hello", ', "JSON"),
    (b'{"max_new_tokens": 5}', "prompt"),
    (b'{"prompt": "Hello", "max_new_tokens": "many"}', "max_new_tokens"),
    (b'{"prompt": "Hello", "max_new_tokens": 0}', "max_new_tokens"),
    (b'{"prompt": "Hello", "temperature": -1}', "temperature"),
])
def test_a_malformed_request_gets_422_with_a_message(client, body, problem):
    reply = client.post("/generate", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == 422
    assert problem.lower() in reply.json()["error"]["message"].lower()


def test_a_full_queue_gets_429_with_retry_after_at_once(client):
    pool = state_of(client).pool  # every place on the one process is taken and the queue holds none
    held = [pool.admit() for _ in range(pool.workers * pool.streams)]
    try:
        for route, body in (("/generate", {"prompt": "Hello"}), ("/stream_generate", {"prompt": "Hello"}),
                            ("/v1/chat/completions", {"messages": HELLO})):
            reply = client.post(route, json=body)
            assert reply.status_code == 429, route
            assert int(reply.headers["Retry-After"]) > 0
            assert reply.json()["error"]["type"] == "rate_limit_error"
    finally:
        for ticket in held:
            ticket.release_unused()
    assert client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 2}).status_code == 200


def test_a_server_still_loading_answers_503(tmp_path, tiny_llm_dir, tiny_embedder):
    config = ServerConfig(AppPaths(tmp_path).ensure(), provider="cpu")
    with TestClient(create_app(config, tiny_llm_dir, embedder=tiny_embedder, load=False)) as loading:
        reply = loading.post("/generate", json={"prompt": "Hello"})
    assert reply.status_code == 503 and "loading" in reply.json()["error"]["message"]


# -- OpenAI's shapes ------------------------------------------------------------------------
def test_models_lists_the_served_model(client):
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list"
    assert [model["id"] for model in listing["data"]] == [state_of(client).model_name]
    assert listing["data"][0]["max_model_len"] == state_of(client).pool.any_llm.context_length == 2048


def test_chat_completion_has_openais_shape(client):
    reply = chat(client, model="any-name", max_tokens=6)
    assert reply.status_code == 200
    body = reply.json()
    assert body["object"] == "chat.completion" and body["model"] == state_of(client).model_name
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert choice["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["completion_tokens"] == 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 6


def test_content_parts_and_unknown_fields_are_accepted(client):
    plain = chat(client, max_tokens=6).json()["choices"][0]["message"]["content"]
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}]
    reply = chat(client, messages=parts, max_tokens=6, user="someone", logprobs=False, presence_penalty=0)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == plain


def test_more_than_one_choice_is_refused_with_a_clear_message(client):
    reply = chat(client, n=2)
    assert reply.status_code == 400
    assert "n=1" in reply.json()["error"]["message"]


def test_streamed_chat_has_role_first_finish_last_usage_then_done(client):
    whole = chat(client, max_tokens=12).json()
    streamed = chat(client, max_tokens=12, stream=True, stream_options={"include_usage": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = sse_events(streamed.text)
    assert {event["id"] for event in events} == {events[0]["id"]}
    assert all(event["object"] == "chat.completion.chunk" for event in events)
    *chunks, usage = events
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + ["length"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert usage["choices"] == [] and usage["usage"] == whole["usage"]


def test_streamed_chat_without_include_usage_has_no_usage_chunk(client):
    events = sse_events(chat(client, max_tokens=4, stream=True).text)
    assert all(event["choices"] for event in events)


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_cuts_the_text_there_with_finish_reason_stop(client, stream):
    text = chat(client, max_tokens=MAX_NEW).json()["choices"][0]["message"]["content"]
    stop = text[10:13]
    assert len(stop) == 3 and text.find(stop) >= 1
    reply = chat(client, max_tokens=MAX_NEW, stop=[stop, "never-there"], stream=stream)
    if stream:
        chunks = sse_events(reply.text)
        cut = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        cut, finish = reply.json()["choices"][0]["message"]["content"], reply.json()["choices"][0]["finish_reason"]
    assert cut == text[:text.find(stop)]
    assert finish == "stop"


def test_more_than_four_stop_strings_are_refused(client):
    assert chat(client, stop=["a", "b", "c", "d", "e"]).status_code == 400


# -- StopCut --------------------------------------------------------------------------------
@pytest.mark.parametrize("pieces", [["Pump A. ", "END here"], ["Pump A. E", "N", "D here"], list("Pump A. END here")])
def test_stop_cut_finds_a_stop_string_split_over_pieces(pieces):
    cut = StopCut(("END",))
    shown = [cut.feed(piece) for piece in pieces]
    assert "".join(shown) + cut.flush() == "Pump A. "
    assert cut.stopped


def test_stop_cut_gives_back_a_held_tail_that_was_no_stop_string():
    cut = StopCut(("END",))
    assert cut.feed("the EN") == "the "
    assert cut.feed("GINX") == "ENGINX"
    assert cut.feed(" E") == " "
    assert cut.flush() == "E" and not cut.stopped
