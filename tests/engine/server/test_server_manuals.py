"""The manuals routes (engine/server/manuals.py): /v1/ask as JSON and as typed SSE events, over
the tiny collection, embedder and random LLM (in its own process, as the server runs it);
/v1/documents; /v1/embeddings (the openai client too, against a live uvicorn). One slow test
asks the built-in models a question from an indexed R manual."""

from __future__ import annotations

import base64
import contextlib
import json
import threading

import numpy as np
import pytest

from engine.answer.assistant import NOT_FOUND
from engine.paths import AppPaths
from engine.types import StoredDocument
from tests.helpers.tiny_collection import MANUALS
from tests.helpers.tiny_server import tiny_client, tiny_data_dir

FILTER_Q = "How do I replace the filter cartridge?"
OFF_TOPIC_Q = "What is the capital of France?"


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_embedder):
    return tiny_data_dir(tmp_path_factory.mktemp("data"), tiny_embedder)


@pytest.fixture(scope="module")
def client(paths, tiny_llm_dir, tiny_embedder):
    with tiny_client(paths, tiny_llm_dir, tiny_embedder, max_embedding_inputs=4, max_prompt_chars=500) as c:
        assert c.get("/ready").status_code == 200
        yield c


def sse_events(client, body: dict) -> list[tuple[str, dict]]:
    with client.stream("POST", "/v1/ask", json={**body, "stream": True}) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        text = "".join(reply.iter_text())
    assert text.endswith("\n\n")
    events = []
    for block in text[:-2].split("\n\n"):
        kind, data = block.split("\n")
        assert kind.startswith("event: ") and data.startswith("data: "), block
        events.append((kind[len("event: "):], json.loads(data[len("data: "):])))
    return events


# -- /v1/ask ---------------------------------------------------------------------------------

def test_ask_answers_with_the_lead_its_citations_checked_sentences_and_timings(client):
    reply = client.post("/v1/ask", json={"question": FILTER_Q})
    assert reply.status_code == 200, reply.text
    record = reply.json()
    assert record["question"] == FILTER_Q and record["collection"] == "default"
    assert record["answerable"] is True and record["relevance"]["relevant"] is True
    first = record["lead"][0]
    assert (first["text"], first["title"], first["document"], first["path"]) == \
        ("Replace filter cartridge yearly.", "filter", "filter.md", "/manuals/filter.md")
    assert (first["page"], first["page_label"], first["span"]) == (1, "1", [1, 0, len(first["text"])])
    assert record["citations"], record
    for citation in record["citations"]:
        assert {"number", "title", "document", "path", "page", "page_label", "quote", "cited", "spans"} <= set(citation)
        assert citation["path"] in MANUALS and citation["title"] == citation["document"].removesuffix(".md")
    answer = record["answer"]
    assert isinstance(answer, str) and answer != NOT_FOUND
    for sentence in record["sentences"]:
        assert sentence["text"] == answer[sentence["start"]:sentence["end"]]
        assert isinstance(sentence["supported"], bool)
    stats = record["stats"]
    assert stats["answerable"] is True and {"gate", "lead", "generate", "total"} <= set(stats["timings_s"])
    assert stats["new_tokens"] > 0 and stats["time_to_first_token_s"] > 0
    assert record["passages"][0]["path"] == "/manuals/filter.md"


def test_a_question_the_manuals_do_not_cover_is_refused(client):
    record = client.post("/v1/ask", json={"question": OFF_TOPIC_Q}).json()
    assert record["answerable"] is False and record["relevance"]["relevant"] is False
    assert record["answer"] == NOT_FOUND and record["lead"] == [] and record["sentences"] == []
    assert record["citations"] and not any(c["cited"] for c in record["citations"])  # the nearest passages
    assert record["stats"]["answerable"] is False and "generate" not in record["stats"]["timings_s"]


def test_ask_streams_one_typed_event_per_assistant_event_in_order(client):
    events = sse_events(client, {"question": FILTER_Q, "history": [
        {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]})
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["passages", "lead"] and kinds[-2:] == ["citations", "done"]
    assert set(kinds[2:-2]) == {"text"}, kinds
    data = dict(events)
    assert data["passages"]["answerable"] is True and data["passages"]["passages"]
    assert data["lead"]["quotes"][0]["text"] == "Replace filter cartridge yearly."
    assert "".join(d["text"] for k, d in events if k == "text").strip()
    assert data["done"]["answer"] and data["done"]["stats"]["answerable"] is True
    assert data["done"]["lead"] == data["lead"]["quotes"]
    assert data["citations"]["citations"][0]["title"]


def test_a_queued_question_shows_its_lead_at_once_and_keeps_its_stream_alive(client, monkeypatch):
    """Retrieval, the gate and the lead do not wait for a model process: a thin kiosk shows the
    manual's words while every process is busy. It gives up after READ_TIMEOUT_S without a line,
    so the question, waiting to generate, sends comments."""
    from engine.server import manuals

    monkeypatch.setattr(manuals, "KEEPALIVE_S", 0.05)
    pool = client.app.state.server.pool
    held, release = threading.Event(), threading.Event()

    def hold_every_slot():
        with contextlib.ExitStack() as leases:
            for _ in range(pool.workers * pool.streams):
                leases.enter_context(pool.admit().lease())
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_every_slot)
    holder.start()
    assert held.wait(10)
    threading.Timer(0.5, release.set).start()
    try:
        with client.stream("POST", "/v1/ask", json={"question": FILTER_Q, "stream": True}) as reply:
            blocks = "".join(reply.iter_text())[:-2].split("\n\n")
    finally:
        release.set()
        holder.join(10)
    kinds = [block.split("\n")[0] for block in blocks]
    assert kinds[:3] == ["event: passages", "event: lead", ": waiting"], kinds[:4]  # the lead, then the wait
    events = [kind for kind in kinds if kind != ": waiting"]
    assert events[2] == "event: text" and events[-1] == "event: done"


