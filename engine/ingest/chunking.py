"""Structure-aware chunking: a document's pages -> blocks -> chunks sized in embedder tokens.

Span convention: `chunk.text == page.text[chunk.start:chunk.end]`, and a span never starts or
ends with whitespace, so the text is also already stripped.

Each page's text is split into blocks (headings, paragraphs, list runs, code, tables); blocks
are packed whole into chunks of at most `target_tokens`, and only a block too big for a chunk
of its own is split, at lines or sentences, then words. A chunk after the first of a page
starts with about `overlap_tokens` of the previous chunk's tail, except where a new section
begins. A tail smaller than `min_tokens` is merged into its neighbour on the page, so a chunk
holds at most `target_tokens + min_tokens` tokens (token counts of pieces cut at whitespace add
up); a page too short to reach `min_tokens` is a small chunk of its own, never dropped.

Running headers and footers are left out of every chunk (see `boilerplate_keys`); the spans
still point into the original page text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.ingest.text import HEADING_SEPARATOR
from engine.types import Chunk, Page, ParsedDocument

CountTokens = Callable[[str], int]
CountTokensBatch = Callable[[Sequence[str]], Sequence[int]]

FRONT_MATTER_PAGES = 50  # unnumbered pages before page 1, at most
CHAPTER_GAP = 10  # pages without a chapter's running header, and the header is another chapter's
EDGE_LINES = 3  # lines looked at, at each end of a page, for running headers and footers
MAX_BOILERPLATE_CHARS = 160  # longer lines are text, whatever repeats
MIN_PAGES_FOR_BOILERPLATE = 4
MAX_HEADING_DEPTH = 6


def chunk_document(doc: ParsedDocument, count_tokens: CountTokens, *, target_tokens: int = 256,
                   overlap_tokens: int = 32, min_tokens: int = 8,
                   count_tokens_batch: CountTokensBatch | None = None) -> list[Chunk]:
    """Chunks of every page, in page order. `count_tokens` counts a text's tokens without
    special tokens (Embedder.count_tokens); `count_tokens_batch`, when given, is used to
    count many texts at once, which is much faster."""
    target = max(16, target_tokens)
    sizes = _Sizes(target, max(0, min(overlap_tokens, target // 2)), max(0, min_tokens))
    counter = _TokenCounter(count_tokens, count_tokens_batch)
    layouts = _lay_out(doc)
    chunks: list[Chunk] = []
    for (page, _), measured in zip(layouts, _measure(layouts, sizes, counter)):
        chunks += _chunk_page(page, measured, sizes, counter)
    return chunks


@dataclass(frozen=True)
class _Sizes:
    target: int
    overlap: int
    minimum: int

    @property
    def piece(self) -> int:
        """The most a single unit may hold, so that it fits a chunk that starts with overlap."""
        return max(1, self.target - self.overlap)


class _TokenCounter:
    """Token counts by text, cached: blocks are counted once, in batches where possible."""

    def __init__(self, single: CountTokens, batch: CountTokensBatch | None):
        self._single = single
        self._batch = batch
        self._cache: dict[str, int] = {}

    def count(self, texts: Sequence[str]) -> list[int]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            found = self._batch(missing) if self._batch else [self._single(t) for t in missing]
            self._cache.update(zip(missing, found))
        return [self._cache[t] for t in texts]

    def one(self, text: str) -> int:
        return self.count([text])[0]


# -- running headers and footers --------------------------------------------------------------
# "12", "- 12 -", "Page 3 of 10", "iv": digits are already '#' in a key.
_LAST_NUMBER = re.compile(r"(\d{1,5})\D*$")
_PAGE_NUMBER_KEY = re.compile(
    r"^[^\w#]*(?:page\s*)?(?:#|(?=[ivxlc])(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3}))"
    r"(?:\s*(?:of|/)\s*#)?[^\w#]*$")


def line_key(line: str) -> str:
    """A line as compared across pages: case, spacing and digits ignored ('Page 3 of 10' and
    'Page 4 of 10' are the same line)."""
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


def _split_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, without its newline."""
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def _edge_indexes(text: str, lines: list[tuple[int, int]]) -> list[int]:
    filled = [i for i, (a, b) in enumerate(lines) if not text[a:b].isspace() and a < b]
    if len(filled) <= 2 * EDGE_LINES:
        return filled
    return filled[:EDGE_LINES] + filled[-EDGE_LINES:]


