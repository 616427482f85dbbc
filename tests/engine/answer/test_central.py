"""A thin kiosk (settings.server_url): whole answers from a central `serve` on loopback, the
cited document fetched from it, and this machine's own manuals answering while the server is
away, until it is back. Real parts: the server's routes in uvicorn with an LLM process on the
tiny model, manuals stored as real files with the tiny embedder, the tiny LLM here too."""

from __future__ import annotations

import time

import httpx
import pytest

from engine.answer.assistant import DoneEvent, ErrorEvent, PassagesEvent, TextEvent
from engine.answer.central import CentralServer
from engine.answer.session import SERVER_RETRY_S, AnswerSession, SessionConfig
from engine.config import Settings
from engine.llm.supervisor import EngineUnreachable, ModelOpened
from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from tests.helpers.http_engines import refused_url
from tests.helpers.live_server import live_server
from tests.helpers.tiny_collection import add_file, open_store

QUESTION = "How do I close the strainer valve?"
VALVE = "Close strainer valve before removing basket."


def data_dir(root, embedder, text: str) -> AppPaths:
    """A data dir whose default collection holds one manual, a real file under `root`."""
    paths = AppPaths(root).ensure()
    with open_store(paths.collection("default"), embedder) as store:
        add_file(store, embedder, root / "valve.md", text)
    return paths


@pytest.fixture(scope="module")
def central(tmp_path_factory, tiny_embedder) -> AppPaths:
    """The central server's data dir; its settings name a server too, which a server ignores
    (it answers itself, never forwards)."""
    paths = data_dir(tmp_path_factory.mktemp("central"), tiny_embedder, VALVE)
    paths.settings_file.write_text(f'server_url = "{refused_url()}"\n', encoding="utf-8")
    return paths


def thin(paths: AppPaths, url: str, embedder, llm_dir=None, clock=time.monotonic,
         **settings) -> tuple[AnswerSession, list]:
    said = []
    session = AnswerSession(paths, report=said.append, embedder=embedder, clock=clock)
    session.open(SessionConfig(Settings(server_url=url, **settings), "cpu", llm_dir))
    return session, said


def test_answers_come_from_the_server_and_nothing_opens_here(central, tmp_path, tiny_llm_dir, tiny_embedder):
    app = create_app(ServerConfig(central, api_key="k"), tiny_llm_dir, embedder=tiny_embedder)
    with live_server(app) as url:
        assert app.state.server.wait_loaded(60)
        session, said = thin(AppPaths(tmp_path / "kiosk").ensure(), url, tiny_embedder, server_key="k")
        with session:
            events = list(session.ask(QUESTION))
            assert session.model.llm is None and session.store is None  # no model, no collection here
            cited = events[0].passages[0]
            copy = session.server.document(cited, tmp_path / "cache")
            again = session.server.document(cited, tmp_path / "cache")
            unchanged = httpx.get(cited.path, headers={
                "Authorization": "Bearer k", "If-None-Match": f'"{copy.with_name(copy.name + ".sha256").read_text()}"'})
            forwarded = [s.server for idle in app.state.server._idle.values() for s in idle]
            wrong_key = CentralServer(url, "nope")
            with pytest.raises(Exception, match="refused this kiosk's key"):
                wrong_key.check()
            wrong_key.close()
    assert [type(r) for r in said] == [ModelOpened] and said[0].status.provider.startswith("server:127.0.0.1:")
    assert isinstance(events[0], PassagesEvent) and isinstance(events[-1], DoneEvent)
    assert cited.path == f"{url}/v1/documents/{cited.document_id}/valve.md" and events[-1].stats.new_tokens > 0
    assert events[-1].stats.lead_words is not None  # the caution is decided here as on the server
    assert copy.read_text(encoding="utf-8") == VALVE and again == copy and unchanged.status_code == 304
    assert forwarded == [None]  # the server's session answered itself, it did not forward


def test_while_the_server_is_away_this_kiosk_answers_then_the_server_again(
        central, tmp_path, tiny_llm_dir, tiny_embedder):
    kiosk = data_dir(tmp_path / "kiosk", tiny_embedder, "Local copy. " + VALVE)
    url, skipped = refused_url(), [0.0]
    session, said = thin(kiosk, url, tiny_embedder, tiny_llm_dir, clock=lambda: time.monotonic() + skipped[0])
    with session:
        here = list(session.ask(QUESTION))
        app = create_app(ServerConfig(central), tiny_llm_dir, embedder=tiny_embedder)
        with live_server(app, port=int(url.rsplit(":", 1)[1])):  # the server is back
            assert app.state.server.wait_loaded(60)
            skipped[0] = SERVER_RETRY_S  # the retry time has passed
            back = list(session.ask(QUESTION))
        gone = list(session.ask(QUESTION))  # the server stopped: said again, answered here
    assert [type(r) for r in said] == [EngineUnreachable, ModelOpened, ModelOpened, EngineUnreachable]
    assert "cannot be reached" in said[0].message and "this kiosk's own manuals" in said[0].message
    assert said[1].status.pid is not None and said[2].status.provider == f"server:{url[7:]}"
    assert here[0].passages[0].path == str(kiosk.root / "valve.md") and here[-1].stats.provider == "cpu"
    assert back[0].passages[0].path == f"{url}/v1/documents/1/valve.md" and isinstance(back[-1], DoneEvent)
    assert isinstance(gone[-1], DoneEvent) and gone[0].passages[0].path == str(kiosk.root / "valve.md")


def test_without_manuals_here_the_question_says_the_server_is_away(tmp_path, tiny_embedder):
    session, said = thin(AppPaths(tmp_path / "kiosk").ensure(), refused_url(), tiny_embedder)
    with session:
        (error,) = list(session.ask(QUESTION))
    assert isinstance(said[0], EngineUnreachable) and "no manuals of its own" in said[0].message
    assert isinstance(error, ErrorEvent) and error.error == "CentralServerError"
    assert "cannot be reached" in error.message and session.model.llm is None


class CutFirstAnswer:
    """The server's app, but the first streamed answer's connection is cut after its first text,
    as when the replica behind a load balancer is killed mid-answer."""

    def __init__(self, app):
        self.app, self.cut = app, 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/v1/ask" or self.cut:
            return await self.app(scope, receive, send)
        self.cut += 1

        async def until_first_text(message):
            await send(message)
            if b"event: text" in message.get("body", b""):
                raise ConnectionResetError("the replica was killed")  # uvicorn drops the connection

        await self.app(scope, receive, until_first_text)


def test_an_answer_cut_mid_stream_is_asked_again_and_shown_once(central, tmp_path, tiny_llm_dir, tiny_embedder):
    app = create_app(ServerConfig(central), tiny_llm_dir, embedder=tiny_embedder)
    cutting = CutFirstAnswer(app)
    with live_server(cutting) as url:
        assert app.state.server.wait_loaded(60)
        session, said = thin(AppPaths(tmp_path / "kiosk").ensure(), url, tiny_embedder)
        with session:
            events = list(session.ask(QUESTION))
            retried = session.server.retried
    texts = [e.text for e in events if isinstance(e, TextEvent)]
    assert cutting.cut == 1 and retried == 1 and [type(r) for r in said] == [ModelOpened]  # no fallback
    assert [type(e) for e in events].count(PassagesEvent) == 1 and isinstance(events[-1], DoneEvent)
    assert "".join(texts) == events[-1].answer  # the text carried on where the cut left it, not twice
