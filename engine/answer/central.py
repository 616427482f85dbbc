"""CentralServer: whole answers from a central `serve`, for a thin kiosk (settings.server_url).

    server = CentralServer("http://answers.plant:8765", key)
    server.check()                                   # CentralServerError when it cannot serve
    for event in server.ask(question, history, cancel, collection):
        ...                                          # the typed events a local Assistant yields
    copy = server.document(passage, folder)          # a cited document, as a local file

Retrieval, the gate, the lead and the model all run on the server (/v1/ask, streamed); the
events come back typed as engine.answer.events_json reads them, so the window, the kiosk and
`ask` draw them as their own. Each passage's path becomes where its document is on the server,
{url}/v1/documents/{id}/{file name}: never a path of this machine's that happens to exist. A
cited document is fetched from there and kept in a folder by the server's name for it; the
SHA-256 it was indexed from (the reply's ETag) decides whether the copy kept is still current.
AnswerSession decides when to use it and what answers instead (engine/answer/session.py).

An answer that breaks off (the replica behind a load balancer was killed mid-answer) or that the
balancer refuses with 502/503/504 is asked again, up to RETRIES times: the balancer sends it to
another replica. What the person has already seen is not shown twice: passages and lead equal to
those shown are skipped, and the text carries on from where it stopped (temperature 0 writes the
same words again; where they differ, the done event's final text replaces the whole). A server
that cannot be reached at all is not asked again: the kiosk says so at once.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx

from engine.answer.events_json import event_of
from engine.atomic_file import write_atomic
from engine.errors import CentralServerError
from engine.llm.supervisor import ModelStatus
from engine.types import CancelFlag, Passage

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 2.0  # a kiosk says "cannot be reached" within this, not after a minute
READ_TIMEOUT_S = 120.0  # the longest wait for the next event (a busy server queues questions)
ENV_URL = "OFFLINE_ASSISTANT_SERVER_URL"
ENV_KEY = "OFFLINE_ASSISTANT_SERVER_KEY"
RETRIES = 2  # a broken-off answer is asked again this many times (another replica takes it)
RETRY_PAUSE_S = 0.5  # times the try's number: the balancer's health check needs a moment
RETRIED_STATUSES = frozenset({502, 503, 504})  # a balancer with no replica left, or one still loading


class _BrokenOff(CentralServerError):
    """The answer broke off or was refused by a balancer: worth asking again."""


def chosen_server(settings, environ=os.environ) -> tuple[str | None, str | None]:
    """(url, key) of the central server, or (None, None): the environment, then the settings."""
    url = environ.get(ENV_URL) or settings.server_url
    if not url:
        return None, None
    return url, environ.get(ENV_KEY) or settings.server_key


class CentralServer:
    def __init__(self, url: str, key: str | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 read_timeout_s: float = READ_TIMEOUT_S, retries: int = RETRIES):
        self.url = url.rstrip("/").removesuffix("/v1")
        self.key = key or None
        self.name = urlsplit(self.url).netloc
        self._documents = self.url + "/v1/documents/"
        self.retries = retries
        self.retried = 0  # answers asked again after breaking off (a benchmark counts them)
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
                                    headers=headers)

    def status(self) -> ModelStatus:
        """What the status bar shows while the server answers."""
        return ModelStatus(f"server {self.name}", f"server:{self.name}", None)

    def check(self) -> None:
        """CentralServerError unless the server is ready to answer (/ready)."""
        reply = self._request("GET", "/ready")
        self._refuse_failed(reply)

    def ask(self, question: str, history: Sequence[dict] = (), cancel: CancelFlag | None = None,
            collection: str | None = None) -> Iterator:
        """The answer's events as the server streams them. CentralServerError when it cannot be
        reached, refuses the request, or the stream still breaks off after RETRIES more tries."""
        body = {"question": question, "history": list(history), "stream": True}
        if collection:
            body["collection"] = collection
        shown = _Shown()
        for attempt in range(self.retries + 1):
            try:
                yield from self._try(body, cancel, shown)
                return
            except _BrokenOff as exc:
                if attempt == self.retries or (cancel is not None and cancel.is_set()):
                    raise
                log.warning("%s Asking again (%d of %d).", exc, attempt + 1, self.retries)
                self.retried += 1
                time.sleep(RETRY_PAUSE_S * (attempt + 1))

    def _try(self, body: dict, cancel, shown: _Shown) -> Iterator:
        shown.start_try()
        try:
            with self._client.stream("POST", self.url + "/v1/ask", json=body) as reply:
                if reply.status_code != 200:
                    reply.read()
                    try:
                        self._refuse_failed(reply)
                    except CentralServerError as exc:
                        if reply.status_code in RETRIED_STATUSES:
                            raise _BrokenOff(str(exc)) from None
                        raise
                for event in self._events(reply, cancel):
                    event = shown.new_part(event)
                    if event is not None:
                        yield event
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout) as exc:
            raise self._unreachable(exc) from exc  # asking again would only wait as long again
        except httpx.TransportError as exc:  # the connection was cut: a replica killed mid-answer
            raise _BrokenOff(f"The server at {self.name} broke off the answer ({type(exc).__name__}).") from exc
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def _events(self, reply: httpx.Response, cancel) -> Iterator:
        kind, ended = None, False
        for line in reply.iter_lines():
            if cancel is not None and cancel.is_set():
                return  # leaving closes the connection: the server stops the answer
            if line.startswith("event: "):
                kind = line[7:].strip()
            elif line.startswith("data: ") and kind is not None:
                event = self._event(kind, line[6:])
                ended = kind in ("done", "error")
                yield event
        if not ended:
            raise _BrokenOff(f"The server at {self.name} broke off the answer.")

    def _event(self, kind: str, data: str):
        try:
            event = event_of(kind, json.loads(data))
        except (ValueError, KeyError, TypeError) as exc:
            raise CentralServerError(f"The server at {self.name} sent an answer this kiosk cannot "
                                     f"read ({kind}: {exc}); is it a different version?") from exc
        return self._located(event)

    def _located(self, event):
        """`event` with each passage's path where its document is on this server."""
        def at(passage: Passage) -> Passage:
            return replace(passage, path=f"{self._documents}{int(passage.document_id)}/{passage.document}")

        if event.kind == "passages":
            return replace(event, passages=tuple(at(p) for p in event.passages))
        if event.kind == "lead":
            return replace(event, quotes=tuple(replace(q, passage=at(q.passage)) for q in event.quotes))
        if event.kind == "citations":
            return replace(event, citations=tuple(replace(c, passage=at(c.passage)) for c in event.citations))
        if event.kind == "done":
            return replace(event, lead=tuple(replace(q, passage=at(q.passage)) for q in event.lead))
        return event

    def holds(self, passage: Passage) -> bool:
        """Whether `passage` came from this server (its path is one of the server's documents)."""
        return passage.path.startswith(self._documents)

    def document(self, passage: Passage, folder: Path) -> Path:
        """The passage's document (one of this server's) as a file in `folder`: fetched, or the
        copy kept there when the server says it is unchanged."""
        if not self.holds(passage):
            raise CentralServerError(f"“{passage.document}” is not a document of the server at {self.name}.")
        number, _, name = passage.path[len(self._documents):].partition("/")
        name = Path(name).name  # the server's word for it: never a path out of `folder`
        copy = Path(folder) / self.name.replace(":", "_") / str(int(number)) / (
            name if name not in ("", ".", "..") else "document")
        tag = copy.with_name(copy.name + ".sha256")
        headers = {}
        if copy.is_file() and tag.is_file():
            headers["If-None-Match"] = f'"{tag.read_text(encoding="ascii").strip()}"'
        reply = self._request("GET", f"/v1/documents/{int(number)}/{quote(name)}", headers=headers)
        if reply.status_code == 304:
            return copy
        self._refuse_failed(reply)
        copy.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(copy, reply.content)
        write_atomic(tag, reply.headers.get("ETag", "").strip('"').encode("ascii", "replace"))
        return copy

    def close(self) -> None:
        self._client.close()

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            return self._client.request(method, self.url + path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: httpx.HTTPError) -> CentralServerError:
        what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "cannot be reached"
        return CentralServerError(f"The server at {self.name} {what} ({type(exc).__name__}).")

    def _refuse_failed(self, reply: httpx.Response) -> None:
        if reply.status_code < 400:
            return
        if reply.status_code == 401:
            raise CentralServerError(f"The server at {self.name} refused this kiosk's key; set server_key "
                                     "(or OFFLINE_ASSISTANT_SERVER_KEY) to the server's API key.")
        try:
            said = reply.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            said = reply.text[:200]
        raise CentralServerError(f"The server at {self.name} answered {reply.status_code}: {said}")


class _Shown:
    """What the person has seen of one answer over its tries, so that a retry shows only what is new."""

    def __init__(self):
        self.last: dict[str, object] = {}  # kind -> the last passages, lead or citations event shown
        self.text = ""  # the text shown so far
        self.written = ""  # the text of the try under way

    def new_part(self, event):
        """`event`, the part of it not shown yet, or None when it was all shown."""
        if event.kind == "text":
            self.written += event.text
            if len(self.written) <= len(self.text):
                return None
            new = self.written[len(self.text):]
            self.text = self.written
            return replace(event, text=new)
        if event.kind in ("passages", "lead", "citations"):
            if self.last.get(event.kind) == event:
                return None
            self.last[event.kind] = event
        return event

    def start_try(self) -> None:
        self.written = ""