def test_a_streamed_refusal_has_no_lead(client):
    events = sse_events(client, {"question": OFF_TOPIC_Q})
    assert [kind for kind, _ in events] == ["passages", "text", "citations", "done"]
    assert events[1][1] == {"text": NOT_FOUND} and events[-1][1]["answerable"] is False


def test_an_error_of_the_assistant_is_a_reply_or_the_streams_last_event(client):
    reply = client.post("/v1/ask", json={"question": "   "})
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "engine_error" and "question is empty" in reply.json()["error"]["message"]
    events = sse_events(client, {"question": "   "})
    assert [kind for kind, _ in events] == ["error"]
    assert events[0][1] == reply.json()


def test_ask_refuses_bad_input_before_the_queue(client):
    assert client.post("/v1/ask", json={"question": "Oil?", "collection": "nope"}).status_code == 404
    bad_role = client.post("/v1/ask", json={"question": "Oil?", "history": [{"role": "system", "content": "x"}]})
    assert bad_role.status_code == 422 and "history.0.role" in bad_role.json()["error"]["message"]
    long = client.post("/v1/ask", json={"question": "Oil?", "history": [{"role": "user", "content": "x" * 500}]})
    assert long.status_code == 413 and long.json()["error"]["code"] == "prompt_too_long"
    assert client.app.state.server.pool.waiting == 0


def test_ask_while_loading_is_503_with_retry_after(paths, tiny_llm_dir, tiny_embedder):
    with tiny_client(paths, tiny_llm_dir, tiny_embedder, load=False) as loading:
        reply = loading.post("/v1/ask", json={"question": FILTER_Q})
        assert reply.status_code == 503 and reply.headers["retry-after"]
        assert "loading" in reply.json()["error"]["message"]


# -- /v1/documents ---------------------------------------------------------------------------

def test_documents_lists_the_collection_as_docs_list_json_does(client):
    reply = client.get("/v1/documents")
    assert reply.status_code == 200
    listing = reply.json()
    assert listing["collection"] == "default"
    keys = set(StoredDocument("x", "ready").to_dict())  # what `docs list --json` prints
    assert all(set(doc) == keys for doc in listing["data"])
    assert sorted(doc["path"] for doc in listing["data"]) == sorted(MANUALS)
    assert {doc["status"] for doc in listing["data"]} == {"ready"}
    assert client.get("/v1/documents", params={"collection": "default"}).json() == listing
    assert client.get("/v1/documents", params={"collection": "nope"}).status_code == 404


# -- /v1/embeddings --------------------------------------------------------------------------

