"""The lead: the manual's own words that answer the question, shown before the model writes.

    quotes = lead_quotes(query, passages, embedder)       # 1-3 Quote, best first
    quotes = lead_quotes(query, passages)                  # without an embedder: words alone
    best = best_units(query, passages)                     # {passage rank: its best Candidate}

The candidates are the passages' units (engine.answer.sentences): sentences, list items, table
rows with their header, definitions, settings, warnings. Each is shown with what it needs to be read (`Unit.show`, SHOW_CHARS at most),
and scored on that, by measuring, not by position alone:
    score = cosine * the shown text's embedding and the question's; for a short unit shown
                     alone, the higher of that and the cosine of it read after the text before
                     it ("Download the data using the USB cable instead.")
          + terms  * share of the question's topic words (IDF-weighted) the shown text contains
          + rank   * 1 / (the passage's rank)
          + heading * share of the topic words in the passage's heading path
          + code   * whether it names a command, option or function (how-to answers do)
          + named  * 1 for an entry headed by a name the question typed (Query.names: "error
                     177" -> "177 You cannot mix CONFIG and __CONFIG directives.") or for a row
                     whose first cell the question typed after that column's name ("address 1"),
                     or for one that holds what the question quotes ('"packets found but none
                     were usable"'); 1/2 for an item or a row that holds every name ("2150 and
                     2750 MHz" -> "• 2150 MHz to 2750 MHz: ...")
A short unit ("Door code: 7731.", "Torque | 35 Nm") qualifies when it carries the question's
words (half their weight, or a code the question typed) and states something: a setting, a row,
a definition, or a sentence with a number or a code in it (a list's "2." is none). Other
fragments (headings, contents lines, page headers, runs with few words) never do, nor does an
answer shown under the manual's question that is one by itself ("2. Avoid it."): its question
lends it the question's words. The best leads; the next best follow while they score within
`keep_within` of it. The same scores pick each citation's quote. Asked why or
what to do, a sentence is shown with the one after it (sentences.THEN_CHARS) and judged alone:
the manual states the symptom the question repeats, then its cause or remedy. Asked for a
default, it is shown with the sentences after it up to one that states a default.

A quote keeps where its unit sits on its page, Span(page, start, end) in the page's text, so
the source view highlights exactly that unit (the header or introduction shown with it is read,
not highlighted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import product

import numpy as np

from engine.answer.query import Query, folded
from engine.answer.sentences import (
    CODE,
    DOT_LEADERS,
    ITEM_BREAK,
    ITEM_MARKER,
    LIST_ITEM,
    THEN_CHARS,
    Unit,
    table_row,
    units,
)
from engine.answer.terms import bare_tokens, words_of
from engine.types import Passage, Quote, Span

MAX_CANDIDATES = 48  # embedded in one batch: the lead is due <= 0.5 s after Enter on 2 cores
MIN_CHARS = 25
MIN_WORDS = 4
MAX_WORD_CHARS = 45  # a longer run without spaces is a table of contents glued together
BEFORE_CHARS = 100  # of the text before a unit, read with it for its second cosine
ALONE_CHARS = 120  # a unit this long is read alone: it says what it is about itself
SHORT_UNIT_SHARE = 0.5  # of the question's topic weight, for a short unit to qualify
_JOINS = {"row": " | ", "definition": ": ", "warning": ": "}  # how a unit's cells are shown
_HEADED = ("answer", "sentence", "item")  # shown under their question or the heading that names their topic
_SPACES = re.compile(r"\s*")
_TABS = re.compile(r"\t[\t ]*")
_PARAGRAPH_BREAK = re.compile(r"[ \t]*\n[ \t]*\n\s*")


@dataclass(frozen=True)
class LeadWeights:
    cosine: float = 1.0
    terms: float = 0.5
    rank: float = 0.1
    heading: float = 0.1
    code: float = 0.2  # a unit that names a command, option or function
    named: float = 0.6  # an entry headed by a name the question typed ("error 177" -> "177 You cannot mix ...")
    keep_within: float = 0.25  # a second or third quote scores within this of the best


DEFAULT_WEIGHTS = LeadWeights()


def lead_quotes(query: Query, passages: Sequence[Passage], embedder=None, limit: int = 3,
                weights: LeadWeights = DEFAULT_WEIGHTS) -> list[Quote]:
    """The `limit` (at most) units of `passages` that best answer the query, best first.
    The query's vector is compared with the units' (embedded here, in one batch)."""
    found = scored(query, passages, embedder, weights)
    return marked(choose(found, weights, limit), query)


def marked(quotes: Sequence[Quote], query: Query) -> list[Quote]:
    """The quotes with the question's words marked, as the window draws them."""
    return [replace(q, marks=query.marks(q.text)) for q in quotes]


