"""Answer metrics in the Prometheus text format, read back with a strict parser of that format
(version 0.0.4), after real answers of the tiny assistant."""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict

import pytest

from engine.answer.assistant import AnswerStats, Assistant, AssistantSettings
from engine.answer.grounding import Relevance
from engine.answer.metrics import PREFIX, STAGE_BUCKETS, Metrics
from engine.answer.retrieval import Retriever
from engine.llm.local import LocalLLM
from tests.helpers.tiny_collection import fill, open_store

STAGES = f"{PREFIX}_stage_seconds"
FIRST_TOKEN = f"{PREFIX}_time_to_first_token_seconds"
ANSWERS = f"{PREFIX}_answers_total"
ERRORS = f"{PREFIX}_errors_total"
TOKENS = f"{PREFIX}_tokens_total"

# -- a strict reader of the text format ------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_COMMENT = re.compile(rf"^# (HELP|TYPE) ({_NAME}) (.*)$")
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("",), "gauge": ("",)}


def _labels(text: str | None) -> tuple[tuple[str, str], ...]:
    if not text:
        return ()
    pairs, at = [], 0
    while at < len(text):
        match = _LABEL.match(text, at)
        assert match, f"bad labels: {text!r}"
        value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), match.group(2))
        pairs.append((match.group(1), value))
        at = match.end()
        if at < len(text):
            assert text[at] == ",", f"bad labels: {text!r}"
            at += 1
    names = [name for name, _ in pairs]
    assert len(names) == len(set(names)), f"a label twice: {text!r}"
    return tuple(pairs)


def parse(text: str) -> dict[str, dict]:
    """{family: {"help", "type", "samples": {(name, labels): value}}}; asserts the format's
    rules: HELP and TYPE once each and before the family's samples, samples of one family
    together, sample names that fit the type, values that are numbers, no duplicates."""
    assert text.endswith("\n")
    families: dict[str, dict] = {}
    current = None
    for line in text[:-1].split("\n"):
        comment = _COMMENT.match(line)
        if comment:
            kind, name, rest = comment.groups()
            family = families.setdefault(name, {"help": None, "type": None, "samples": {}})
            assert not family["samples"], f"{kind} of {name} after its samples"
            assert family[kind.lower()] is None, f"{kind} of {name} twice"
            family[kind.lower()] = rest
            current = name
            continue
        sample = _SAMPLE.match(line)
        assert sample, f"not a sample line: {line!r}"
        name, labels, value = sample.groups()
        assert current is not None and families[current]["type"] in _SUFFIXES, line
        family = families[current]
        assert any(name == current + s for s in _SUFFIXES[family["type"]]), \
            f"{name} is not part of the {family['type']} {current}"
        key = (name, _labels(labels))
        assert key not in family["samples"], f"duplicate sample {key}"
        family["samples"][key] = float(value)
    for name, family in families.items():
        assert family["help"] and family["type"], name
    return families


def histograms(family: dict) -> dict[tuple, dict]:
    """Each series of a histogram family (by its labels without `le`), with its rules checked:
    bounds ascending, counts cumulative, +Inf last and equal to the count."""
    series: dict[tuple, dict] = defaultdict(lambda: {"buckets": [], "sum": None, "count": None})
    for (name, labels), value in family["samples"].items():
        rest = tuple(pair for pair in labels if pair[0] != "le")
        if name.endswith("_bucket"):
            series[rest]["buckets"].append((float(dict(labels)["le"]), value))
        else:
            series[rest]["sum" if name.endswith("_sum") else "count"] = value
    for labels, one in series.items():
        bounds = [bound for bound, _ in one["buckets"]]
        counts = [count for _, count in one["buckets"]]
        assert bounds == sorted(bounds) and bounds[-1] == math.inf, labels
        assert counts == sorted(counts), f"buckets not cumulative: {labels} {counts}"
        assert counts[-1] == one["count"], labels
        assert one["sum"] is not None and one["sum"] >= 0
    return dict(series)


def value(families, family: str, **labels) -> float:
    key = (family, tuple(sorted(labels.items())))
    found = {(name, tuple(sorted(pairs))): v for (name, pairs), v in families[family]["samples"].items()}
    return found[key]


def stats(timings: dict[str, float], first_token: float | None = None, answerable: bool = True,
          prompt_tokens: int = 0, new_tokens: int = 0) -> AnswerStats:
    relevance = Relevance(0.5, 1.0, 1.0, answerable, ())
    return AnswerStats(answerable, relevance, tuple(timings), dict(timings), prompt_tokens,
                       new_tokens, first_token)


# -- the tiny assistant ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def retriever(tmp_path_factory, tiny_embedder):
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as store:
        yield Retriever(fill(store, tiny_embedder), tiny_embedder)


@pytest.fixture(scope="module")
def llm(tiny_llm_dir):
    with LocalLLM(tiny_llm_dir, provider="cpu") as model:
        yield model


