"""Recognising the pages of a PDF that need OCR, page by page, inside a parse worker.

    found, warnings = recognise_pages(path, [3, 4], options, report)   # report(done, total)

Each recognised page is written to the cache as soon as it is done, under
    <cache>/<SHA-256 of the file>/<short hash of the engine id>/<page>.json
(an atomic write: a kill leaves the page whole or absent), and read back instead of being
recognised again: a run that was killed or cancelled carries on where it stopped. A cache file
that cannot be read is ignored and the page recognised again. A page that takes longer than
the per-page limit is given up (SIGALRM, checked between the recogniser's steps) and the
document keeps its other pages; a page stuck inside one native call is caught by the worker's
CPU limit and the caller's deadline instead (see parse_pool).
"""

from __future__ import annotations

import hashlib
import json
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.types import PageOcr

log = logging.getLogger(__name__)

PARALLEL_PAGES = 2  # pages recognised at once, one thread each: x1.5 over one page on 2 threads
PAGE_TIME_LIMIT_S = 60.0  # a dense page takes 2-10 s on 2 loaded cores; past this it is stuck
CACHE_FORMAT = 1

_recogniser = None  # one per worker process: the models load once, at its first page


@dataclass(frozen=True)
class OcrOptions:
    """How a ParsePool recognises pages without a text layer. enabled=False: as before OCR."""

    enabled: bool = True
    cache: Path | None = None  # where recognised pages are kept between runs; None: not kept
    page_time_limit_s: float = PAGE_TIME_LIMIT_S
    skip: tuple = ()  # ([position, why], ...): pages that stopped an earlier worker (set by the pool)

    def to_json(self) -> dict:
        return {"enabled": self.enabled, "cache": str(self.cache) if self.cache else None,
                "page_time_limit_s": float(self.page_time_limit_s), "skip": [list(s) for s in self.skip]}

    @classmethod
    def from_json(cls, data: dict | None) -> "OcrOptions":
        if not data:
            return cls(enabled=False)
        cache = data.get("cache")
        return cls(bool(data.get("enabled")), Path(cache) if cache else None,
                   float(data.get("page_time_limit_s") or PAGE_TIME_LIMIT_S),
                   tuple(tuple(s) for s in data.get("skip") or ()))


class PageTimedOut(Exception):
    pass


Report = Callable[[int, int], None]


def recognise_pages(path: Path, numbers: Sequence[int], options: OcrOptions, report: Report,
                    before_page: Callable[[], None] = lambda: None, skip: dict[int, str] | None = None,
                    ) -> tuple[dict[int, tuple[str, PageOcr]], list[str]]:
    """({page: (text, PageOcr)} for the pages recognised, warnings for those that were not).
    `report(done, total)` is called before the first page and after each one; `before_page`
    before each page that is recognised (the worker re-arms its CPU limit there). `skip`:
    {position in `numbers`: why} of pages not to try again (they stopped an earlier worker); one
    found in the cache was recognised after all: the worker was stopped before it reported it."""
    total = len(numbers)
    if not total:
        return {}, []
    report(0, total)
    recogniser = _get_recogniser()
    folder = _cache_folder(options.cache, path, recogniser.engine_id)
    skip = skip or {}
    cached = {number: page for number in numbers
              if (page := _read_cached(folder, number, recogniser.engine_id)) is not None}
    todo = [number for position, number in enumerate(numbers) if position not in skip and number not in cached]
    reader = _InOrder(recogniser, path, todo, options.page_time_limit_s, before_page)
    found: dict[int, tuple[str, PageOcr]] = {}
    failures: dict[str, list[int]] = {}
    try:
        # in page order, so that `done` is the position of the page in work (the pool skips it
        # if it stops the worker)
        for done, number in enumerate(numbers, start=1):
            page = cached.get(number) or skip.get(done - 1) or reader.next(number)
            if isinstance(page, str):
                failures.setdefault(page, []).append(number)
            else:
                if number not in cached:
                    _write_cached(folder, number, page)
                found[number] = page
            report(done, total)
    finally:
        reader.close()
    return found, _failure_warnings(failures)