def scored(query: Query, passages: Sequence[Passage], embedder=None,
           weights: LeadWeights = DEFAULT_WEIGHTS) -> list[Candidate]:
    """The qualifying units of the passages, the best MAX_CANDIDATES with their cosines."""
    found = shortlist(candidates(query, passages), weights)
    if embedder is not None and weights.cosine and query.vector is not None:
        add_cosines(found, query.vector, embedder)
    return found


def best_units(query: Query, passages: Sequence[Passage], found: Sequence[Candidate] | None = None,
               weights: LeadWeights = DEFAULT_WEIGHTS) -> dict[int, Candidate]:
    """{passage rank (1-based): its best unit} by the lead's scores: a citation's quote.
    `found` are candidates scored already (the lead's); a passage without one is scored on
    its words here."""
    best: dict[int, Candidate] = {}
    for c in ranked(found or (), weights):
        best.setdefault(c.number, c)
    missing = [n for n in range(1, len(passages) + 1) if n not in best]
    if missing:
        for c in ranked(candidates(query, passages, only=set(missing)), weights):
            best.setdefault(c.number, c)
    return best


# -- candidates ---------------------------------------------------------------------------------
def candidates(query: Query, passages: Sequence[Passage], only: set[int] | None = None) -> list[Candidate]:
    """Every unit of the passages that qualifies, with its word measures."""
    found = []
    for n, passage in enumerate(passages, 1):
        if only is not None and n not in only:
            continue
        heading = query.share(words_of(" ".join(passage.heading_path)))
        for c in _candidates(n, passage, query.asks_cause_or_remedy, query.asks_default):
            _an_introduction_names_the_topic(c, query)
            c.terms, c.heading, c.rank = query.share(c.words), heading, 1.0 / n
            c.named = max(_named(c, query.names), _keyed_row(c, query), _quotes_the_question(c, query))
            c.short = is_fragment(_own(c) if c.kind == "answer" else c.scored or c.text)
            if qualifies(c, query):
                found.append(c)
    return found


def _own(c: "Candidate") -> str:
    """The unit itself, without what is shown with it (an answer's question, an item's block)."""
    return c.text[c.focus[0]:c.focus[1]]


def _an_introduction_names_the_topic(c: "Candidate", query: Query) -> None:
    """A sentence shown with more than itself (the list it introduces: "To turn the laser off:
    1. Press ...", or the term it describes) is judged with it only when it names some of the
    question's topic itself; else it is judged alone, and the item that holds the question's
    words leads ("What happens then:" over "2. The UPS reaches low battery")."""
    own = _own(c)
    if c.kind != "sentence" or own == c.text:
        return
    words = words_of(own)
    if not query.matched(words):
        c.scored, c.words = own, words


def qualifies(c: "Candidate", query: Query) -> bool:
    """A unit long enough to read as a fact, or a short fact (a setting, a row, a definition, or
    a sentence with a number or a code in it) that carries the question's words; never a
    question the manual answers after it (its answer is shown with it)."""
    if c.kind == "question":
        return False
    if not c.short:
        return True
    if DOT_LEADERS.search(c.text) or not any(ch.isalnum() for ch in c.text):
        return False
    own = ITEM_MARKER.sub("", _own(c), count=1)  # "2. Avoid it.": its number is no value
    if c.kind in ("sentence", "item", "answer") and (len(own.split()) < 3 or not (
            any(ch.isdigit() for ch in own) or CODE.search(own))):
        return False  # "Prime pump.", "Pump P-200.": a heading's words, not a fact
    folded = c.text.casefold()
    return c.terms >= SHORT_UNIT_SHARE or any(token.casefold() in folded for token in query.code)


def shortlist(found: list[Candidate], weights: LeadWeights) -> list[Candidate]:
    """The MAX_CANDIDATES best by the measures that need no embedding."""
    return sorted(found, key=lambda c: (-score(c, weights, with_cosine=False), c.short))[:MAX_CANDIDATES]