def boilerplate_keys(pages: Sequence[Page], paged: bool = True) -> set[str]:
    """Keys (see `line_key`) of running headers and footers, for documents of 4 pages or more:
    lines among the first or last 3 of a page that recur there on at least half the pages of
    the document, and bare page numbers. In `paged` documents (PDF) also chapter headers:
    lines with a number (the page's) there on at least 2 pages and on half of the pages from
    their first to their last."""
    if len(pages) < MIN_PAGES_FOR_BOILERPLATE:
        return set()
    seen: dict[str, list[int]] = {}
    numbered: dict[str, list[tuple[int, int]]] = {}  # (page, the line's last number less the page)
    for number, page in enumerate(pages):
        lines = _split_lines(page.text)
        edges = (page.text[a:b] for a, b in (lines[i] for i in _edge_indexes(page.text, lines))
                 if b - a <= MAX_BOILERPLATE_CHARS)
        for key, line in {line_key(text): text for text in edges}.items():
            seen.setdefault(key, []).append(number)
            last = _LAST_NUMBER.search(line)
            offset = int(last.group(1)) - number if last else None
            if offset is not None and -FRONT_MATTER_PAGES <= offset <= 1:  # as printed: its index + 1 at most
                numbered.setdefault(key, []).append((number, offset))
    keys = set()
    for key, where in seen.items():
        stretch = where[-1] - where[0] + 1
        chapter_header = paged and "#" in key and len(where) >= 2 and (
            2 * len(where) >= stretch or _numbers_its_pages(numbered.get(key, [])))
        if 2 * len(where) >= len(pages) or chapter_header or _PAGE_NUMBER_KEY.match(key):
            keys.add(key)
    return keys


def _numbers_its_pages(numbered: list[tuple[int, int]]) -> bool:
    """A chapter header that comes back in another chapter far away ("3.3. ELEMENTARY DEVICES 79"
    on pages 77-91, "31.2. ELEMENTARY DEVICES 643" on 643-647: one key): on some run of pages
    near one another (CHAPTER_GAP) it is there on half of them, 3 at least, and its last
    number is each page's own, as printed."""
    run: list[tuple[int, int]] = []
    for page, offset in numbered:
        if run and (page - run[-1][0] > CHAPTER_GAP or offset != run[-1][1]):
            run = []
        run.append((page, offset))
        if len(run) >= 3 and 2 * len(run) >= page - run[0][0] + 1:  # 2: "Answer 1" over "Answer 2" (a FAQ)
            return True
    return False


def _content_lines(text: str, boilerplate: set[str]) -> list[tuple[int, int]]:
    """The page's lines less running headers and footers, taken off its two ends only."""
    lines = _split_lines(text)
    filled = _edge_indexes(text, lines)
    first, last = 0, len(lines) - 1
    for i in filled[:EDGE_LINES]:
        if line_key(text[slice(*lines[i])]) not in boilerplate:
            break
        first = i + 1
    for i in reversed(filled[-EDGE_LINES:]):
        if i < first or line_key(text[slice(*lines[i])]) not in boilerplate:
            break
        last = i - 1
    return lines[first:last + 1]


# -- blocks -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Block:
    start: int
    end: int
    kind: str  # heading | paragraph | list | code | table
    path: tuple[str, ...] = ()  # headings in force here; a heading's path ends with itself


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s*([-*_=~])(?:\s*\1){2,}\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_MARKDOWN_SUFFIXES = (".md", ".markdown", ".txt")
_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)[\s#]*$")
_NUMBERED = re.compile(r"^\s*(\d{1,2}(?:\.\d{1,3}){0,4})(\.?)\s+([A-Z]\S*(?:\s+\S+){0,11})\s*$")
_CHAPTER = re.compile(r"^\s*(?:Chapter|Appendix|Part|Annex)\s+(?:\d{1,3}|[A-Z]|[IVXLC]+)"
                      r"(?:[:.]?$|[:.]?\s+[A-Z])")
_RUNNING_TAIL = re.compile(r"(?:[.,;-]|:.*\s\d+)$")  # "Chapter 3: Objects 15" is a page header
_NOT_A_TITLE = re.compile(r"[\d%=<>$]")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•◦▪‣–·]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+\S")
_PROMPT = re.compile(r"^\s*(?:\$|>>>|>|PS>|\.\.\.)\s")
_DOT_LEADERS = re.compile(r"\.\s?\.\s?\.")
_CODE_CHARS = re.compile(r"[()\[\]{}<>=$|\\@#*_]")
_CELL_GAP = re.compile(r"(?: {2,}|\t+)(?=\S)")
_MINOR_WORDS = frozenset(
    "a an and as at by for from in into of on or per the to vs via with".split())
