"""Two `serve` replicas on one installed bundle behind a real HAProxy (the config docs/deploy.md
gives), the product's thin-kiosk client asking through it from a few threads: one replica and its
model process get SIGKILL mid-answer, and no answer is lost once the client has asked again.
Real parts: the built-in models, signed bundle, server processes, HAProxy (skipped where it is not
installed, except in CI, where .ci/run installs it). The figures under 16 clients are
bench/bench_replicas.py's."""

from __future__ import annotations

import os
import threading

import pytest

from engine.paths import AppPaths
from tests.helpers.replicas import HAPROXY, Answers, balancer, bundled_data_dir, client, kill, replicas

if HAPROXY is None and os.environ.get("CI"):
    raise RuntimeError("haproxy is not installed; .ci/run installs it (apt-get install haproxy)")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed")]

KEY = "replica-test-key"
MANUAL = """# Pump P-20

## Priming
Prime the pump with water before the first start. Open the vent screw until water comes out.

## Strainer
Close the strainer valve before removing the basket. Clean the basket under running water.

## Seal
Replace the shaft seal every 4000 hours. A dripping seal means it is worn.
"""
QUESTIONS = ["How do I prime the pump?", "When is the shaft seal replaced?",
             "What do I close before removing the strainer basket?", "What does a dripping seal mean?"]
CLIENTS = 4


def test_a_replica_killed_under_load_costs_no_answer_after_the_retry(builtin_data_dir, tmp_path):
    (tmp_path / "pump.md").write_text(MANUAL, encoding="utf-8")
    paths = bundled_data_dir(tmp_path, AppPaths(builtin_data_dir).models, [tmp_path / "pump.md"],
                             "max_new_tokens = 16\npassages = 2\n")
    answers, stop = Answers(), threading.Event()
    with replicas(paths, 2, KEY) as started, balancer([r.url for r in started], KEY, tmp_path) as front:
        threads = [threading.Thread(target=client, args=(front.url, KEY, QUESTIONS, stop, answers, n))
                   for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        try:
            answers.wait_count(1, 60)  # both replicas are answering
            kill(started[0])
            killed = len(answers)
            down_s = front.wait_status("r1", "DOWN", 20)
            answers.wait_count(killed + CLIENTS, 90)  # the cut ones asked again, and more
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
    lost = [a.error for a in answers if not a.ok]
    assert lost == [], lost
    assert sum(a.retried > 0 for a in answers) >= 1, "no answer was in flight on the killed replica"
    assert down_s < 5
