#!/usr/bin/env python
"""Mines (question, passage, label) pairs for training the reranker from Debian's manuals.

    .venv/bin/python tools/reranker/mine_pairs.py --out bench/.cache/reranker/pairs

Only the packages in PACKAGES, at the versions pinned there, are read, so that the development
families we measure on (R, gnuplot, octave, kicad, lilypond, siscone, docbook-xsl, nut,
debian-faq) stay unseen. Each .deb is fetched with `apt-get download PKG=VERSION` into
--debs, its SHA-256 recorded, and unpacked with `dpkg-deb -x`.

Kinds of positive pair (one question, the passage that answers it):
  faq     a heading or definition term that is a question, and what follows it
  task    a heading that is a task ("Installing packages", "To insert a table", "How to ..."),
          asked as "How do I install packages?", and its section
  entry   an option, setting, directive or command entry (a definition list's term and its
          description), asked from the description without the name: a person who knew the
          name would not need to ask
  index   an index entry (Sphinx genindex, DocBook bookindex, texinfo indexes, LibreOffice's
          keywords) and the text it points to
Each question also gets hard negatives: the best passage of the same manual that is not its
answer, once by our BM25 (SQLite FTS5 on engine.answer.terms.query_terms, as the store
searches) and once by dense retrieval (the built-in embedder). Written: pairs.jsonl (one pair a
line, with kind, package, split) and pairs.json (versions, SHA-256s, counts, parameters).
Runs in the app's venv: no torch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.reranker.html_blocks import Page, read_page  # noqa: E402

# package -> (version, glob of its English HTML pages, regex of paths to leave out)
PACKAGES = {
    "python3.11-doc": ("3.11.2-6+deb12u9", "usr/share/doc/python3.11/html/**/*.html",
                       r"genindex-all|whatsnew/changelog"),
    "postgresql-doc-15": ("15.20-0+deb12u1", "usr/share/doc/postgresql-doc-15/html/*.html", r"release-"),
    "debian-handbook": ("11.20220922", "usr/share/doc/debian-handbook/html/en-US/*.html", r"^$"),
    "debian-reference-en": ("2.100", "usr/share/debian-reference/*.en.html", r"^$"),
    "apache2-doc": ("2.4.71-1~deb12u1", "usr/share/doc/apache2-doc/manual/en/**/*.html", r"^$"),
    "ffmpeg-doc": ("7:5.1.9-0+deb12u1", "usr/share/doc/ffmpeg/manual/*.html", r"-all\.html"),
    "sqlite3-doc": ("3.40.1-2+deb12u2", "usr/share/doc/sqlite3/**/*.html", r"releaselog|changes"),
    "gimp-help-en": ("2.10.34-2", "usr/share/gimp/2.0/help/en/**/*.html", r"^$"),
    "git-doc": ("1:2.39.5-0+deb12u3", "usr/share/doc/git-doc/**/*.html", r"RelNotes"),
    "bash-doc": ("5.2.15-2", "usr/share/doc/bash/bashref.html", r"^$"),
    "gnucash-docs": ("4.13-1", "usr/share/doc/gnucash-docs/gnucash-*-en/*.html", r"^$"),
    "wireshark-doc": ("4.0.17-0+deb12u3", "usr/share/doc/wireshark/*_html_chunked/*.html", r"^$"),
    "zsh-doc": ("5.9-4", "usr/share/doc/zsh-common/html/*.html", r"^$"),
    "grass-doc": ("8.2.1-1", "usr/share/doc/grass-doc/html/*.html", r"^$"),
    "libreoffice-help-en-us": ("4:7.4.7-1+deb12u14", "usr/share/libreoffice/help/en-US/text/**/*.html", r"^$"),
}
KINDS = ("faq", "task", "entry", "index")
PASSAGE_WORDS = 160  # about a 256-token chunk's words; the trainer cuts to its own length
MIN_ANSWER_WORDS = 12
INDEX_PAGE = re.compile(r"genindex-[A-Z_]\.html$|bookindex\.html$|-Index\.html$")


@dataclass
class Pair:
    query: str
    passage: str
    kind: str
    package: str
    source: str  # page the passage comes from, for the record


# -- fetching --------------------------------------------------------------------------------
def fetch(package: str, version: str, debs: Path, unpacked: Path) -> dict:
    """Downloads the pinned .deb once, unpacks it, and says what was read."""
    debs.mkdir(parents=True, exist_ok=True)
    quoted = version.replace(":", "%3a")
    deb = debs / f"{package}_{quoted}_all.deb"
    if not deb.is_file():
        subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=debs, check=True)
    target = unpacked / package
    if not target.is_dir():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    return {"package": package, "version": version, "deb": deb.name, "sha256": digest}


def pages_of(package: str, unpacked: Path) -> dict[str, Page]:
    _, pattern, leave_out = PACKAGES[package]
    root = unpacked / package
    pages = {}
    for path in sorted(root.glob(pattern)):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or re.search(leave_out, relative):
            continue
        pages[relative] = read_page(path.read_text(encoding="utf-8", errors="replace"))
    return pages


# -- passages --------------------------------------------------------------------------------
def words_from(blocks, first: int, limit: int = PASSAGE_WORDS, stop_at_heading: int = 0) -> str:
    """The text of blocks[first:] up to `limit` words; stops at a heading of level
    <= stop_at_heading (0: never), as a section ends."""
    taken: list[str] = []
    for block in blocks[first:]:
        if stop_at_heading and block.kind == "h" and block.level <= stop_at_heading and taken:
            break
        taken += block.text.split()
        if len(taken) >= limit:
            break
    return " ".join(taken[:limit])


def sections(page: Page):
    """(heading, passage, body words) for each heading: the heading and what follows it."""
    for i, block in enumerate(page.blocks):
        if block.kind != "h":
            continue
        body = words_from(page.blocks, i + 1, PASSAGE_WORDS, stop_at_heading=block.level)
        yield block.text, f"{block.text}\n{body}", len(body.split())


# -- questions -------------------------------------------------------------------------------
_NOT_VERBS = {"this", "is", "has", "was", "its", "as", "does", "always", "its", "alias", "status",
              "class", "process", "unless", "various", "previous", "us", "bytes", "options"}
_GERUND_NOUNS = {"string", "thing", "warning", "setting", "settings", "during", "nothing", "something",
                 "everything", "anything", "padding", "encoding", "mapping", "heading", "building",
                 "spring", "ring", "king", "rendering", "logging", "timing", "meaning", "ceiling",
                 "ping", "listing", "listings", "rating", "routing", "bing", "sing", "bring"}
_KEEP_E = ("at", "iz", "yz", "ur", "ir", "rg", "bl", "pl", "dl", "tl", "ok", "ak", "ik", "ut",
           "vid", "cid", "rid", "let", "plet")  # endings that drop an e before -ing


def base_of_third_person(word: str) -> str | None:
    """'Specifies' -> 'specify', 'Enables' -> 'enable', 'Matches' -> 'match'; None if `word`
    does not look like a verb in the third person."""
    word = word.lower()
    if word in _NOT_VERBS or not word.isalpha() or len(word) < 4 or not word.endswith("s"):
        return None
    if word.endswith("ss") or word.endswith("us") or word.endswith("is"):
        return None
    if word == "does":
        return "do"
    if word.endswith("ies"):
        return word[:-3] + "y"
    if re.search(r"(ss|sh|ch|x|z)es$", word):
        return word[:-2]
    return word[:-1]


def base_of_gerund(word: str) -> str | None:
    """'Installing' -> 'install', 'Creating' -> 'create', 'Running' -> 'run', 'Using' -> 'use'.
    Rough: a question that reads a little oddly still names the task."""
    word = word.lower()
    if not word.endswith("ing") or len(word) < 5 or word in _GERUND_NOUNS or not word.isalpha():
        return None
    stem = word[:-3]
    if stem == "add" or stem.endswith(("ll", "ss", "ff", "zz")):
        return stem
    if stem[-1] == stem[-2] and stem[-1] not in "aeiou":
        return stem[:-1]  # running -> run
    if stem.endswith(_KEEP_E) or stem[-1] in "vc" or (stem[-1] == "s" and stem[-2] in "aeiour") \
            or stem in ("chang", "nam", "typ", "writ", "compil", "defin", "manag", "merg", "arrang"):
        return stem + "e"
    return stem


def task_question(heading: str) -> str | None:
    """A heading that names a task, as the question a person would ask; None otherwise."""
    text = re.sub(r"^[\d.]+:?\s+|^(Chapter|Section|Appendix) [\w.]+:?\.?\s*", "", heading)
    text = re.sub(r"#? ?TOC$", "", text).strip(" .:#")  # ffmpeg's headings end in "# TOC"
    words = text.split()
    if len(words) < 2 or len(words) > 12:
        return None
    if words[0].lower() == "how" and len(words) > 2 and words[1].lower() == "to":
        return f"How do I {' '.join(words[2:])}?"
    if words[0] == "To":
        return f"How do I {' '.join(words[1:])}?"
    base = base_of_gerund(words[0])
    if base is None:
        return None
    rest = " ".join(words[1:])
    return f"How do I {base} {rest[0].lower() + rest[1:] if rest[:2] != rest[:2].upper() else rest}?"


def first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0]
    return sentence.strip().rstrip(".")


_ENTRY_SUBJECT = re.compile(r"^(this|the) (option|directive|setting|parameter|command|flag|"
                            r"variable|function|switch|key|field|property)\s+", re.I)


def entry_question(description: str) -> str | None:
    """A question about what an entry does, made from its description's first sentence:
    'Sets the maximum number of connections.' -> 'How do I set the maximum number of
    connections?'. None when the sentence is too short, too long, or mostly names (an
    author list, a table of values) rather than a description."""
    sentence = _ENTRY_SUBJECT.sub("", first_sentence(description))
    words = sentence.split()
    if not 5 <= len(words) <= 30 or sum(w[:1].islower() for w in words) < len(words) / 2:
        return None
    base = base_of_third_person(words[0])
    if base is not None:
        return f"How do I {base} {' '.join(words[1:])}?"
    if words[0].lower() in ("if", "when", "whether"):
        return f"Which option decides {words[0].lower()} {' '.join(words[1:])}?"
    lead = words[0] if words[0][1:2].isupper() else words[0].lower()
    return f"Which option sets {lead} {' '.join(words[1:])}?"


# -- pairs of each kind ------------------------------------------------------------------------
def faq_pairs(page: Page):
    for heading, passage, body_words in sections(page):
        if heading.endswith("?") and 3 <= len(heading.split()) <= 30 and body_words >= MIN_ANSWER_WORDS:
            yield re.sub(r"^[\d.]+:?\s+", "", heading), passage
    for i, block in enumerate(page.blocks[:-1]):
        if block.kind == "dt" and block.text.endswith("?") and len(block.text.split()) >= 3:
            answer = words_from(page.blocks, i + 1, PASSAGE_WORDS)
            if page.blocks[i + 1].kind == "dd" and len(answer.split()) >= MIN_ANSWER_WORDS:
                yield block.text, f"{block.text}\n{answer}"


def task_pairs(page: Page):
    for heading, passage, body_words in sections(page):
        question = task_question(heading)
        if question and body_words >= MIN_ANSWER_WORDS:
            yield question, passage


def entry_pairs(page: Page):
    """A term of a definition list that names something (an option, a directive, a command),
    and its description."""
    for i, block in enumerate(page.blocks[:-1]):
        following = page.blocks[i + 1]
        if block.kind != "dt" or following.kind != "dd" or block.text.endswith("?"):
            continue
        if len(block.text.split()) > 8 or len(following.text.split()) < 8:
            continue
        question = entry_question(following.text)
        if question:
            yield question, f"{block.text}\n{words_from(page.blocks, i + 1, PASSAGE_WORDS - 8)}"


def index_pairs(pages: dict[str, Page], name: str, page: Page):
    """Index entries: links from an index page to an anchor, and LibreOffice's keywords."""
    for keyword in page.keywords:
        text = words_from(page.blocks, 0, PASSAGE_WORDS)
        if len(text.split()) >= MIN_ANSWER_WORDS:
            yield re.sub(r"\s*[;,]\s*", " ", keyword), text
    if not INDEX_PAGE.search(name):
        return
    folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
    for term, href in page.links:
        target, _, anchor = href.partition("#")
        linked = pages.get(folder + target) if target else None
        if not anchor or linked is None or anchor not in linked.anchors or len(term) < 4:
            continue
        text = words_from(linked.blocks, linked.anchors[anchor], PASSAGE_WORDS)
        if len(text.split()) >= MIN_ANSWER_WORDS:
            yield re.sub(r"\s*,\s*", " ", term), text