def ranked(found: Sequence[Candidate], weights: LeadWeights) -> list[Candidate]:
    """Best first; on a tie, a unit that reads on its own before a short fact."""
    return sorted(found, key=lambda c: (-score(c, weights), c.short))


def add_cosines(found: list[Candidate], query_vector, embedder) -> None:
    """Each candidate's cosine with the question: the higher of its own text's and, where
    something comes before it, of that read with it ("Download the data using the USB cable
    instead." says what to do only after "... over Bluetooth does not work."). All texts are
    embedded in one call."""
    if not found:
        return
    read = [c.scored or c.text for c in found]
    after = [(c, f"{c.before} {text}") for c, text in zip(found, read) if c.before]
    vectors = embedder.encode_documents(read + [text for _, text in after])
    cosines = vectors @ np.asarray(query_vector, dtype=np.float32)
    for c, cosine in zip(found, cosines):
        c.cosine = float(cosine)
    for (c, _), cosine in zip(after, cosines[len(found):]):
        c.cosine = max(c.cosine, float(cosine))


def score(c: Candidate, w: LeadWeights, with_cosine: bool = True) -> float:
    cosine = w.cosine * c.cosine if with_cosine else 0.0
    return (cosine + w.terms * c.terms + w.rank * c.rank + w.heading * c.heading + w.code * c.code
            + w.named * c.named)


def choose(found: list[Candidate], weights: LeadWeights, limit: int) -> list[Quote]:
    """The best, and up to limit - 1 more that score nearly as well; never a unit shown already
    in a chosen quote (a term's description under its term, an item under its list's
    introduction), nor two that overlap on the page."""
    order = ranked(found, weights)
    chosen: list[Candidate] = []
    for c in order:
        if len(chosen) >= limit or score(c, weights) < score(order[0], weights) - weights.keep_within:
            break
        own = c.text[c.focus[0]:c.focus[1]]
        if all(own not in _body(o) and _body(o) not in c.text and not _overlap(c, o) for o in chosen):
            chosen.append(c)
    return [_headed_once(c, chosen[:i]) for i, c in enumerate(chosen)]


def _body(c: "Candidate") -> str:
    """What a quote shows below its header (an answer's question, the heading that names its topic)."""
    return c.text[len(c.header) + 1:] if c.header else c.text


def _headed_once(c: "Candidate", before: Sequence["Candidate"]) -> Quote:
    """The candidate's quote; a second answer to a question the manual asks, or a second unit
    under the same named heading, is shown without what the first one showed above it."""
    quote = c.quote()
    if not c.header or not any(o.header == c.header and o.passage.path == c.passage.path for o in before):
        return quote
    cut = len(c.header) + 1
    return replace(quote, text=c.text[cut:], focus=(c.focus[0] - cut, c.focus[1] - cut))


def _overlap(a: "Candidate", b: "Candidate") -> bool:
    return (a.passage.path == b.passage.path and a.span.page == b.span.page
            and a.span.start < b.span.end and b.span.start < a.span.end)


@dataclass
class Candidate:
    """A unit that may lead, as shown, with its measures (cosine filled in for the shortlist)."""

    number: int
    passage: Passage
    span: Span  # the unit itself, on its page (the source view highlights it)
    text: str  # what is shown: the unit with its header or introduction
    focus: tuple[int, int]  # the unit itself within `text`
    kind: str
    words: set[str]
    terms: float = 0.0
    heading: float = 0.0
    rank: float = 0.0
    cosine: float = 0.0
    code: float = 0.0
    named: float = 0.0  # an entry headed by a name the question typed
    short: bool = False  # a short fact, let in for the question's words
    scored: str = ""  # what it is judged on (words, embedding): `text`, or a row with its header
    header: str = ""  # the first line of `text`: an answer's question, the heading that names a unit's topic
    before: str = ""  # the text before the unit, when nothing of it is shown (read with it for a cosine)

    def quote(self) -> Quote:
        return Quote(self.number, self.text, self.passage, self.span, self.focus, self.kind)