# -- tests -------------------------------------------------------------------------------------

def test_before_any_answer_every_family_is_there_with_zeros():
    families = parse(Metrics().render())
    assert set(families) == {STAGES, FIRST_TOKEN, ANSWERS, ERRORS, TOKENS}
    assert families[STAGES]["type"] == families[FIRST_TOKEN]["type"] == "histogram"
    assert {families[n]["type"] for n in (ANSWERS, ERRORS, TOKENS)} == {"counter"}
    assert histograms(families[FIRST_TOKEN])[()]["count"] == 0
    assert value(families, ANSWERS, answerable="true") == value(families, ANSWERS, answerable="false") == 0
    assert value(families, TOKENS, kind="prompt") == value(families, TOKENS, kind="generated") == 0
    assert families[ERRORS]["samples"] == {}


def test_answers_refusals_and_errors_are_counted(retriever, llm):
    metrics = Metrics()
    answering = Assistant(retriever, llm, AssistantSettings(relevance_threshold=-10), metrics)
    refusing = Assistant(retriever, llm, AssistantSettings(relevance_threshold=10), metrics)
    answered = list(answering.ask("How do I replace the filter?"))[-1].stats
    refused = list(refusing.ask("What is the capital of France?"))[-1].stats
    assert list(answering.ask("  "))[-1].kind == "error"
    assert (answered.answerable, refused.answerable) == (True, False)

    families = parse(metrics.render())
    assert value(families, ANSWERS, answerable="true") == 1
    assert value(families, ANSWERS, answerable="false") == 1
    assert value(families, ERRORS, kind="EngineError") == 1
    assert value(families, TOKENS, kind="prompt") == answered.prompt_tokens > 0
    assert value(families, TOKENS, kind="generated") == answered.new_tokens > 0

    stages = {dict(labels)["stage"]: one for labels, one in histograms(families[STAGES]).items()}
    assert set(stages) == set(answered.timings_s)  # the refusal's stages are a subset
    assert stages["gate"]["count"] == stages["total"]["count"] == 2
    assert stages["generate"]["count"] == stages["prompt"]["count"] == 1
    assert stages["generate"]["sum"] == pytest.approx(answered.timings_s["generate"])
    assert stages["total"]["sum"] == pytest.approx(answered.timings_s["total"] + refused.timings_s["total"])

    first = histograms(families[FIRST_TOKEN])[()]
    assert first["count"] == 1  # a refusal has no first token
    assert first["sum"] == pytest.approx(answered.time_to_first_token_s)


def test_a_value_lands_in_every_bucket_from_its_bound_up():
    metrics = Metrics()
    metrics.record_answer(stats({"embed": 0.005, "generate": 2.0}, first_token=100.0))
    families = parse(metrics.render())
    series = {dict(labels)["stage"]: one for labels, one in histograms(families[STAGES]).items()}
    embed = dict(series["embed"]["buckets"])
    assert embed[0.0025] == 0 and embed[0.005] == 1 and embed[math.inf] == 1  # le means <=
    generate = dict(series["generate"]["buckets"])
    assert generate[1.0] == 0 and generate[2.5] == 1
    assert sorted(b for b in embed if b != math.inf) == list(STAGE_BUCKETS)
    first = dict(histograms(families[FIRST_TOKEN])[()]["buckets"])
    assert first[max(STAGE_BUCKETS)] == 0 and first[math.inf] == 1  # slower than any bucket


def test_label_values_are_escaped():
    metrics = Metrics()
    odd = 'Odd"Kind\\with\nnewline'
    metrics.record_error(odd)
    metrics.record_error(odd)
    families = parse(metrics.render())
    assert value(families, ERRORS, kind=odd) == 2


def test_render_while_answers_are_recorded_is_always_consistent():
    metrics = Metrics()
    threads, per_thread = 4, 150
    start = threading.Barrier(threads + 1)

    def record(n: int) -> None:
        start.wait()
        for i in range(per_thread):
            metrics.record_answer(stats({"gate": 0.001 * (i % 7), "total": 0.01}, first_token=0.2,
                                        answerable=bool(i % 2), prompt_tokens=3, new_tokens=1))

    workers = [threading.Thread(target=record, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    renders = 0
    while any(worker.is_alive() for worker in workers) or renders == 0:
        families = parse(metrics.render())
        answers = value(families, ANSWERS, answerable="true") + value(families, ANSWERS, answerable="false")
        totals = histograms(families[STAGES]).get((("stage", "total"),), {"count": 0})["count"]
        assert answers == totals == value(families, TOKENS, kind="generated")  # one snapshot
        renders += 1
    for worker in workers:
        worker.join()

    families = parse(metrics.render())
    assert value(families, ANSWERS, answerable="true") == threads * per_thread // 2
    assert value(families, TOKENS, kind="prompt") == 3 * threads * per_thread
    assert histograms(families[FIRST_TOKEN])[()]["count"] == threads * per_thread