_SENTENCE_END = ".!?:"


class _PageLines:
    """The content lines of one page, with the line tests that need their neighbours."""

    def __init__(self, text: str, lines: list[tuple[int, int]], markdown: bool,
                 guess_titles: bool = True):
        self.markdown = markdown  # '#' lines are headings, not comments in code
        self.guess_titles = guess_titles  # title-case lines as headings (off under an outline)
        self.text = text
        self.spans = lines
        self.raw = [text[a:b].rstrip("\r") for a, b in lines]
        self.strip = [line.strip() for line in self.raw]
        self.count = len(lines)
        self._kinds: list[str | None] = [None] * len(lines)  # each line is classified once

    # Cheap first-character tests come before each regex: pages have many lines.
    def blank(self, i: int) -> bool:
        line = self.strip[i]
        return not line or (line[0] in "-*_=~" and bool(_RULE.match(line))
                            and not self.setext_below(i - 1))

    def indent(self, i: int) -> int:
        line = self.raw[i].expandtabs(4)
        return len(line) - len(line.lstrip())

    def ends_sentence_before(self, i: int) -> bool:
        """True at the page's start, after a blank line, a heading or a finished sentence."""
        before = self.strip[i - 1] if i else ""
        if not before or self._kinds[i - 1] == "heading":  # lines are classified in order
            return True
        return before[-1] in _SENTENCE_END and not before.endswith("..")

    def setext_below(self, i: int) -> bool:
        return (0 <= i < self.count - 1 and self.strip[i + 1][:1] in ("=", "-")
                and len(self.strip[i + 1]) >= 3 and bool(_SETEXT.match(self.raw[i + 1]))
                and bool(self.strip[i]) and not _RULE.match(self.raw[i]))

    def table_row(self, i: int) -> bool:
        line = self.strip[i]
        if "|" in line:
            return line.count("|") >= 2
        return ("  " in line or "\t" in line) and len(_CELL_GAP.findall(line)) >= 2

    def cell_starts(self, i: int) -> set[int]:
        line = self.raw[i].expandtabs(4)
        return {m.end() for m in _CELL_GAP.finditer(line)}

    def table_starts(self, i: int) -> bool:
        if i + 1 >= self.count or not (self.table_row(i) and self.table_row(i + 1)):
            return False
        if "|" in self.strip[i]:
            return True
        return bool(self.cell_starts(i) & self.cell_starts(i + 1))  # columns line up

    def code_line(self, i: int, after_code: bool = False) -> bool:
        if self.strip[i][:1] in ("$", ">", "P", ".") and _PROMPT.match(self.raw[i]):
            return True
        indented = (self.raw[i][:1] in (" ", "\t") and self.indent(i) >= 4
                    and not _LIST_ITEM.match(self.raw[i]))
        return indented and (after_code or i == 0 or not self.strip[i - 1])

    def heading(self, i: int) -> tuple[int, str] | None:
        """(level, text) when line i is a heading; level 0 means 'under the last numbered or
        Markdown heading' (a title-case line whose rank the text does not say)."""
        raw, line = self.raw[i], self.strip[i]
        if len(line) > 100:
            return None
        if line[0] == "#" and self.markdown and (match := _MD_HEADING.match(raw)):
            return (len(match.group(1)), match.group(2)) if match.group(2) else None
        if self.setext_below(i):
            return (1 if self.strip[i + 1][0] == "=" else 2), line
        if not (line[0].isdigit() or line[0].isupper()) or _DOT_LEADERS.search(line):
            return None
        if (line[0] in "ACP" and _CHAPTER.match(raw) and not _RUNNING_TAIL.search(line)
                and self.ends_sentence_before(i)):
            return 1, " ".join(line.split())
        if line[0].isdigit() and (match := _NUMBERED.match(raw)):
            number, dot, rest = match.groups()
            after_sentence = self.ends_sentence_before(i)
            if rest[-1] in ".,;:-" or not (after_sentence or _NOT_A_TITLE.search(rest) is None):
                return None
            if "." not in number and (dot or not after_sentence):
                return None  # "1. Open the lid" is a list item, "3 of them" a wrapped line
            return number.count(".") + 1, " ".join(line.split())
        if self.guess_titles and self.title_line(i):
            return 0, " ".join(line.split())
        return None

    def title_line(self, i: int) -> bool:
        line = self.strip[i]
        if (len(line) > 70 or line[-1] in ".,;:!?-" or not line[0].isupper()
                or _CODE_CHARS.search(line) or _LIST_ITEM.match(line)):
            return False
        words = [w for w in line.split() if w[0].isalpha()]
        if not words or len(line.split()) > 10:
            return False
        if not all(w[0].isupper() or w.lower() in _MINOR_WORDS for w in words):
            return False
        next_line = self.strip[i + 1] if i + 1 < self.count else ""
        if next_line[:1].islower() or not self.ends_sentence_before(i) or _numeric(next_line):
            return False  # a wrapped sentence, or a table's header row
        # Two real words at least ("See Also" is a caption in reference manuals), or a lone
        # word standing between blank lines.
        if sum(len(w) >= 4 for w in words) >= 2:
            return True
        return len(words) == 1 and not next_line and (i == 0 or not self.strip[i - 1])

    def mark_heading(self, first: int, last: int) -> None:
        """Lines the outline says are a heading (the next line's tests read this)."""
        for i in range(first, last + 1):
            self._kinds[i] = "heading"

    def kind(self, i: int) -> str:
        if self._kinds[i] is None:
            self._kinds[i] = self._classify(i)
        return self._kinds[i]

    def _classify(self, i: int) -> str:
        if self.blank(i):
            return "blank"
        if self.strip[i][0] in "`~" and _FENCE.match(self.raw[i]):
            return "fence"
        if self.heading(i):
            return "heading"
        if _LIST_ITEM.match(self.raw[i]):
            return "list"
        if self.code_line(i):
            return "code"
        if self.table_starts(i):
            return "table"
        return "text"