def _candidates(number: int, passage: Passage, asked_why: bool = False,
                asked_default: bool = False) -> list[Candidate]:
    """The passage's units as candidates; `asked_why`: a sentence is shown with the one after it
    (what the manual says next: the cause or the remedy of what it states), and judged alone;
    `asked_default`: with the sentences after it up to one that states a default."""
    found = []
    for run in page_runs(passage):
        read = units(passage.text, run.start, run.end, passage.heading_path)
        for i, unit in enumerate(read):
            end = unit.then if asked_why else None
            if asked_default and end is None:
                end = _default_after(passage.text, read, i)
            followed = end is not None
            text, focus = shown(passage.text, replace(unit, show=(unit.start, end)) if followed else unit)
            if not text:
                continue
            span = Span(run.page, run.page_offset(unit.start), run.page_offset(unit.end))
            alone = followed or _over_a_table(read, i)
            scored = text[focus[0]:focus[1]] if alone else _scored_text(text, focus, unit)
            header = text.split("\n", 1)[0] if unit.header and unit.kind in _HEADED else ""
            before = "" if focus[0] or len(scored) > ALONE_CHARS else _before(
                passage.text, read[i - 1].start if i else run.start, unit.start)
            found.append(Candidate(number, passage, span, text, focus, unit.kind, words_of(scored),
                                   code=float(bool(CODE.search(scored))), scored=scored, header=header,
                                   before=before))
    return found


def _over_a_table(read: Sequence[Unit], i: int) -> bool:
    """Whether read[i] is shown over the table after it: it is judged alone, and each row on
    itself under its header (a question that names a row finds the row, not the whole table).
    The row must lie in the lines shown with it: an entry's sentence carries its entry's header
    lines, and a table after the entry is not the sentence's."""
    lines = read[i].lines
    return (lines is not None and i + 1 < len(read) and read[i + 1].kind == "row"
            and lines[0] <= read[i + 1].start < lines[1])


def _before(text: str, start: int, end: int) -> str:
    """The text between the unit before and this one's start, its last BEFORE_CHARS at most
    (from a word), on one line."""
    words = text[max(start, end - BEFORE_CHARS):end].split()
    if words and end - start > BEFORE_CHARS:
        words = words[1:]  # a cut word
    return " ".join(words)


# What a manual writes where it states a default.
_STATES_DEFAULT = re.compile(r"\bdefaults?\b|\binitial (?:setting|value)\b|\bif not (?:specified|set|given)\b"
                             r"|\bis assumed\b|\bfactory setting", re.IGNORECASE)


def _default_after(text: str, read: Sequence[Unit], i: int) -> int | None:
    """Where the first sentence after the sentence read[i] that states a default ends, when only
    sentences and list items (the choices) come between, in THEN_CHARS ("Adjust the firmness of
    the braille dots. It can be set to: • Maximum ... • Minimum ... The initial setting is
    Medium."); None when the sentence states one itself, or none follows."""
    unit = read[i]
    alone = unit.kind == "sentence" and unit.show == (unit.start, unit.end)
    if not alone or _STATES_DEFAULT.search(text, unit.start, unit.end):
        return None
    before = unit
    for after in read[i + 1:]:
        if (after.kind not in ("sentence", "item") or text[before.end:after.start].strip()
                or after.end - unit.start > THEN_CHARS):
            return None
        if after.kind == "sentence" and _STATES_DEFAULT.search(text, after.start, after.end):
            return after.end
        before = after
    return None


def _named(c: "Candidate", names: frozenset[str]) -> float:
    """1 for an entry headed by a name the question typed; 1/2 for a list item or a table row
    that holds every name it typed. Prose that mentions them may be about what not to do
    ("do not call as.numeric()")."""
    if not names:
        return 0.0
    if c.kind == "definition" and _heading_name(c.text) in names:
        return 1.0
    if c.kind not in ("item", "row"):
        return 0.0  # every candidate is scored: prose is not tokenised for nothing
    return 0.5 if names <= {t.casefold() for t in bare_tokens(c.scored or c.text)} else 0.0


def _quotes_the_question(c: "Candidate", query: Query) -> float:
    """1 for a unit that shows what the question quotes: a message a screen or a log showed
    ('"packets found but none were usable"' -> "... prints packets found but none were usable if
    flag3 is incorrect")."""
    if not query.quoted:
        return 0.0
    read = folded(c.scored or c.text)  # not the sentence shown after it ("why?"): that one is scored itself
    return 1.0 if any(q in read for q in query.quoted) else 0.0