def mine_package(package: str, pages: dict[str, Page], rng: random.Random, per_kind: int):
    """Up to `per_kind` pairs of each kind from one manual, and every section as a passage
    (the pool the hard negatives come from)."""
    found: dict[str, dict[str, Pair]] = {kind: {} for kind in KINDS}
    pool = set()
    for name, page in pages.items():
        for kind, pairs in (("faq", faq_pairs(page)), ("task", task_pairs(page)),
                            ("entry", entry_pairs(page)), ("index", index_pairs(pages, name, page))):
            for query, passage in pairs:
                found[kind].setdefault(query.lower(), Pair(query, passage, kind, package, name))
        pool.update(passage for _, passage, words in sections(page) if words >= MIN_ANSWER_WORDS)
    chosen = []
    for kind in KINDS:
        pairs = list(found[kind].values())
        rng.shuffle(pairs)
        chosen += pairs[:per_kind]
    pool.update(pair.passage for pair in chosen)
    return chosen, sorted(pool)


# -- hard negatives -----------------------------------------------------------------------------
class NegativeFinder:
    """The best passages of one manual for a question by BM25 (FTS5) and by the embedder."""

    def __init__(self, passages: list[str], embedder, max_passages: int, rng: random.Random):
        from engine.answer.terms import query_terms

        self._terms = query_terms
        self.passages = passages if len(passages) <= max_passages else rng.sample(passages, max_passages)
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE p USING fts5(text, tokenize='unicode61')")
        self.db.executemany("INSERT INTO p(rowid, text) VALUES (?, ?)", enumerate(self.passages))
        self.vectors = embedder.encode_documents(self.passages)
        self.embedder = embedder

    def add(self, passages: list[str]) -> None:
        """Passages that must be in the pool (the positives), each once."""
        known = set(self.passages)
        new = [p for p in dict.fromkeys(passages) if p not in known]
        start = len(self.passages)
        self.db.executemany("INSERT INTO p(rowid, text) VALUES (?, ?)", enumerate(new, start))
        self.passages += new
        if new:
            self.vectors = np.vstack([self.vectors, self.embedder.encode_documents(new)])

    def bm25(self, query: str, k: int) -> list[int]:
        terms = [t.replace('"', "") for t in self._terms(query)]
        if not terms:
            return []
        match = " OR ".join(f'"{t}"*' for t in terms)
        rows = self.db.execute("SELECT rowid FROM p WHERE p MATCH ? ORDER BY bm25(p) LIMIT ?", (match, k))
        return [r[0] for r in rows]

    def dense(self, vector: np.ndarray, k: int) -> list[int]:
        return list(np.argsort(-(self.vectors @ vector))[:k])


