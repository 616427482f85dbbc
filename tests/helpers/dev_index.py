"""The development sets' index, built beside the rest of the suite (tests/engine/test_eval_dev.py).

Indexing the 15 manuals the sets ask about takes 240-770 s, nearly all of it in the embedder,
while much of the suite leaves a core idle (waiting on model processes, X servers, sockets). So
a process of its own builds that index at the lowest CPU priority (SCHED_IDLE), started as soon
as collection shows the eval tests will run; they run last and wait for it. Foreground tests
keep the CPU whenever they want it, so their timings are not disturbed. Measured on 2 slow
cores: the whole suite took 56 min with the index built inside the first eval test, 42.6
min this way (docs/benchmarks.md, "The suite beside its own index").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

COLLECTION = "dev-sets"
PATIENCE = 20  # the give-up limits (per document, per OCR page) times this; see build()
FIXTURE = "dev_data_dir"  # the eval tests' fixture: items that use it trigger the build
REPO = Path(__file__).resolve().parents[2]
QA_DIR, MANUALS = REPO / "tests" / "qa", REPO / "tests" / ".manuals"
SETS = (QA_DIR / "r_manuals_dev.jsonl", QA_DIR / "dev_mixed.jsonl", QA_DIR / "dev_nut.jsonl",
        QA_DIR / "dev_debian_faq.jsonl")


def set_manuals() -> list[Path]:
    """Every manual a question of the sets is about."""
    from engine.evaluation.qa import load_qa

    return sorted({MANUALS / item.doc for path in SETS for item in load_qa(path) if item.doc})


def _lowest_priority() -> None:  # runs in the child before exec
    if hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(19)


@dataclass
class Build:
    data_dir: Path
    out: Path  # a JSON line per document (stdout)
    log: Path  # its messages and progress (stderr)
    process: subprocess.Popen
    manuals: list[Path]

    def wait(self) -> Path:
        """The data dir once every manual is indexed; fails with the build's messages otherwise."""
        code = self.process.wait()
        outcomes = [json.loads(line) for line in self.out.read_text(errors="replace").splitlines()]
        not_ready = [o for o in outcomes if o["status"] != "ready"]
        assert code == 0 and len(outcomes) == len(self.manuals) and not not_ready, (
            f"indexing the development manuals ended with {code}, {len(outcomes)} of "
            f"{len(self.manuals)} done, not ready: {not_ready}\n{self.log.read_text(errors='replace')[-3000:]}")
        return self.data_dir

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def start(manuals: list[Path]) -> Build:
    root = Path(tempfile.mkdtemp(prefix="oa-dev-index-"))
    data_dir, out, log = root / "data", root / "index.jsonl", root / "index.log"
    command = [sys.executable, "-m", "tests.helpers.dev_index", str(data_dir), *map(str, manuals)]
    with out.open("wb") as stdout, log.open("wb") as stderr:
        process = subprocess.Popen(command, cwd=REPO, stdout=stdout, stderr=stderr,
                                   stdin=subprocess.DEVNULL, preexec_fn=_lowest_priority)
    return Build(data_dir, out, log, process, manuals)


def build(data_dir: Path, manuals: list[Path]) -> None:
    """The collection the default settings make, with the built-in LLM prepared beside it. Only
    the limits at which a document or an OCR page is given up are raised: at the lowest priority
    a page may wait for the CPU far longer than it takes (measured: docbook-xsl-reference's
    pages 1, 3-4 ran past the 60 s page limit while the suite ran)."""
    from engine.models.registry import prepare_builtin_llm
    from engine.paths import AppPaths
    from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection

    paths = AppPaths(data_dir).ensure()
    prepare_builtin_llm(paths)
    embedder = default_embedder(paths)
    defaults = IndexSettings()
    patient = IndexSettings(parse_time_limit_s=defaults.parse_time_limit_s * PATIENCE,
                            ocr_page_time_limit_s=defaults.ocr_page_time_limit_s * PATIENCE)
    with open_collection(paths, COLLECTION, embedder) as store:
        for event in Indexer(store, embedder, patient).run(manuals):
            if event.outcome:
                print(json.dumps(asdict(event.outcome)), flush=True)


_KEY = pytest.StashKey[Build]()


def _uses_index(item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def order_last(items: list) -> None:
    """The eval tests go last, so the build has the whole suite's time to finish."""
    items.sort(key=_uses_index)


def start_if_needed(session) -> None:
    config = session.config
    if any(map(_uses_index, session.items)) and not config.option.collectonly and (MANUALS / "R-intro.pdf").is_file():
        config.stash[_KEY] = start(set_manuals())


def built(config) -> Path:
    """The data dir of the build started at collection (started now if it was not)."""
    if _KEY not in config.stash:
        config.stash[_KEY] = start(set_manuals())
    return config.stash[_KEY].wait()


def stop(config) -> None:
    build = config.stash.get(_KEY, None)
    if build is not None:
        build.stop()


if __name__ == "__main__":
    build(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