def _keyed_row(c: "Candidate", query: Query) -> float:
    """1 for a table row whose first cell is a value the question typed after its column's name
    ("the address 1" -> "Address | A2 Jumper | ..." over "1 | No | No | Yes"; "error 12" ->
    "Error | Meaning" over "12 | Overcurrent")."""
    if c.kind != "row" or "\n" not in c.scored:
        return 0.0  # no header: a row is judged on itself alone (_scored_text)
    header, own = c.scored.split("\n", 1)
    column = header.split(_JOINS["row"])[0]
    key = own.split(_JOINS["row"])[0].strip().casefold()
    if not key:
        return 0.0  # a row whose first cell is empty is keyed by nothing
    words = [w.casefold() for w in bare_tokens(query.text)]
    named = words_of(column)
    return 1.0 if any(a in named and b == key for a, b in zip(words, words[1:])) else 0.0


def _heading_name(text: str) -> str:
    """The name an entry starts with ("177", "--acall-ajmp", "e-07"), case-folded."""
    first = text.split(None, 1)[:1]
    return bare_tokens(first[0])[0].casefold() if first else ""


def _scored_text(text: str, focus: tuple[int, int], unit: Unit) -> str:
    """What a unit is judged on: what is shown, but a row with its header alone (the rows
    shown beside it would score as much as it does), and a unit without the heading that names
    its topic (every unit under it would score as much)."""
    if unit.kind in ("sentence", "item") and unit.header:
        return text.split("\n", 1)[1]
    if unit.kind != "row":
        return text
    own = text[focus[0]:focus[1]]
    return text.split("\n", 1)[0] + "\n" + own if unit.header else own


def shown(text: str, unit: Unit) -> tuple[str, tuple[int, int]]:
    """The unit's text as a quote shows it, with what it needs (a row its header, an item its
    block), and where the unit itself sits in it. Prose is reflowed, but each list item starts a
    line; a row keeps its line under its header's, its cells set apart by " | "."""
    if unit.kind == "row":
        header = _one_line(text[unit.header[0]:unit.header[1]], "row") + "\n" if unit.header else ""
        before = _one_line(text[unit.show[0]:unit.start], "row")
        own = _one_line(text[unit.start:unit.end], "row")
        after = _one_line(text[unit.end:unit.show[1]], "row")
        start = len(header) + (len(before) + 1 if before else 0)
        joined = header + "\n".join(part for part in (before, own, after) if part)
        return joined, (start, start + len(own))
    asked = _reflowed(text[unit.header[0]:unit.header[1]], unit.kind) + "\n" if unit.header else ""
    before = _flowed(text, unit.show[0], unit.start, unit)
    own = _flowed(text, unit.start, unit.end, unit)
    after = _flowed(text, unit.end, unit.show[1], unit)
    joined = asked + (before + _gap(text, unit.start, unit) if before else "")
    joined += own + (_gap(text, unit.end, unit) + after if after else "")
    start = len(asked) + len(before) + (1 if before else 0)
    return joined, (start, start + len(own))


def _flowed(text: str, start: int, end: int, unit: Unit) -> str:
    """text[start:end] reflowed, but the code lines under an introduction and the forms over a
    function's description kept one to a line (a configuration file's lines read as typed)."""
    if unit.lines is None or end <= unit.lines[0] or start >= unit.lines[1]:
        return _reflowed(text[start:end], unit.kind)
    first, last = max(start, unit.lines[0]), min(end, unit.lines[1])
    parts = (_reflowed(text[start:first], unit.kind), _one_line(text[first:last]),
             _reflowed(text[last:end], unit.kind))
    return "\n".join(part for part in parts if part)


def _reflowed(text: str, kind: str) -> str:
    """Runs of whitespace as one space, but a list item still starts a line of its own, and so
    does a paragraph after an item (the sentence after a list); the pilcrows of HTML's heading
    anchors (texinfo's, Sphinx's) left out."""
    pieces = (part for line in ITEM_BREAK.split(text)
              for part in (_PARAGRAPH_BREAK.split(line) if LIST_ITEM.match(line) else (line,)))
    if kind in ("definition", "warning"):  # a label and its text: a cell left empty between them is no cell
        pieces = (_TABS.sub("\t", piece) for piece in pieces)
    lines = (" ".join(w for w in piece.replace("\t", _JOINS.get(kind, " ")).split() if w != "¶")
             for piece in pieces)
    return "\n".join(line for line in lines if line)


def _gap(text: str, at: int, unit: Unit) -> str:
    """What sets a quote's part apart from the part that starts at `at`: a new line when that
    part starts a list item's line or a code line, else a space."""
    at = _SPACES.match(text, at).end()
    if unit.lines is not None and unit.lines[0] <= at <= _SPACES.match(text, unit.lines[1]).end():
        return "\n"  # a code line starts, or what follows the code lines
    newline = text.rfind("\n", 0, at)
    starts_line = newline >= 0 and not text[newline + 1:at].strip()
    return "\n" if starts_line and ITEM_BREAK.match(text, newline) else " "


