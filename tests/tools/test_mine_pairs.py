"""tools/reranker/mine_pairs.py: the pairs it makes from a manual's HTML, and the questions it
asks of headings and of descriptions (no downloads: a page written here)."""

from __future__ import annotations

import random

from tools.reranker.html_blocks import read_page
from tools.reranker.mine_pairs import (
    base_of_gerund,
    entry_question,
    mine_package,
    split_of,
    task_question,
)

PAGE = """<html><head><title>Server manual</title></head><body>
<nav>Home | Next</nav>
<h2>Why does the server refuse connections?</h2>
<p>The server only accepts connections on the addresses it listens on. Check the Listen lines
of the configuration and that no firewall drops the port.</p>
<h2>Installing the server</h2>
<p>Unpack the archive into a folder of its own, run the installer as the administrator, and
start the service from the control panel once the installer has finished.</p>
<dl><dt><code>MaxClients</code></dt><dd><p>Sets the maximum number of connections served at
once. Further requests wait in the queue.</p></dd></dl>
</body></html>"""


def test_a_page_becomes_blocks_with_their_kinds():
    page = read_page(PAGE)
    assert page.title == "Server manual"
    assert [b.kind for b in page.blocks] == ["h", "p", "h", "p", "dt", "dd"]
    assert "Home" not in " ".join(b.text for b in page.blocks)  # navigation is not text


def test_each_kind_of_pair_from_one_page():
    pairs, pool = mine_package("test", {"server.html": read_page(PAGE)}, random.Random(0), per_kind=10)
    by_kind = {pair.kind: pair for pair in pairs}
    assert by_kind["faq"].query == "Why does the server refuse connections?"
    assert by_kind["faq"].passage.startswith("Why does the server refuse connections?\nThe server only")
    assert by_kind["task"].query == "How do I install the server?"
    assert by_kind["entry"].query == "How do I set the maximum number of connections served at once?"
    assert by_kind["entry"].passage.startswith("MaxClients\nSets the maximum")
    assert all(pair.passage in pool for pair in pairs)


def test_questions_from_headings_and_descriptions():
    assert [base_of_gerund(w) for w in ("Creating", "Running", "Using", "Adding", "Settings")] == \
        ["create", "run", "use", "add", None]
    assert task_question("4.2 To insert a table") == "How do I insert a table?"
    assert task_question("Overview") is None
    assert entry_question("This option sets the name of the log file.") == \
        "How do I set the name of the log file?"
    assert entry_question("Aryeom Han, Jakub Steiner, Oyvind Kolas, Roman Joost") is None


def test_a_question_keeps_its_split():
    assert split_of("How do I install the server?", 0.05) == split_of("How do I install the server?", 0.05)
    assert {split_of(f"question {i}", 0.5) for i in range(20)} == {"train", "valid"}