def _numeric(line: str) -> bool:
    """Mostly numbers, like a row of a table."""
    cells = line.split()
    return bool(cells) and 2 * sum(c[0].isdigit() or c[0] in "-+." for c in cells) >= len(cells)


def _block_end(lines: _PageLines, i: int, kind: str) -> int:
    """The index of the last line of the block of `kind` that starts at line i."""
    if kind == "fence":
        return next((j for j in range(i + 1, lines.count) if _FENCE.match(lines.raw[j])),
                    lines.count - 1)
    if kind == "heading":
        return i + 1 if lines.setext_below(i) else i
    if kind == "list":
        return _list_end(lines, i)
    if kind == "code":
        return _run_end(lines, i, lambda j: lines.code_line(j, after_code=True))
    if kind == "table":
        return _run_end(lines, i, lines.table_row)
    return _run_end(lines, i, lambda j: lines.kind(j) == "text")


def _run_end(lines: _PageLines, i: int, belongs: Callable[[int], bool]) -> int:
    j = i
    while j + 1 < lines.count and belongs(j + 1):
        j += 1
    return j


def _list_end(lines: _PageLines, i: int) -> int:
    """Items, their wrapped or indented continuation lines, and blank lines between items."""
    last, j = i, i + 1
    while j < lines.count:
        kind = lines.kind(j)
        if kind == "blank":
            after = next((k for k in range(j, lines.count) if not lines.blank(k)), None)
            if after is None or not (lines.kind(after) == "list" or lines.indent(after) >= 2):
                break
            last, j = after, after + 1
        elif kind == "list" or (kind in ("text", "code") and (
                lines.indent(j) >= 2 or not lines.ends_sentence_before(j))):
            last, j = j, j + 1
        else:
            break
    return last


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The range [start, end) of `text` without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class _Headings:
    """The heading path as the document is read: numbered and Markdown headings by their
    level, title-case lines one below the last of those, a page's label at its root."""

    def __init__(self):
        self.stack: list[tuple[int, str, bool]] = []  # (level, text, level given by the text)

    def start_page(self, page: Page, use_label: bool) -> None:
        # Markdown, HTML and DOCX pages are sections labelled with their heading path.
        if use_label and _heading_like_label(page.label):
            names = [" ".join(n.split()) for n in page.label.split(HEADING_SEPARATOR)]
            self.stack = [(0, name, True) for name in names if name][:MAX_HEADING_DEPTH]

    def set_path(self, path: tuple[str, ...]) -> tuple[str, ...]:
        """A heading whose whole path is known (a PDF bookmark)."""
        self.stack = [(level, name, True) for level, name in enumerate(path[:MAX_HEADING_DEPTH], 1)]
        return self.path

    def push(self, level: int, text: str) -> tuple[str, ...]:
        explicit = level > 0
        if not explicit:
            level = max((lv for lv, _, given in self.stack if given), default=0) + 1
        if any(lv == 0 and name == text for lv, name, _ in self.stack):
            return self.path  # the label already names this heading
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack = self.stack[:MAX_HEADING_DEPTH - 1] + [(level, text, explicit)]
        return self.path

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(text for _, text, _ in self.stack)


