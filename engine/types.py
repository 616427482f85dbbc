"""Small immutable records that cross module and process boundaries (plain data, no pickle
needed), and the few interfaces that several packages share: CancelFlag, and LanguageModel with
the GenerationStream it returns (one place, so that ingest, store and answer need not import llm)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import PurePath
from typing import Literal, Protocol

FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 means greedy: the same text every time
    top_p: float = 1.0
    top_k: int = 50
    seed: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    new_tokens: int
    time_to_first_token_s: float
    tokens_per_s: float
    total_s: float
    finish_reason: FinishReason
    provider: str
    cached_tokens: int = 0  # of prompt_tokens, taken from a kept KV cache (engine.llm.prompt_cache)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GenerationResult:
    text: str
    stats: GenerationStats


class CancelFlag(Protocol):
    def is_set(self) -> bool: ...


class GenerationStream:
    """Iterates over text pieces; `stats` is set once the iteration has ended."""

    def __init__(self, pieces: Iterator[str | GenerationStats]):
        self._pieces = pieces
        self.stats: GenerationStats | None = None

    def __iter__(self) -> Iterator[str]:
        return (piece for piece in self.turns() if piece)

    def turns(self) -> Iterator[str]:
        """The pieces, and "" wherever the model paused with no text yet (between a prompt's
        pieces): a model process serving several generations gives the others a turn there."""
        for item in self._pieces:
            if isinstance(item, GenerationStats):
                self.stats = item
            else:
                yield item

    def collect(self) -> GenerationResult:
        text = "".join(self)
        assert self.stats is not None
        return GenerationResult(text, self.stats)


class LanguageModel(Protocol):
    """What LocalLLM, LLMClient and RemoteLLM (engine.llm) all offer. A message is
    {"role": "system" | "user" | "assistant", "content": str}."""

    provider: str | None  # set by load()
    requested_provider: str
    context_length: int  # tokens; known once loaded
    template_overhead: tuple[int, int]  # what the chat template adds: per chat, per message

    def load(self) -> LanguageModel: ...

    def close(self) -> None: ...

    def __enter__(self) -> LanguageModel: ...

    def __exit__(self, *exc) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def template_tokens(self, messages: int) -> int: ...

    def stream(self, messages: Sequence[dict], *, max_new_tokens: int = 256, temperature: float = 0.0,
               top_p: float = 1.0, top_k: int = 50, seed: int | None = None,
               cancel: CancelFlag | None = None) -> GenerationStream: ...

    def generate(self, messages: Sequence[dict], **kwargs) -> GenerationResult: ...


# -- documents and the index ---------------------------------------------------------------

DocumentStatus = Literal["ready", "ready_with_warnings", "failed"]


@dataclass(frozen=True)
class OcrWord:
    """A recognised word: characters [start, end) of its page's text, and where it is on the
    page (x0, y0, x1, y1 in PDF points from the page's top left, as QtPdf draws)."""

    start: int
    end: int
    box: tuple[float, float, float, float]
    confidence: float  # 0..1, the recogniser's


@dataclass(frozen=True)
class PageOcr:
    """How a page without a text layer was read: by OCR, with this confidence (0..1, over
    its characters), on a page of width x height points; `engine` names the models and
    settings (engine.ingest.ocr.OcrSettings.engine_id)."""

    confidence: float
    width: float
    height: float
    words: tuple[OcrWord, ...]
    engine: str

    def to_json(self) -> dict:
        return {"confidence": self.confidence, "width": self.width, "height": self.height,
                "engine": self.engine,
                "words": [[w.start, w.end, *w.box, w.confidence] for w in self.words]}

    @classmethod
    def from_json(cls, data: dict) -> "PageOcr":
        words = tuple(OcrWord(int(s), int(e), (float(x0), float(y0), float(x1), float(y1)), float(c))
                      for s, e, x0, y0, x1, y1, c in data.get("words", ()))
        return cls(float(data["confidence"]), float(data["width"]), float(data["height"]), words,
                   str(data.get("engine", "")))


@dataclass(frozen=True)
class Page:
    """One page of a document's text. For PDFs `number` is the physical page (1-based, as a
    viewer counts) and `label` its printed label where the PDF declares one that differs
    ("5" on page 10); for other formats it numbers sections or blocks of lines, and `label`
    says which ("lines 1-120", a heading). `ocr` is set when the text was recognised from
    the page's image (a scanned page)."""

    number: int
    text: str
    label: str = ""
    ocr: PageOcr | None = None


@dataclass(frozen=True)
class OutlineEntry:
    """A bookmark of a PDF's outline: the physical page it points to, and its title with the
    titles of the bookmarks above it ("Commands", "Set-show", "Logscale")."""

    page: int
    path: tuple[str, ...]


@dataclass(frozen=True)
class ParsedDocument:
    path: str
    title: str
    pages: tuple[Page, ...]
    warnings: tuple[str, ...] = ()
    outline: tuple[OutlineEntry, ...] = ()  # in document order; empty when there is none


@dataclass(frozen=True)
class Chunk:
    """A piece of one page: its text, where it sits in that page's text, and its headings."""

    page: int
    start: int
    end: int
    text: str
    heading_path: tuple[str, ...] = ()


@dataclass(frozen=True)
class DocumentOutcome:
    path: str
    status: DocumentStatus
    reason: str = ""  # why it failed, or the warnings, in words a person can act on
    pages: int = 0
    chunks: int = 0
    # Why a file was not read: "" (it was read, or it failed), "unchanged" (stored already),
    # "copy" (its bytes are stored under `stored_as`), "moved" (stored under `stored_as`, the
    # path its file had, and now under this one)
    not_read: str = ""
    stored_as: str = ""


@dataclass(frozen=True)
class StoredDocument:
    """A document of a collection, as IndexStore.list_documents() and find_document() give it.
    The GUI shows a file not stored yet with the same record: id None, status "queued" or
    "indexing", and pages_done while its pages are embedded."""

    path: str
    status: str  # a DocumentStatus; in the GUI also "queued" or "indexing"
    id: int | None = None  # None until stored
    title: str = ""
    error: str = ""  # why it failed, or its warnings
    page_count: int = 0
    chunk_count: int = 0
    sha256: str = ""
    size: int = 0
    mtime: float = 0.0
    added_at: float = 0.0
    pages_done: int | None = None  # while indexing: the pages embedded so far (not stored)
    ocr_pages: int = 0  # its pages whose text was recognised by OCR (and is searched)
    ocr_confidence: float | None = None  # the mean confidence (0..1) of those pages; None: none
    text_version: int | None = None  # which reading of its format its text is (engine.ingest.text_version)

    @property
    def name(self) -> str:
        return PurePath(self.path).name

    def to_dict(self) -> dict:
        """The stored columns, as `docs list --json` writes them; ocr_pages and ocr_confidence
        only for a document with pages read by OCR (a reader takes a missing one as 0 / None)."""
        columns = _STORED_COLUMNS + (_OCR_COLUMNS if self.ocr_pages else ())
        return {key: getattr(self, key) for key in columns}


_STORED_COLUMNS = ("id", "path", "sha256", "size", "mtime", "status", "error", "page_count", "title",
                   "added_at", "chunk_count")
_OCR_COLUMNS = ("ocr_pages", "ocr_confidence")


@dataclass(frozen=True)
class PageProgress:
    """OCR of one document under way: `done` of the `total` pages without text recognised
    (ParsePool.imap(..., progress=True) yields it before the document's result)."""

    done: int
    total: int


@dataclass(frozen=True)
class IndexProgress:
    """One event of an indexing run, for progress bars and logs."""

    documents_done: int
    documents_total: int
    pages_done: int
    current_file: str
    elapsed_s: float
    outcome: DocumentOutcome | None = None  # set when a document has just finished
    bytes_done: int = 0  # file sizes drive the ETA: page counts are unknown until parsed
    bytes_total: int = 0
    document_pages: int = 0  # of the current document, once it is parsed
    document_pages_done: int = 0  # of those, the pages whose chunks are embedded
    # "" while parsing, chunking and embedding; "recognising" while OCR reads the current
    # document's scanned pages: document_pages and document_pages_done then count those pages
    stage: str = ""

    @property
    def pages_per_s(self) -> float:
        return self.pages_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if self.bytes_done <= 0 or self.bytes_total <= 0:
            return None
        return self.elapsed_s * (self.bytes_total - self.bytes_done) / self.bytes_done


# -- retrieval and answers -----------------------------------------------------------------

@dataclass(frozen=True)
class Span:
    """Where a passage's text sits: characters [start, end) of a page's text."""

    page: int
    start: int
    end: int


def pages_text(pages: Sequence[int], labels: Sequence[str], joiner: str = ", ") -> str:
    """"page 12", or "page 5 (PDF page 10)" where the printed labels (aligned with the
    physical `pages`) differ from the numbers: one wording for citations and the source view."""
    word = "pages" if len(pages) > 1 else "page"
    numbers = joiner.join(str(p) for p in pages)
    printed = joiner.join(labels)
    return f"{word} {numbers}" if printed == numbers else f"{word} {printed} (PDF {word} {numbers})"


@dataclass(frozen=True)
class Passage:
    """Retrieved text: one chunk, or neighbouring chunks of one document merged."""

    document_id: int
    path: str
    title: str
    chunk_ids: tuple[int, ...]
    spans: tuple[Span, ...]
    text: str
    heading_path: tuple[str, ...]
    score: float  # what ordered the results: the fused score, or the reranker's
    similarity: float  # cosine of the question and the best chunk; the relevance gate reads it
    keyword_score: float | None = None  # BM25 (higher is better), when keyword search found it
    rerank_score: float | None = None
    anchor: int = 0  # which span is the chunk that ranked: a citation opens its page
    # (physical page, printed label) for its pages whose printed label differs ("5" on PDF
    # page 10), in page order; empty for other pages, other formats and older collections
    page_labels: tuple[tuple[int, str], ...] = ()
    ocr_pages: tuple[int, ...] = ()  # its pages whose text was recognised by OCR, in page order

    @property
    def page(self) -> int:
        return self.spans[self.anchor].page

    def page_label(self, page: int) -> str:
        """What a physical page is called in print: its label, else its number."""
        return next((label for number, label in self.page_labels if number == page), str(page))

    def pages_text(self, pages: Sequence[int] | None = None, joiner: str = ", ") -> str:
        """"page 12", or "page 5 (PDF page 10)" where the printed label differs, so that a
        person finds it both in print and in a viewer. `pages` defaults to all of its pages."""
        pages = self.pages if pages is None else tuple(pages)
        return pages_text(pages, [self.page_label(p) for p in pages], joiner)

    @property
    def pages(self) -> tuple[int, ...]:
        return tuple(sorted({span.page for span in self.spans}))

    @property
    def document(self) -> str:
        """The file name, as a citation shows it."""
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    def to_dict(self) -> dict:
        return {**asdict(self), "document": self.document, "pages": list(self.pages),
                "ocr_pages": list(self.ocr_pages)}

    @classmethod
    def from_dict(cls, data: dict) -> "Passage":
        """A Passage back from to_dict() (a central server's /v1/ask sends them so)."""
        spans = tuple(Span(int(s["page"]), int(s["start"]), int(s["end"])) for s in data.get("spans") or ())
        return cls(int(data.get("document_id") or 0), str(data.get("path") or ""), str(data.get("title") or ""),
                   tuple(int(c) for c in data.get("chunk_ids") or ()), spans or (Span(1, 0, 0),),
                   str(data.get("text") or ""), tuple(str(h) for h in data.get("heading_path") or ()),
                   float(data.get("score") or 0.0), float(data.get("similarity") or 0.0),
                   data.get("keyword_score"), data.get("rerank_score"), int(data.get("anchor") or 0),
                   tuple((int(n), str(label)) for n, label in data.get("page_labels") or ()),
                   tuple(int(p) for p in data.get("ocr_pages") or ()))


@dataclass(frozen=True)
class Quote:
    """A unit of a retrieved passage (a sentence, a table row with its header, a setting...), as
    shown: verbatim, runs of whitespace as one space, a list item on a line of its own, a row's
    cells set apart by " | " under its header's line."""

    number: int  # the passage's [n], as the prompt numbers it
    text: str
    passage: Passage
    span: Span  # the unit itself, in its page's text
    focus: tuple[int, int] | None = None  # the unit itself within `text` (None: all of it)
    kind: str = "sentence"  # engine.answer.sentences: sentence, item, row, definition, setting, code, warning
    marks: tuple[tuple[int, int], ...] = ()  # the question's words within `text`, drawn marked

    @property
    def page(self) -> int:
        return self.span.page

    @property
    def document(self) -> str:
        return self.passage.document

    def to_dict(self) -> dict:
        found = {"number": self.number, "text": self.text, "document": self.document,
                 "path": self.passage.path, "document_id": self.passage.document_id, "page": self.page,
                 "page_label": self.passage.page_label(self.page),
                 "span": [self.span.page, self.span.start, self.span.end], "kind": self.kind}
        if self.focus is not None:
            found["focus"] = list(self.focus)
        if self.marks:
            found["marks"] = [list(mark) for mark in self.marks]
        if self.page in self.passage.ocr_pages:  # only then: a quote from a text layer is as before
            found["ocr_pages"] = [self.page]
        return found

    @classmethod
    def from_dict(cls, data: dict) -> "Quote":
        """A Quote back from to_dict(), as a saved conversation holds it."""
        page, start, end = (int(v) for v in data.get("span") or [data.get("page") or 1, 0, 0])
        path = str(data.get("path") or data.get("document") or "")
        text = str(data.get("text") or "")
        passage = Passage(document_id=int(data.get("document_id") or 0), path=path,
                          title=str(data.get("document") or path), chunk_ids=(), spans=(Span(page, start, end),),
                          text=text, heading_path=(), score=0.0,
                          similarity=0.0, page_labels=_labels_of([page], [data.get("page_label")]),
                          ocr_pages=tuple(int(p) for p in data.get("ocr_pages") or ()))
        focus = data.get("focus")
        marks = tuple((int(a), int(b)) for a, b in data.get("marks") or ())
        return cls(int(data.get("number") or 0), text, passage, Span(page, start, end),
                   (int(focus[0]), int(focus[1])) if focus else None, str(data.get("kind") or "sentence"), marks)

    def as_passage(self) -> Passage:
        """The quote's passage narrowed to the quote: opening it highlights this sentence only."""
        return replace(self.passage, spans=(self.span,), text=self.text, anchor=0)


def _labels_of(pages: Sequence[int], labels: Sequence) -> tuple[tuple[int, str], ...]:
    """Passage.page_labels from saved labels aligned with `pages` (older saves have none)."""
    return tuple((page, str(label)) for page, label in zip(pages, labels)
                 if label and str(label) != str(page))


@dataclass(frozen=True)
class Citation:
    number: int  # the [n] of the prompt and the answer
    passage: Passage
    quote: str  # the passage's sentence that best matches the question
    cited: bool  # False when the model cited nothing and this is attached as a source

    def to_dict(self) -> dict:
        p = self.passage
        return {"number": self.number, "document": p.document, "path": p.path, "document_id": p.document_id,
                "pages": list(p.pages), "page": p.page, "page_label": p.page_label(p.page),
                "page_labels": [p.page_label(n) for n in p.pages], "ocr_pages": list(p.ocr_pages),
                "quote": self.quote, "cited": self.cited,
                "heading_path": list(p.heading_path), "text": p.text,
                "spans": [[s.page, s.start, s.end] for s in p.spans], "anchor": p.anchor}

    @classmethod
    def from_dict(cls, data: dict) -> "Citation":
        """A Citation back from to_dict(), as a saved conversation holds it. Conversations saved
        before spans were kept have pages only: their spans are empty ranges on those pages."""
        pages = [int(p) for p in data.get("pages") or [data.get("page") or 1]]
        page = int(data.get("page") or pages[0])
        saved = data.get("spans")
        if saved:
            spans = tuple(Span(int(p), int(start), int(end)) for p, start, end in saved)
            anchor = int(data.get("anchor") or 0)
            anchor = anchor if 0 <= anchor < len(spans) else 0
        else:
            spans = tuple(Span(p, 0, 0) for p in pages)
            anchor = pages.index(page) if page in pages else 0
        path = str(data.get("path") or data.get("document") or "")
        passage = Passage(document_id=int(data.get("document_id") or 0), path=path,
                          title=str(data.get("document") or path), chunk_ids=(), spans=spans,
                          text=str(data.get("text") or ""),
                          heading_path=tuple(data.get("heading_path") or ()), score=0.0,
                          similarity=0.0, anchor=anchor,
                          page_labels=_labels_of(pages, data.get("page_labels") or ()),
                          ocr_pages=tuple(int(p) for p in data.get("ocr_pages") or ()))
        return cls(int(data.get("number") or 0), passage, str(data.get("quote") or ""),
                   bool(data.get("cited", True)))

    @classmethod
    def of_quote(cls, quote: Quote) -> "Citation":
        """A lead sentence as a citation: opening it shows its page with just that sentence marked."""
        return cls(quote.number, quote.as_passage(), quote.text, True)


@dataclass(frozen=True)
class CheckedSentence:
    """A sentence of the model's answer, checked against the passages it was given."""

    start: int  # characters [start, end) of the answer's final text (DoneEvent.answer)
    end: int
    supported: bool  # False: the passages do not say this; the views mark it
    source: int | None  # the [n] of the passage it came from (None: none does)
    score: float  # how strongly the best passage supports it, 0..1

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CheckedSentence":
        return cls(int(data["start"]), int(data["end"]), bool(data["supported"]),
                   None if data.get("source") is None else int(data["source"]), float(data.get("score", 0.0)))