def _overlap(a: str, b: str) -> float:
    x, y = set(a.lower().split()), set(b.lower().split())
    return len(x & y) / max(1, min(len(x), len(y)))


def negatives_for(pair: Pair, ranked: list[int], finder: NegativeFinder, taken: set[str],
                  rng: random.Random) -> str | None:
    """A passage ranked high that is not the answer: ranks 1-8 after leaving out the positive and
    near copies of it (an index entry's target often is a section's text too)."""
    wrong = [finder.passages[i] for i in ranked if finder.passages[i] != pair.passage
             and finder.passages[i] not in taken and _overlap(finder.passages[i], pair.passage) < 0.6]
    return rng.choice(wrong[:8]) if wrong else None


def with_negatives(pairs: list[Pair], finder: NegativeFinder, embedder, rng: random.Random):
    vectors = embedder.encode_queries([p.query for p in pairs])
    for pair, vector in zip(pairs, vectors):
        taken: set[str] = set()
        yield pair, "positive", pair.passage, 1
        for source, ranked in (("bm25", finder.bm25(pair.query, 12)), ("dense", finder.dense(vector, 12))):
            negative = negatives_for(pair, ranked, finder, taken, rng)
            if negative is not None:
                taken.add(negative)
                yield pair, source, negative, 0