_LOCATION_LABEL = re.compile(
    r"^\s*(?:(?:lines?|paragraphs?|sections?|blocks?|pages?|parts?|slides?|sheets?)\b"
    r"[\s\d.,:;#/–—-]*|[\divxlcdm.,:;/\s–—-]*)$", re.IGNORECASE)


def _heading_like_label(label: str) -> bool:
    """A page label that names a section ('Installation'), not a place ('lines 1-120')."""
    return bool(label.strip()) and not _LOCATION_LABEL.match(label)


def _page_blocks(page: Page, lines: list[tuple[int, int]], headings: _Headings,
                 markdown: bool, bookmarks: Sequence[tuple[str, ...]] | None = None) -> list[_Block]:
    """The page's blocks. `markdown`: '#' lines are headings. `bookmarks`: the paths of the
    outline's entries for this page, in order, when the document has an outline (None when it
    has none)."""
    text, found = page.text, []
    page_lines = _PageLines(text, lines, markdown=markdown, guess_titles=bookmarks is None)
    marks = _bookmark_lines(page_lines, bookmarks or ())
    for first, (last, _) in marks.items():
        page_lines.mark_heading(first, last)  # so that the blocks before them end there
    i = 0
    while i < page_lines.count:
        if i in marks:
            last, path = marks[i]
            start, end = trimmed(text, page_lines.spans[i][0], page_lines.spans[last][1])
            found.append(_Block(start, end, "heading", headings.set_path(path)))
            i = last + 1
            continue
        kind = page_lines.kind(i)
        if kind == "blank":
            i += 1
            continue
        last = _block_end(page_lines, i, kind)
        start, end = trimmed(text, page_lines.spans[i][0], page_lines.spans[last][1])
        if kind == "heading":
            level, title = page_lines.heading(i)
            level = 0 if bookmarks is not None else level  # below the outline's heading
            found.append(_Block(start, end, "heading", headings.push(level, title)))
        elif start < end:
            name = {"fence": "code", "text": "paragraph"}.get(kind, kind)
            found.append(_Block(start, end, name, headings.path))
        i = last + 1
    return found


def _lay_out(doc: ParsedDocument) -> list[tuple[Page, list[_Block]]]:
    pdf = doc.path.lower().endswith(".pdf")
    boilerplate = boilerplate_keys(doc.pages, paged=pdf)
    layouts = _lay_out_without(doc, boilerplate, pdf)
    if boilerplate and not any(blocks for _, blocks in layouts):
        # Every line looked like a running header ("Potato 1", "Potato 2"... one per page):
        # then the lines are the document, and are kept.
        layouts = _lay_out_without(doc, set(), pdf)
    return layouts


