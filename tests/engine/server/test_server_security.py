"""The server's safety rules (engine/server/security.py): the API key on every endpoint but
/health, compared in constant time; 413 for a body too large, declared or streamed; 422 for
malformed JSON; 404 for an unknown collection; names that are paths refused; CORS off unless
configured. The models are never loaded here (load=False): the rules hold before any route works."""

from __future__ import annotations

import pytest

from tests.helpers.tiny_server import tiny_client, tiny_data_dir

KEY = "s3cret-key"
GUARDED = [("GET", "/ready"), ("GET", "/metrics"), ("GET", "/v1/documents"), ("GET", "/docs"),
           ("GET", "/openapi.json"), ("POST", "/v1/ask"), ("POST", "/v1/embeddings")]


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_embedder):
    return tiny_data_dir(tmp_path_factory.mktemp("data"), tiny_embedder)


@pytest.fixture
def client_with(paths, tiny_llm_dir, tiny_embedder):
    def make(**config):
        return tiny_client(paths, tiny_llm_dir, tiny_embedder, load=False, **config)
    return make


def _assert_refused(reply):
    assert reply.status_code == 401, (reply.request.url, reply.text)
    assert reply.headers["www-authenticate"].startswith("Bearer")
    error = reply.json()["error"]
    assert error["type"] == "authentication_error" and "Authorization: Bearer" in error["message"]


@pytest.mark.parametrize("method, path", GUARDED)
def test_with_a_key_every_endpoint_but_health_needs_it(client_with, method, path):
    with client_with(api_key=KEY) as client:
        _assert_refused(client.request(method, path, json={}))
        for wrong in (f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", f"Basic {KEY}", KEY, "Bearer "):
            _assert_refused(client.request(method, path, json={}, headers={"Authorization": wrong}))
        right = client.request(method, path, json={}, headers={"Authorization": f"Bearer {KEY}"})
        assert right.status_code != 401, right.text


def test_health_is_open_with_a_key(client_with):
    with client_with(api_key=KEY) as client:
        reply = client.get("/health")
        assert reply.status_code == 200 and reply.json() == {"status": "ok"}


def test_the_key_is_compared_in_constant_time(client_with, monkeypatch):
    from engine.server import security

    compared = []
    real = security.hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(security.hmac, "compare_digest", spy)
    with client_with(api_key=KEY) as client:
        assert client.get("/ready", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/ready", headers={"Authorization": f"Bearer {KEY}"}).status_code == 503
    assert compared == [(b"nope", KEY.encode()), (KEY.encode(), KEY.encode())]


def test_without_a_key_nothing_asks_for_one(client_with):
    with client_with() as client:
        for method, path in GUARDED:
            reply = client.request(method, path, json={})
            assert reply.status_code != 401 and "www-authenticate" not in reply.headers, path
        assert client.get("/openapi.json").status_code == 200


def test_a_body_declared_too_large_gets_413_in_the_openai_shape(client_with):
    with client_with(max_body_bytes=1000) as client:
        big = b'{"question": "' + b"a" * 2000 + b'"}'
        reply = client.post("/v1/ask", content=big, headers={"Content-Type": "application/json"})
        assert reply.status_code == 413
        assert reply.json()["error"]["code"] == "body_too_large" and "1000 bytes" in reply.json()["error"]["message"]


def test_a_streamed_body_is_counted_as_it_arrives(client_with):
    def chunks():  # no Content-Length: chunked
        yield b'{"question": "'
        for _ in range(20):
            yield b"a" * 100
        yield b'"}'

    with client_with(max_body_bytes=1000) as client:
        reply = client.post("/v1/embeddings", content=chunks(), headers={"Content-Type": "application/json"})
        assert "content-length" not in reply.request.headers
        assert reply.status_code == 413 and reply.json()["error"]["code"] == "body_too_large"
        small = client.post("/v1/documents", content=b"{}")  # under the limit: on to routing
        assert small.status_code == 405


def test_malformed_json_is_422_with_a_message(client_with):
    with client_with() as client:
        reply = client.post("/v1/ask", content=b'{"question": ', headers={"Content-Type": "application/json"})
        assert reply.status_code == 422
        assert "JSON" in reply.json()["error"]["message"]
        missing = client.post("/v1/ask", json={"collection": "default"})
        assert missing.status_code == 422 and "question" in missing.json()["error"]["message"]


def test_an_unknown_collection_is_404(client_with):
    with client_with() as client:
        for reply in (client.get("/v1/documents", params={"collection": "never"}),
                      client.post("/v1/ask", json={"question": "Oil?", "collection": "never"})):
            assert reply.status_code == 404, reply.text
            assert reply.json()["error"]["code"] == "collection_not_found"


@pytest.mark.parametrize("name", ["../x", "..", "/etc", "a/b", "a\\b", "C:x", " default"])
def test_a_collection_name_that_is_a_path_is_refused(client_with, paths, name):
    with client_with() as client:
        for reply in (client.get("/v1/documents", params={"collection": name}),
                      client.post("/v1/ask", json={"question": "Oil?", "collection": name})):
            assert reply.status_code == 400, reply.text
            assert "not a valid collection name" in reply.json()["error"]["message"]


def test_cors_is_off_by_default(client_with):
    with client_with() as client:
        reply = client.get("/health", headers={"Origin": "https://example.com"})
        assert "access-control-allow-origin" not in reply.headers
        preflight = client.options("/v1/ask", headers={"Origin": "https://example.com",
                                                       "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_the_configured_origins_only(client_with):
    allowed = "https://plant.example"
    with client_with(cors_origins=(allowed,), api_key=KEY) as client:
        preflight = client.options("/v1/ask", headers={
            "Origin": allowed, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert preflight.status_code == 200  # a browser's preflight carries no key
        assert preflight.headers["access-control-allow-origin"] == allowed
        reply = client.get("/health", headers={"Origin": allowed})
        assert reply.headers["access-control-allow-origin"] == allowed
        refused = client.get("/ready", headers={"Origin": allowed})  # a 401 the page can read
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == allowed
        other = client.get("/health", headers={"Origin": "https://elsewhere.example"})
        assert "access-control-allow-origin" not in other.headers