def test_embeddings_are_the_embedders_vectors_as_floats_or_base64(client, tiny_embedder):
    texts = ["Replace filter cartridge yearly.", "Prime pump with water."]
    expected = tiny_embedder.encode_documents(texts)
    floats = client.post("/v1/embeddings", json={"input": texts, "model": "any"}).json()
    assert floats["object"] == "list" and floats["model"] == tiny_embedder.model_id.split(":")[0]
    assert [d["index"] for d in floats["data"]] == [0, 1] and {d["object"] for d in floats["data"]} == {"embedding"}
    assert np.allclose([d["embedding"] for d in floats["data"]], expected, atol=1e-6)
    tokens = sum(n + 2 for n in tiny_embedder.count_tokens_batch(texts))
    assert floats["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}

    packed = client.post("/v1/embeddings", json={"input": texts[0], "encoding_format": "base64"}).json()
    vector = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(vector, expected[0], atol=1e-6)


def test_embeddings_cut_long_inputs_and_say_so_and_cap_the_count(client, tiny_embedder):
    long = "oil " * (tiny_embedder.max_tokens * 2)
    reply = client.post("/v1/embeddings", json={"input": ["short", long]})
    assert reply.status_code == 200 and reply.headers["x-inputs-truncated"] == "1"
    assert np.allclose(reply.json()["data"][1]["embedding"], tiny_embedder.encode_documents([long])[0], atol=1e-6)
    assert "x-inputs-truncated" not in client.post("/v1/embeddings", json={"input": "short"}).headers
    too_many = client.post("/v1/embeddings", json={"input": ["a"] * 5})
    assert too_many.status_code == 413 and too_many.json()["error"]["code"] == "too_many_inputs"
    assert client.post("/v1/embeddings", json={"input": "a", "encoding_format": "hex"}).status_code == 422


def test_the_openai_client_reads_our_embeddings(paths, tiny_llm_dir, tiny_embedder):
    from openai import OpenAI

    from engine.server.app import create_app
    from engine.server.config import ServerConfig
    from tests.helpers.live_server import live_server

    app = create_app(ServerConfig(paths, api_key="k"), tiny_llm_dir, embedder=tiny_embedder,
                     make_llm=_never_loads)
    with live_server(app) as base_url:
        client = OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
        got = client.embeddings.create(input=["Oil level weekly.", "Drain old oil."], model="minilm")  # base64
        floats = client.embeddings.create(input="Oil level weekly.", model="minilm", encoding_format="float")
    expected = tiny_embedder.encode_documents(["Oil level weekly.", "Drain old oil."])
    assert np.allclose([d.embedding for d in got.data], expected, atol=1e-6)
    assert np.allclose(floats.data[0].embedding, expected[0], atol=1e-6)
    assert got.usage.prompt_tokens > 0


class _never_loads:
    """An LLM process that fails to start: the embeddings route needs only the embedder."""

    def load(self):
        from engine.errors import EngineError

        raise EngineError("no model in this test")


# -- the real built-in models: slow ------------------------------------------------------------

@pytest.mark.slow
def test_ask_answers_from_an_indexed_r_manual_and_cites_it(builtin_data_dir, builtin_llm_dir, manuals_dir, capsys):
    from fastapi.testclient import TestClient

    from engine.cli.main import main
    from engine.server.app import create_app
    from engine.server.config import ServerConfig

    collection = "server-r-manuals"
    assert main(["index", str(manuals_dir / "R-data.pdf"), str(manuals_dir / "R-FAQ.pdf"),
                 "--data-dir", str(builtin_data_dir), "--collection", collection]) == 0
    capsys.readouterr()
    app = create_app(ServerConfig(AppPaths(builtin_data_dir), collection=collection, provider="cpu"),
                     builtin_llm_dir)
    with TestClient(app) as client:
        assert app.state.server.wait_loaded(120), app.state.server.load_error
        reply = client.post("/v1/ask", json={"question": "How do I read an Excel spreadsheet into R?"})
    assert reply.status_code == 200, reply.text
    record = reply.json()
    assert record["answerable"] is True and record["answer"].strip()
    assert record["citations"][0]["document"] == "R-data.pdf"
    assert record["lead"] and record["lead"][0]["document"] == "R-data.pdf"
    assert record["stats"]["new_tokens"] > 0 and record["stats"]["timings_s"]["generate"] > 0


class _WaitsForCancel:
    """An Assistant whose ask, after its first piece of text, waits for the request's cancel
    flag: only a client that went away can set it then (the answer is not finished)."""

    def __init__(self, assistant):
        self._assistant = assistant
        self.cancelled = None  # True/False once the wait is over
        self.over = threading.Event()

    def ask(self, question, history, cancel):
        completed = False
        try:
            for event in self._assistant.ask(question, history, cancel):
                yield event
                if event.kind == "text" and self.cancelled is None:
                    self.cancelled = cancel.wait(30)
            completed = True
        finally:
            if self.cancelled is None:  # closed at a yield: the request's thread saw the cancel first
                self.cancelled = not completed and cancel.is_set()
            self.over.set()


def test_a_client_that_leaves_a_stream_cancels_its_answer(paths, tiny_llm_dir, tiny_embedder):
    import httpx

    from engine.server.app import create_app
    from engine.server.config import ServerConfig
    from tests.helpers.live_server import live_server

    app = create_app(ServerConfig(paths), tiny_llm_dir, embedder=tiny_embedder)
    state = app.state.server
    real, spies = state.answering, []

    @contextlib.contextmanager
    def spied(name, llm):
        with real(name, llm) as session:
            spies.append(_WaitsForCancel(session))
            yield spies[-1]

    state.answering = spied
    with live_server(app) as base_url:
        assert state.wait_loaded(60)
        with httpx.stream("POST", base_url + "/v1/ask", json={"question": FILTER_Q, "stream": True},
                          timeout=30) as reply:
            for line in reply.iter_lines():
                if line == "event: text":
                    break  # and close the connection
        (spy,) = spies
        assert spy.over.wait(30)
        assert spy.cancelled is True
        assert state.pool.running == 0 and state.pool.waiting == 0  # the slot went back