# -- main ---------------------------------------------------------------------------------------
def split_of(query: str, valid_share: float) -> str:
    """A question's split from its hash, so it stays put when other questions come and go."""
    bucket = int(hashlib.sha256(query.encode()).hexdigest()[:8], 16) / 16 ** 8
    return "valid" if bucket < valid_share else "train"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench/.cache/reranker/pairs")
    parser.add_argument("--debs", type=Path, default=ROOT / "bench/.cache/reranker/debs")
    parser.add_argument("--packages", nargs="*", default=list(PACKAGES), choices=list(PACKAGES))
    parser.add_argument("--per-kind", type=int, default=250, help="most questions of one kind from one manual")
    parser.add_argument("--pool", type=int, default=800, help="most passages per manual to find negatives in")
    parser.add_argument("--valid-share", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    from engine.encoders.embedder import Embedder
    from engine.models.registry import builtin_embedder_files

    # 64 tokens: a passage's opening is enough to find its look-alikes, at a third of the time
    embedder = Embedder.from_files(builtin_embedder_files(), max_tokens=64).load()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    unpacked = args.debs / "unpacked"
    record = {"packages": [], "counts": {}, "parameters": {k: v for k, v in vars(args).items()
                                                          if k in ("per_kind", "pool", "valid_share", "seed")}}
    counts: Counter = Counter()
    started = time.monotonic()
    with open(args.out / "pairs.jsonl", "w", encoding="utf-8") as out:
        for package in args.packages:
            record["packages"].append(fetch(package, PACKAGES[package][0], args.debs, unpacked))
            pages = pages_of(package, unpacked)
            pairs, pool = mine_package(package, pages, rng, args.per_kind)
            finder = NegativeFinder(pool, embedder, args.pool, rng)
            finder.add([p.passage for p in pairs])
            for pair, source, passage, label in with_negatives(pairs, finder, embedder, rng):
                split = split_of(pair.query, args.valid_share)
                out.write(json.dumps({"query": pair.query, "passage": passage, "label": label,
                                      "kind": pair.kind, "negative": None if label else source,
                                      "package": package, "page": pair.source, "split": split}) + "\n")
                counts[f"{pair.kind}/{source}"] += 1
                counts[f"package/{package}"] += 1
                counts[f"split/{split}"] += 1
            print(f"{package}: {len(pages)} pages, {len(pairs)} questions, {len(finder.passages)} "
                  f"passages in the pool ({time.monotonic() - started:.0f}s)", flush=True)
    record["counts"] = dict(sorted(counts.items()))
    record["questions_per_kind"] = {k: counts[f"{k}/positive"] for k in KINDS}
    record["pairs"] = sum(v for k, v in counts.items() if k.startswith("split/"))
    record["seconds"] = round(time.monotonic() - started)
    (args.out / "pairs.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(record["questions_per_kind"]), record["pairs"], "pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
