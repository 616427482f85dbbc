"""The operations routes (engine/server/ops.py): /health at once, /ready when loaded (or why
not), /metrics in Prometheus' text format (read back with test_metrics' strict parser) with the
requests by route and status, their latency, the queue read from the pool at each render and
the retrieval scores; and the Grafana dashboard, whose every query names a metric we expose."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from engine.answer.metrics import PREFIX, Metrics
from engine.errors import EngineError
from tests.engine.answer.test_metrics import histograms, parse, value
from tests.helpers.tiny_server import tiny_client, tiny_data_dir

DASHBOARD = Path(__file__).parents[3] / "packaging" / "grafana" / "offline-assistant-dashboard.json"
REQUESTS = f"{PREFIX}_http_requests_total"
LATENCY = f"{PREFIX}_http_request_seconds"
RETRIEVAL = f"{PREFIX}_retrieval_score"


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_embedder):
    return tiny_data_dir(tmp_path_factory.mktemp("data"), tiny_embedder)


class FailingLLM:
    def load(self):
        raise EngineError("The model file is damaged: import it again.")


def test_health_answers_while_loading_and_ready_says_loading(paths, tiny_llm_dir, tiny_embedder):
    with tiny_client(paths, tiny_llm_dir, tiny_embedder, load=False) as client:
        assert client.get("/health").json() == {"status": "ok"}
        reply = client.get("/ready")
        assert reply.status_code == 503 and reply.json() == {"status": "loading"}


def test_ready_names_why_loading_failed(paths, tiny_llm_dir, tiny_embedder):
    with tiny_client(paths, tiny_llm_dir, tiny_embedder, make_llm=FailingLLM) as client:
        reply = client.get("/ready")
        assert reply.status_code == 503
        assert reply.json() == {"status": "failed", "error": "The model file is damaged: import it again."}
        assert client.get("/health").status_code == 200


def test_metrics_count_requests_by_route_and_status_and_time_them(paths, tiny_llm_dir, tiny_embedder):
    with tiny_client(paths, tiny_llm_dir, tiny_embedder) as client:
        assert client.get("/ready").status_code == 200
        assert client.post("/v1/ask", json={"question": "How do I replace the filter cartridge?"}).status_code == 200
        assert client.post("/v1/ask", json={"question": "What is the capital of France?"}).status_code == 200
        assert client.get("/v1/documents", params={"collection": "nope"}).status_code == 404
        assert client.get("/no/such/page/1").status_code == 404
        assert client.get("/no/such/page/2").status_code == 404
        reply = client.get("/metrics")
        assert reply.headers["content-type"] == CONTENT_TYPE_LATEST
        families = parse(reply.text)
        state = client.app.state.server

    assert value(families, REQUESTS, route="/v1/ask", status="200") == 2
    assert value(families, REQUESTS, route="/ready", status="200") == 1
    assert value(families, REQUESTS, route="/v1/documents", status="404") == 1
    assert value(families, REQUESTS, route="(unmatched)", status="404") == 2  # one series for any path
    assert ("route", "/metrics") not in {p for _, labels in families[REQUESTS]["samples"] for p in labels}
    latency = histograms(families[LATENCY])
    assert latency[(("route", "/v1/ask"),)]["count"] == 2 and latency[(("route", "/v1/ask"),)]["sum"] > 0
    scores = histograms(families[RETRIEVAL])
    assert scores[(("measure", "similarity"),)]["count"] == scores[(("measure", "gate"),)]["count"] == 2
    assert value(families, f"{PREFIX}_answers_total", answerable="false") == 1
    assert value(families, f"{PREFIX}_queue_length") == 0 and value(families, f"{PREFIX}_llm_busy") == 0
    assert value(families, f"{PREFIX}_llm_workers") == state.pool.workers == 1


class FakePool:
    waiting, running, workers = 0, 0, 2


def test_the_queue_gauges_are_read_from_the_pool_at_each_render():
    pool = FakePool()
    metrics = Metrics(pool)
    assert value(parse(metrics.render()), f"{PREFIX}_queue_length") == 0
    pool.waiting, pool.running = 7, 2
    families = parse(metrics.render())
    assert value(families, f"{PREFIX}_queue_length") == 7 and value(families, f"{PREFIX}_llm_busy") == 2
    assert families[f"{PREFIX}_queue_length"]["type"] == "gauge"


def test_without_a_pool_only_the_answer_families_are_shown():
    metrics = Metrics()
    metrics.record_request("/v1/ask", 200, 0.1)  # a server's call on a plain Metrics: harmless
    assert not any(name.startswith((REQUESTS, LATENCY, RETRIEVAL)) for name in parse(metrics.render()))


# -- the Grafana dashboard -------------------------------------------------------------------

def _exprs(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_is_valid_json_with_a_prometheus_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == f"${{{variable['name']}}}" and panel["targets"], panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    exprs = " ".join(_exprs(dashboard))
    assert re.search(rf"histogram_quantile\(0\.95, sum by \(le, stage\) \(rate\({PREFIX}_stage_seconds_bucket", exprs)
    assert f"histogram_quantile(0.95, sum by (le) (rate({PREFIX}_time_to_first_token_seconds_bucket" in exprs
    assert f'{PREFIX}_answers_total{{answerable="false"}}' in exprs
    assert f"sum by (kind) (rate({PREFIX}_errors_total" in exprs
    assert f"sum by (status) (rate({REQUESTS}" in exprs and f"{PREFIX}_queue_length" in exprs


def test_every_metric_the_dashboard_queries_is_one_metrics_exposes():
    families = parse(Metrics(FakePool()).render())
    suffixes = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("",), "gauge": ("",)}
    exposed = {name + suffix for name, family in families.items() for suffix in suffixes[family["type"]]}
    queried = {name for expr in _exprs(json.loads(DASHBOARD.read_text(encoding="utf-8")))
               for name in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?=\s*[{\[)]|\s*$)", expr)
               if name.startswith(PREFIX)}
    assert len(queried) >= 9, queried
    assert queried <= exposed, queried - exposed