def _lay_out_without(doc: ParsedDocument, boilerplate: set[str],
                     pdf: bool) -> list[tuple[Page, list[_Block]]]:
    headings = _Headings()
    bookmarks = _bookmarks_by_page(doc) if pdf else None
    # Only Markdown and plain text write headings as '#' lines: in a PDF, an HTML <pre> or a
    # Word document they are a script's comments ("# Now halt or reboot.").
    markdown = doc.path.lower().endswith(_MARKDOWN_SUFFIXES)
    layouts = []
    for page in doc.pages:
        headings.start_page(page, use_label=not pdf)  # PDF labels are page numbers
        lines = _content_lines(page.text, boilerplate)
        on_page = bookmarks.get(page.number, ()) if bookmarks is not None else None
        layouts.append((page, _page_blocks(page, lines, headings, markdown, on_page)))
    return layouts


# -- headings from a PDF's outline ----------------------------------------------------------
MIN_BOOKMARKS = 3  # fewer (a title, a licence) say too little to stand for the headings
_LABEL_PART = r"(?:\d{1,3}|[a-z]|[ivxlc]{1,6})"
_SECTION_LABEL = re.compile(rf"^(?:(?:chapter|appendix|part|section|annex)\s*)?"
                            rf"(?:{_LABEL_PART}(?:\s{_LABEL_PART}){{0,5}})?$")


def _bookmarks_by_page(doc: ParsedDocument) -> dict[int, list[tuple[str, ...]]] | None:
    """The outline's paths per page, or None when the outline is too small to use."""
    if len(doc.outline) < MIN_BOOKMARKS:
        return None
    by_page: dict[int, list[tuple[str, ...]]] = {}
    for entry in doc.outline:
        if entry.path:
            by_page.setdefault(entry.page, []).append(tuple(entry.path))
    return by_page


def _words_of(text: str) -> str:
    return " ".join(re.findall(r"[^\W_]+", text.casefold()))


def _bookmark_lines(lines: _PageLines, paths: Sequence[tuple[str, ...]]) -> dict[int, tuple[int, tuple[str, ...]]]:
    """Where each bookmark's title stands on the page: {first line: (last line, path)}.
    A title matches a line (or two, when it wraps) that ends with it after at most a section
    label ("3.2", "Appendix A", "Part III"); each is looked for after the one before. A
    title not in the text marks nothing: its text stays with the heading before."""
    marks: dict[int, tuple[int, tuple[str, ...]]] = {}
    words = [_words_of(line) for line in lines.strip]
    at = 0
    for path in paths:
        title = _words_of(path[-1])
        found = _title_at(words, title, at) if title else None
        if found is not None:
            marks[found[0]] = (found[1], path)
            at = found[1] + 1
    return marks


def _title_at(words: list[str], title: str, start: int) -> tuple[int, int] | None:
    for i in range(start, len(words)):
        for last in (i, i + 1):
            if last >= len(words) or not words[i]:
                break
            line = words[i] if last == i else words[i] + " " + words[last]
            if len(line) > 2 * len(title) + 24:
                break  # a sentence that happens to end with the title
            if (line == title or line.endswith(" " + title)) and \
                    _SECTION_LABEL.match(line[:len(line) - len(title)].strip()):
                return i, last
    return None


# -- pieces: sentences of prose, lines of lists, code and tables ----------------------------------
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[A-Z0-9•-])")
_WORD = re.compile(r"\S+")

Span = tuple[int, int]
Piece = tuple[int, int, int]  # start, end, tokens


def _by_lines(text: str, start: int, end: int) -> list[Span]:
    return _cut(text, start, [m.start() for m in re.finditer("\n", text[start:end])], end)


def _by_sentences(text: str, start: int, end: int) -> list[Span]:
    return _cut(text, start, [m.end() for m in _SENTENCE_BREAK.finditer(text[start:end])], end)


def _by_words(text: str, start: int, end: int) -> list[Span]:
    return [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]


def _by_characters(size: int) -> Callable[[str, int, int], list[Span]]:
    def split(text: str, start: int, end: int) -> list[Span]:
        return [(a, min(a + size, end)) for a in range(start, end, size)]
    return split