class _InOrder:
    """The pages to recognise, PARALLEL_PAGES at a time, taken one by one in their order: each
    next() gives (text, PageOcr), or why that page could not be read. The time limit is on
    each page's arrival (with two in flight a page has had at least that long); after a page
    that fails or runs out of time, the pages after it start again."""

    def __init__(self, recogniser, path: Path, numbers: list[int], limit_s: float, before_page):
        self.recogniser, self.path, self.limit_s, self.before_page = recogniser, path, limit_s, before_page
        self.remaining = list(numbers)
        self.pages = None
        if numbers:
            recogniser.load()  # the models load before a page's time limit starts

    def next(self, number: int) -> tuple[str, PageOcr] | str:
        from engine.ingest.pdf import describe

        assert self.remaining and self.remaining[0] == number, (number, self.remaining[:1])
        if self.pages is None:
            self.pages = self.recogniser.recognise_pdf_pages(self.path, list(self.remaining),
                                                              parallel=PARALLEL_PAGES)
        self.remaining.pop(0)
        self.before_page()
        limit = _TimeLimit(self.limit_s)
        try:
            with limit:
                _, text, ocr = next(self.pages)
            return text, ocr
        except MemoryError:
            raise  # the worker's memory is suspect: it retires, the document is "too large"
        except Exception as exc:  # the recogniser on a strange page: that page only
            self.close()
            # the timer's exception may arrive wrapped (raised inside a class body, Python
            # reports a RuntimeError from __set_name__): the timer, not the type, says what happened
            if limit.expired:
                return f"it took longer than the {self.limit_s:g} s limit per page"
            return describe(exc)

    def close(self) -> None:
        if self.pages is not None:
            self.pages.close()
            self.pages = None


def _get_recogniser():
    global _recogniser
    if _recogniser is None:
        from engine.ingest.ocr import OcrSettings, PageRecogniser

        _recogniser = PageRecogniser(OcrSettings(threads=1))  # PARALLEL_PAGES pages, a thread each
    return _recogniser


def _failure_warnings(failures: dict[str, list[int]]) -> list[str]:
    from engine.ingest.pdf import page_numbers_text

    return [f"{page_numbers_text(numbers)} could not be recognised (OCR): {reason}"
            for reason, numbers in failures.items()]


class _TimeLimit:
    """PageTimedOut once `seconds` of wall time have passed (Unix; elsewhere no limit);
    `expired` says afterwards whether the timer fired, whatever exception it became."""

    def __init__(self, seconds: float):
        self.seconds, self.expired, self.previous = seconds, False, None
        self.armed = hasattr(signal, "setitimer") and seconds > 0

    def __enter__(self) -> "_TimeLimit":
        if self.armed:
            self.previous = signal.signal(signal.SIGALRM, self._expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)

    def _expire(self, _signum, _frame):
        self.expired = True
        raise PageTimedOut()


# -- the cache ------------------------------------------------------------------------------
def cache_folder(cache: Path, sha256: str, engine_id: str) -> Path:
    """Where the pages of the file with this SHA-256, recognised by this engine, are kept."""
    return Path(cache) / sha256 / hashlib.sha256(engine_id.encode("utf-8")).hexdigest()[:16]


def _cache_folder(cache: Path | None, path: Path, engine_id: str) -> Path | None:
    if cache is None:
        return None
    from engine.hashing import sha256_file

    return cache_folder(cache, sha256_file(path), engine_id)


def _read_cached(folder: Path | None, number: int, engine_id: str) -> tuple[str, PageOcr] | None:
    """The page as recognised before, or None (not there, or not readable: recognise again)."""
    if folder is None:
        return None
    file = folder / f"{number}.json"
    try:
        data = json.loads(file.read_bytes())
        text, ocr = data["text"], PageOcr.from_json(data["ocr"])
        if data.get("format") != CACHE_FORMAT or not isinstance(text, str) or ocr.engine != engine_id \
                or any(not 0 <= w.start <= w.end <= len(text) for w in ocr.words):
            raise ValueError("not a page this engine recognised")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        log.info("OCR cache file %s is unreadable (%s); recognising the page again", file, exc)
        return None
    return text, ocr


def _write_cached(folder: Path | None, number: int, page: tuple[str, PageOcr]) -> None:
    if folder is None:
        return
    from engine.atomic_file import write_atomic

    text, ocr = page
    try:
        write_atomic(folder / f"{number}.json",
                     json.dumps({"format": CACHE_FORMAT, "page": number, "text": text, "ocr": ocr.to_json()}))
    except OSError as exc:  # a full disk costs the resumption, not the page
        log.warning("could not keep the recognised page %d in %s: %s", number, folder, exc)
