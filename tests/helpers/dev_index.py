"""The development sets' index (tests/engine/test_eval_dev.py), built beside the rest of the
suite by tests/helpers/background.py: indexing the 15 manuals the sets ask about takes 240-770 s,
nearly all of it in the embedder."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from tests.helpers import background

COLLECTION = "dev-sets"
PATIENCE = 20  # the give-up limits (per document, per OCR page) times this; see build()
REPO = background.REPO
QA_DIR, MANUALS = REPO / "tests" / "qa", REPO / "tests" / ".manuals"
SETS = (QA_DIR / "r_manuals_dev.jsonl", QA_DIR / "dev_mixed.jsonl", QA_DIR / "dev_nut.jsonl",
        QA_DIR / "dev_debian_faq.jsonl")


def set_manuals() -> list[Path]:
    """Every manual a question of the sets is about."""
    from engine.evaluation.qa import load_qa

    return sorted({MANUALS / item.doc for path in SETS for item in load_qa(path) if item.doc})


def _command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "tests.helpers.dev_index", str(folder / "data"), *map(str, set_manuals())]


def _why_not() -> str | None:
    return None if (MANUALS / "R-intro.pdf").is_file() else "the manuals are not fetched (make manuals)"


BUILD = background.Build("dev_data_dir", "the development sets' index", _command, _why_not)


def built(config) -> Path:
    """The data dir once every manual is indexed "ready"; fails naming those that are not."""
    running = background.result(config, BUILD)
    outcomes = [json.loads(line) for line in running.out.read_text(errors="replace").splitlines()]
    not_ready = [o for o in outcomes if o["status"] != "ready"]
    manuals = set_manuals()
    assert len(outcomes) == len(manuals) and not not_ready, (
        f"{len(outcomes)} of {len(manuals)} development manuals indexed, not ready: {not_ready}\n"
        f"{running.log.read_text(errors='replace')[-3000:]}")
    return running.folder / "data"


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


if __name__ == "__main__":
    build(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