def _cut(text: str, start: int, cuts: list[int], end: int) -> list[Span]:
    bounds = [start] + [start + c for c in cuts] + [end]
    spans = (trimmed(text, a, b) for a, b in zip(bounds, bounds[1:]))
    return [(a, b) for a, b in spans if a < b]


def _splitters(kind: str, budget: int) -> list:
    """How a block is cut, first into pieces, then further where a piece is too big."""
    # Four characters per token at most: no tokenizer needs more for one character.
    chars = _by_characters(max(1, budget // 4))
    if kind in ("list", "code", "table"):
        return [_by_lines, _by_sentences, _by_words, chars]
    return [_by_sentences, _by_lines, _by_words, chars]


def _measure(layouts: list[tuple[Page, list[_Block]]], sizes: _Sizes,
             counter: _TokenCounter) -> list[list[tuple[_Block, list[Piece]]]]:
    """Each block with its first-level pieces and their token counts, counted in one batch
    for the whole document: a block's count is the sum of its pieces' (cut at whitespace)."""
    spans = [[_splitters(b.kind, sizes.piece)[0](page.text, b.start, b.end) for b in blocks]
             for page, blocks in layouts]
    counts = iter(counter.count([page.text[a:b] for (page, _), page_spans in zip(layouts, spans)
                                 for block_spans in page_spans for a, b in block_spans]))
    return [[(block, [(a, b, next(counts)) for a, b in block_spans])
             for block, block_spans in zip(blocks, page_spans)]
            for (_, blocks), page_spans in zip(layouts, spans)]


def _fit(text: str, spans: list[Span], splitters: list, budget: int,
         counter: _TokenCounter) -> list[Piece]:
    """Pieces of at most `budget` tokens, cut with the first splitter that divides a span,
    then the next ones."""
    fitted = []
    for (start, end), tokens in zip(spans, counter.count([text[a:b] for a, b in spans])):
        if tokens <= budget or not splitters:
            fitted.append((start, end, tokens))
            continue
        parts = splitters[0](text, start, end)
        if len(parts) > 1:
            fitted += _fit(text, parts, splitters, budget, counter)
        else:
            fitted += _fit(text, [(start, end)], splitters[1:], budget, counter)
    return fitted


# -- packing ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Unit:
    """What the packer places: a whole block, or a piece of one too big for a chunk."""

    start: int
    end: int
    tokens: int
    path: tuple[str, ...]
    heading: bool
    pieces: tuple[Piece, ...]  # where an overlap taken from this unit may start


def _units(text: str, measured: list[tuple[_Block, list[Piece]]], sizes: _Sizes,
           counter: _TokenCounter) -> list[_Unit]:
    units = []
    for block, pieces in measured:
        heading = block.kind == "heading"
        tokens = sum(n for _, _, n in pieces)
        if tokens <= sizes.piece:
            units.append(_Unit(block.start, block.end, tokens, block.path, heading, tuple(pieces)))
            continue
        deeper = _splitters(block.kind, sizes.piece)[1:]
        for start, end, n in pieces:
            fitted = [(start, end, n)] if n <= sizes.piece else _fit(
                text, [(start, end)], deeper, sizes.piece, counter)
            units += [_Unit(a, b, m, block.path, heading, ((a, b, m),)) for a, b, m in fitted]
    return units


@dataclass
class _Draft:
    units: list[_Unit] = field(default_factory=list)
    start: int = -1
    overlap_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.overlap_tokens + sum(u.tokens for u in self.units)

    @property
    def body_tokens(self) -> int:
        return sum(u.tokens for u in self.units if not u.heading)

    @property
    def end(self) -> int:
        return self.units[-1].end

    @property
    def path(self) -> tuple[str, ...]:
        return self.units[0].path

    def add(self, unit: _Unit) -> None:
        if self.start < 0:
            self.start = unit.start
        self.units.append(unit)

    def take_trailing_headings(self) -> list[_Unit]:
        """Headings at the end go with what follows them (none if nothing else is here)."""
        keep = len(self.units)
        while keep and self.units[keep - 1].heading:
            keep -= 1
        if keep == 0:
            return []
        taken, self.units = self.units[keep:], self.units[:keep]
        return taken


def _overlap(text: str, draft: _Draft, want: int, counter: _TokenCounter) -> tuple[int, int]:
    """(start, tokens) of the tail of `draft` to repeat, at most `want` tokens: whole
    sentences or lines where they fit, else the last words; (-1, 0) for none."""
    if want <= 0 or draft.tokens <= want:
        return -1, 0
    pieces = [p for unit in draft.units for p in unit.pieces]
    start, tokens = -1, 0
    for a, _, n in reversed(pieces[1:]):  # never the whole draft
        if tokens + n > want:
            break
        start, tokens = a, tokens + n
    if start >= 0:
        return start, tokens
    return _last_words(text, pieces[-1], want, counter)


def _last_words(text: str, piece: Piece, want: int, counter: _TokenCounter) -> tuple[int, int]:
    first, end, tokens = piece
    per_token = (end - first) / max(1, tokens)
    start = max(first + 1, end - int(want * per_token))
    while True:
        while start < end and not (text[start - 1].isspace() and not text[start].isspace()):
            start += 1
        if start >= end:
            return -1, 0
        tokens = counter.one(text[start:end])
        if tokens <= want:
            return start, tokens
        start += 1


def _pack(text: str, units: list[_Unit], sizes: _Sizes, counter: _TokenCounter) -> list[_Draft]:
    drafts: list[_Draft] = []
    current = _Draft()
    for unit in units:
        if not current.units:
            current.add(unit)
        elif unit.heading and current.body_tokens and 2 * current.tokens >= sizes.target:
            drafts.append(current)  # a new section starts a new chunk, without overlap
            current = _Draft([unit], unit.start)
        elif current.tokens + unit.tokens <= sizes.target:
            current.add(unit)
        else:
            carried = current.take_trailing_headings()
            drafts.append(current)
            current = _next_draft(text, current, carried, unit, sizes, counter, drafts)
    if current.units:
        drafts.append(current)
    return drafts


def _next_draft(text: str, previous: _Draft, carried: list[_Unit], unit: _Unit, sizes: _Sizes,
                counter: _TokenCounter, drafts: list[_Draft]) -> _Draft:
    if carried:
        draft = _Draft(list(carried), carried[0].start)
        if draft.tokens + unit.tokens > sizes.target:
            drafts.append(draft)  # headings too long to share a chunk with what follows
            draft = _Draft()
    else:
        start, tokens = _overlap(text, previous, sizes.overlap, counter)
        draft = _Draft([], start, tokens) if start >= 0 else _Draft()
    draft.add(unit)
    return draft


def _merge_small(drafts: list[_Draft], sizes: _Sizes) -> list[_Draft]:
    """Heading-only drafts and bodies under `min_tokens` join a neighbour on the page when
    the result stays within target + min_tokens, and are a small chunk of their own
    otherwise: a short page ("Door code: 7731.") is indexed, never dropped. A chunk never
    spans pages (citations open one page), so a short page cannot join its neighbour's."""
    limit = sizes.target + sizes.minimum
    kept: list[_Draft] = []
    for index, draft in enumerate(drafts):
        if draft.body_tokens and draft.body_tokens >= sizes.minimum:
            kept.append(draft)
            continue
        following = drafts[index + 1] if index + 1 < len(drafts) else None
        if kept and kept[-1].tokens + draft.tokens - draft.overlap_tokens <= limit:
            kept[-1].units += draft.units
        elif following and following.tokens + draft.tokens <= limit:
            following.units[:0] = draft.units
            following.start = draft.start
            following.overlap_tokens += draft.overlap_tokens
        else:
            kept.append(draft)
    return kept


def _chunk_page(page: Page, measured: list[tuple[_Block, list[Piece]]], sizes: _Sizes,
                counter: _TokenCounter) -> list[Chunk]:
    text = page.text
    units = _units(text, measured, sizes, counter)
    chunks = []
    for draft in _merge_small(_pack(text, units, sizes, counter), sizes):
        piece = text[draft.start:draft.end]
        if any(c.isalnum() for c in piece):  # rules and stray symbols are not content
            chunks.append(Chunk(page.number, draft.start, draft.end, piece, draft.path))
    return chunks
