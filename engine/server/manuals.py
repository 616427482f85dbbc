"""The manuals routes: POST /v1/ask (an answer from a collection, as JSON or as typed SSE events),
GET /v1/documents (a collection's documents) and POST /v1/embeddings (OpenAI's shape, with the
built-in embedder).

Every route's engine work runs in a thread (engine.server.bridge); the event loop only waits.
An answer takes a place in the LLM pool's queue first (429 when it is full); in the thread it
retrieves, judges and shows the lead at once, and waits for a free model process only to generate
(LeasedLLM). A client that goes away sets the request's cancel flag, which stops its wait or its
generation before the next token.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import threading
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from engine.answer.events_json import event_data
from engine.errors import EngineError
from engine.server.bridge import call_in_thread, iterate_in_thread, with_pauses_said
from engine.server.pool import LeasedLLM
from engine.server.replies import PromptTooLong, body_for, error_reply, named_body, named_reply

log = logging.getLogger(__name__)
router = APIRouter(tags=["manuals"])
KEEPALIVE_S = 15.0  # a comment line this often while nothing else is sent (see _sse)

# -- POST /v1/ask ----------------------------------------------------------------------------

class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class AskRequest(BaseModel):
    question: str = Field(description="The question about the manuals.")
    collection: str | None = Field(None, description="A collection's name; none: the server's default.")
    history: list[Turn] = Field(default_factory=list, description="The conversation so far, oldest first.")
    stream: bool = Field(False, description="Typed server-sent events instead of one JSON object.")


@router.post("/v1/ask", summary="Answer a question from a collection of manuals, with citations")
async def ask(body: AskRequest, request: Request):
    """JSON: the answer, the manual's own lead sentences, the citations, whether the manuals
    cover it, the relevance figures, the checked sentences and the stage timings. With
    "stream": true, the events as they come: `event: passages|lead|text|citations|done|error`,
    each with a JSON object."""
    state = request.app.state.server
    name = state.check_collection(body.collection)  # the client's mistakes first, then a 503
    chars = len(body.question) + sum(len(turn.content) for turn in body.history)
    if chars > state.config.max_prompt_chars:
        raise PromptTooLong(f"The question and its history are {chars} characters; this server takes "
                            f"at most {state.config.max_prompt_chars} (max_prompt_chars). Shorten them.")
    state.require_ready()
    history = [turn.model_dump() for turn in body.history]
    ticket = state.pool.admit()
    cancel = threading.Event()

    def events():
        counter = state.pool.counter()
        try:
            with contextlib.ExitStack() as held:
                if counter is not None:  # the answer waits for a model process only to generate
                    llm = LeasedLLM(ticket, cancel, counter)
                else:  # tokens counted by a model process: leased from the start
                    llm = held.enter_context(ticket.lease(cancel)).llm
                with state.answering(name, llm) as session:
                    for event in session.ask(body.question, history, cancel):
                        if event.kind == "passages":
                            state.metrics.record_retrieval(event.relevance)
                        yield event
        finally:
            ticket.release_unused()  # a refused question never leased: its place goes back

    if body.stream:
        return StreamingResponse(_sse(iterate_in_thread(events, cancel)), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    answered = await call_in_thread(lambda: list(events()), cancel, request.is_disconnected)
    return _ask_reply(body.question, name, answered)


def event_json(event) -> dict:
    """One Assistant event as JSON (engine.answer.events_json); an error as the error body."""
    if event.kind == "error":
        return named_body(event.message, event.error)
    return event_data(event)


async def _sse(events):
    """The events as server-sent events; a failure becomes an `error` event, the stream's last.
    While a question waits in the queue for a model process, a comment line every KEEPALIVE_S
    keeps the stream alive (a thin kiosk waits READ_TIMEOUT_S for the next line, proxies less)."""
    try:
        async for event in with_pauses_said(events, KEEPALIVE_S):
            if event is None:
                yield ": waiting\n\n"
                continue
            yield _sse_line(event.kind, event_json(event))
    except EngineError as exc:
        yield _sse_line("error", body_for(exc))
    except Exception as exc:
        log.exception("An answer failed")
        yield _sse_line("error", named_body(f"The server failed: {type(exc).__name__}", "ServerError"))


def _sse_line(kind: str, data: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _ask_reply(question: str, collection: str, events: list) -> JSONResponse | dict:
    record: dict = {"question": question, "collection": collection, "lead": [], "citations": []}
    for event in events:
        if event.kind == "error":
            return named_reply(event.message, event.error)
        data = event_data(event)
        if event.kind == "passages":
            record.update(answerable=data["answerable"], relevance=data["relevance"], passages=data["passages"])
        elif event.kind == "lead":
            record["lead"] = data["quotes"]
        elif event.kind == "citations":
            record["citations"] = data["citations"]
        elif event.kind == "done":
            record.update(answer=data["answer"], answerable=data["answerable"], sentences=data["sentences"],
                          stats=data["stats"])
    return record


# -- GET /v1/documents -----------------------------------------------------------------------

@router.get("/v1/documents", summary="The documents of a collection")
async def documents(request: Request, collection: str | None = None):
    """Each document with the fields `offline-assistant-cli docs list --json` prints."""
    state = request.app.state.server
    name = state.check_collection(collection)
    found = await call_in_thread(lambda: state.documents(name), threading.Event())
    return {"object": "list", "collection": name, "data": [doc.to_dict() for doc in found]}


@router.get("/v1/documents/{document_id}/{name}", summary="A document's file (a thin kiosk shows cited pages from it)")
async def document_file(document_id: int, name: str, request: Request, collection: str | None = None):
    """The file of one document of the collection, by its id (a passage's document_id) and its
    file name, never by a path. Its ETag is the SHA-256 the document was indexed from:
    If-None-Match with it gets 304."""
    state = request.app.state.server
    collection = state.check_collection(collection)
    found = await call_in_thread(lambda: state.documents(collection), threading.Event())
    document = next((doc for doc in found if doc.id == document_id), None)
    file = Path(document.path) if document is not None else None
    if file is None or file.name != name or not file.is_file():
        return error_reply(404, f"The collection '{collection}' has no document {document_id} named “{name}” "
                                "on this server; ask again: the collection may have been updated.",
                           code="document_not_found")
    tag = f'"{document.sha256}"'
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers={"ETag": tag})
    return FileResponse(file, headers={"ETag": tag}, filename=file.name)


# -- POST /v1/embeddings ---------------------------------------------------------------------

class EmbeddingsRequest(BaseModel):
    input: str | list[str] = Field(description="A text, or a list of texts.")
    model: str = Field("", description="Any name: the server has one embedder, named in the reply.")
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None


@router.post("/v1/embeddings", summary="Embed texts with the built-in embedder (OpenAI's shape)")
async def embeddings(body: EmbeddingsRequest, request: Request):
    """Unit vectors from the embedder that indexes the manuals. A text longer than the embedder's
    token limit is cut to it, as indexing cuts it; the header X-Inputs-Truncated lists the indexes
    of the texts that were cut."""
    state = request.app.state.server
    embedder = state.require_embedder()
    texts = [body.input] if isinstance(body.input, str) else body.input
    if len(texts) > state.config.max_embedding_inputs:
        return error_reply(413, f"{len(texts)} inputs in one request; this server takes at most "
                                f"{state.config.max_embedding_inputs}.", code="too_many_inputs")
    vectors, tokens = await call_in_thread(lambda: _embed(embedder, texts), threading.Event(),
                                           request.is_disconnected)
    limit = embedder.max_tokens - 2  # the [CLS] and [SEP] the tokenizer adds count towards it
    cut = [str(i) for i, n in enumerate(tokens) if n > limit]
    data = [{"object": "embedding", "index": i, "embedding": _encoded(v, body.encoding_format)}
            for i, v in enumerate(vectors)]
    used = sum(min(n, limit) + 2 for n in tokens)
    reply = {"object": "list", "data": data, "model": embedder.model_id.split(":")[0],
             "usage": {"prompt_tokens": used, "total_tokens": used}}
    return JSONResponse(reply, headers={"X-Inputs-Truncated": ",".join(cut)} if cut else None)


def _embed(embedder, texts: list[str]):
    if not texts:
        return [], []
    return embedder.encode_documents(texts), embedder.count_tokens_batch(texts)


def _encoded(vector, encoding_format: str):
    if encoding_format == "base64":  # little-endian float32, as OpenAI sends it
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