def _one_line(text: str, kind: str | None = None) -> str:
    """Each line reflowed alone, the lines kept; with no kind, each line as what it is (code
    lines as typed, a table row's cells set apart)."""
    lines = (_reflowed(line, kind or ("row" if table_row(line) else "sentence")) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def is_fragment(text: str) -> bool:
    """Too short, too few words, a table of contents or a run of glued-together names."""
    words = [w for w in text.split() if sum(ch.isalpha() for ch in w) >= 2]
    letters = sum(ch.isalpha() for ch in text)
    return (len(text) < MIN_CHARS or len(words) < MIN_WORDS or letters < 0.5 * len(text)
            or bool(DOT_LEADERS.search(text))
            or any(len(w) > MAX_WORD_CHARS for w in text.split()))


# -- where a passage's characters sit on its pages -----------------------------------------------
@dataclass(frozen=True)
class PageRun:
    """Characters [start, end) of a passage's text that come from one page, and where each
    of its pieces starts on that page: (text offset, page offset) pairs, in order."""

    page: int
    start: int
    end: int
    pieces: tuple[tuple[int, int], ...]

    def page_offset(self, at: int) -> int:
        """The page offset of text offset `at` (start..end). Between two pieces the passage
        has one separator where the page may have more whitespace; no sentence starts there."""
        text_start, page_start = next(p for p in reversed(self.pieces) if p[0] <= at)
        return page_start + at - text_start


def page_runs(passage: Passage) -> list[PageRun]:
    """The passage's text cut at page changes, each piece mapped to its page's offsets.

    A merged passage's text is its chunks' texts joined as retrieval joins them: a chunk that
    overlaps the one before on its page starts after that one's end and its leading whitespace
    (one " " stands for it), a chunk on a new page after a "\\n". The whitespace a chunk's
    overlap skipped is not in the spans; it is found as the counts that make the pieces add
    up to the text, with the separators and the text's characters where they must be."""
    pieces = _pieces(passage)
    if pieces is None:
        return []
    runs: list[PageRun] = []
    for (text_start, text_end), span in pieces:
        page_start = span.end - (text_end - text_start)
        if runs and runs[-1].page == span.page:
            last = runs[-1]
            runs[-1] = PageRun(last.page, last.start, text_end, last.pieces + ((text_start, page_start),))
        else:
            runs.append(PageRun(span.page, text_start, text_end, ((text_start, page_start),)))
    return runs


MAX_SKIPPED_SPACE = 8
MAX_OVERLAPS = 4  # retrieval merges 3 chunks at most; more would make the search slow


def _pieces(passage: Passage) -> list[tuple[tuple[int, int], Span]] | None:
    """((text start, text end), span) for each chunk whose text shows; None when the text does
    not fit the spans (a passage restored from an old conversation)."""
    spans, text = passage.spans, passage.text
    if not spans:
        return None
    kept, overlapped = [spans[0]], []  # overlapped: (index in kept, end of the chunk before)
    starts = [spans[0].start]
    for before, span in zip(spans, spans[1:]):
        overlaps = span.page == before.page and span.start < before.end
        if overlaps and span.end <= before.end:
            continue  # wholly inside the one before: nothing of it shows
        if overlaps:
            overlapped.append((len(kept), before.end))
        kept.append(span)
        starts.append(span.start)
    if len(overlapped) > MAX_OVERLAPS:
        return None
    for skipped in product(range(MAX_SKIPPED_SPACE + 1), repeat=len(overlapped)):
        for (i, before_end), w in zip(overlapped, skipped):
            starts[i] = before_end + w
        laid = _laid_out(kept, starts, text)
        if laid is not None:
            return laid
    return None


def _laid_out(kept: Sequence[Span], page_starts: Sequence[int], text: str):
    laid, at = [], 0
    for i, (span, page_start) in enumerate(zip(kept, page_starts)):
        if i:
            separator = "\n" if span.page != kept[i - 1].page else " "
            if text[at:at + 1] != separator:
                return None
            at += 1
        length = span.end - page_start
        if length <= 0 or at + length > len(text) or text[at].isspace():
            return None
        laid.append(((at, at + length), span))
        at += length
    return laid if at == len(text) else None


