"""One reading of sentences: where a manual's text and the model's text break into pieces.

    units(text, start, end, heading_path)   # a passage: the units a reader sees, each with its kind
    text_sentences(text, heading_path)     # a passage's sentences and units, as (start, end)
    answer_sentences(text)                 # the model's answer (Markdown, citations "[1]")
    ends_sentence(text)                    # whether text ends a sentence (a chunk that runs on)
    STREAM_END, REPEAT_END                 # the answer as it streams (answer_guard): where a loop
                                           # may be cut, and where sentences end to compare them

A manual's text is read by its lines (PDFium keeps them; a wide gap on a line, a table's cells,
is a tab: engine.ingest.pdfium_reader). Lines gather into blocks; headings, page numbers and
blank lines end a block; a list item starts one, and a capitalised sentence after an item's
short last line (a wrapped line runs to the text's width) ends it. A unit is what a technician
reads as one fact:
    sentence    prose, split after a full stop that ends a sentence (before a capital, a digit or
                a program's name: "... (5 minutes). apcupsd sends ..."); one ending in ":" is shown
                with the list it introduces (a procedure: "To turn the laser off: 1. Press ...")
                or the code lines under it, one to a line ("To set the JTAG frequency use the
                command:" over "adapter speed 1234"; "Put this in upsmon.conf:" over its lines);
                any sentence over the table right after it, when the whole table fits
    item        a list item
    row         a table row (cells apart), shown under its table's first row, the header
    definition  a term and its description ("-t, --timeout=SEC <tab> Stop after SEC seconds",
                a name alone on its line over its description ("LOTRANS", "MINUTES battery
                runtime in minutes"), an option's entry ("ABSTOL=x resets the ... tolerance.
                The default value is 1" over "pA."), or texinfo's entry of a command, function
                or variable ("Config Command: telnet_port [number] ¶", "double lbeta (double a,
                double b) <tab> [Function]", or a function's forms with no category: "x = csvread
                (filename)"), its description's sentences shown under it, as many as fit: each
                of them is shown as that whole entry, its headers one to a line
    setting     NAME = value, a short "Key: value" line ("Door code: 7731."; any one among
                others like it: a synopsis' "Features: tty_clk" over "Requires: a dial-out
                device."), or a configuration file's line, a keyword in capitals and its values
                ("MINSUPPLIES 2")
    warning     a WARNING / CAUTION / NOTE: block, or a "Note" cell beside its text
    answer      what follows a question or a problem the manual states ("Problem: ... is really
                slow." over "Solution: setserial port low_latency"; a FAQ's heading "5.2 How
                should I set the gain controls for RX?" over its text), shown under it (the two
                in THEN_CHARS); the question itself is a "question", which answers nothing
A command or code line stays in the sentence it is part of ("The command > sink("record.lis")
will divert ..."). Under a heading that names a thing (an option, a command, a parameter: "gpxver
option", "P0.01 Frequency source"), a sentence or an item is shown under that heading: "The default
version is 1.0" says nothing without the name it is about.
Each unit has what to show with it (`show`): the unit itself, or with what it needs to be read
(a row its header, a list item or a warning its block). A sentence shown alone also says where
the sentence after it ends (`then`): the lead shows the two when a question asks why or what to do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.ingest.chunking import trimmed

MAX_CHARS = 400  # a longer "sentence" is a code block or a table: taken apart at its lines
SHOW_CHARS = 320  # what is shown with a unit at most (measured: docs/benchmarks.md, issue 27)
THEN_CHARS = 480  # a unit with what it needs beside it: the next sentence (asked why), its question above it
HEADING_WORDS, HEADING_CHARS = 6, 60  # at most, for a line to be taken for a heading
NAME_SCOPE_CHARS = 600  # a heading that names a thing is shown above the units that start this close under it
WRAPPED_WIDTH, ITEM_END_SHARE = 60, 0.75  # a text wrapped this wide; a line under this share of it ended
_NUMBER = re.compile(r"[-+±]?[\d.,]*\d[\d.,]*%?")  # "9", "1.0", "-5", "10,000", "50%"
_CAPITALISED = re.compile(r"[A-Z][a-z]+\b")
ASKS_WORDS = 4  # at least, for a line ending in "?" to be a question the manual asks

# A full stop, its closing quotes or brackets, then space and what starts a sentence.
SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[>$]?[A-Z0-9])")
_LOWER_START = re.compile(r"(?<![.\w/-])([A-Za-z]{2,})[)\"'”’\]]*([.!?][\"'”’)\]]*)\s+(?=[a-z])")
_NUMBERED_HEADING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d+(?:\.\d+)*|Chapter \d+:?|Appendix [A-Z]:?)"
                               r"\s+\S.{0,80}$")
_STEP_NUMBER = re.compile(r"^\s*\(?(\d{1,2})[.)]\s+\S")  # "2. The UPS reaches low battery"
_LOWER_STEP = re.compile(r"^\s*\d{1,2}[.)]\s+[a-z]")  # "2. source stepping (srcsteps option)": a step, no heading
_PAGE_NUMBER = re.compile(r"^\s*\d{1,4}\s*$")  # running headers and footers are cut at ingest (chunking)
_LIST_MARKER = re.compile(r"\(?(?:\d{1,2}|[a-zA-Z])[.)]")
_FIRST_ITEM_INLINE = re.compile(r":\s+" + _LIST_MARKER.pattern + "$")  # "To set the origin with rotation: 1."
ITEM_MARKER = re.compile(r"^\s*(?:[-*+•◦▪‣–·]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")  # "• ", Markdown's "+ ", "2. ", "(a) "
LIST_ITEM = re.compile(ITEM_MARKER.pattern + r"\S")
# The break before a line that starts a list item: quotes keep it, so steps read one under another.
ITEM_BREAK = re.compile(r"\n(?=" + LIST_ITEM.pattern[1:] + ")")
DOT_LEADERS = re.compile(r"(?:\.\s?){4,}")
CODE = re.compile(r"\w\(|(?:^|\s)--?\w|\w=|\\\w|<\w|\w\.\w|\w_\w")
# "MAX_FEED_OVERRIDE = 1.2", "MODE=netserver"; "Door code: 7731." (a short key, a value with a number)
_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.\-\[\]]*\s*=\s*\S.{0,60}$")
_KEY_VALUE = re.compile(r"^\s*[A-Z][\w\-]*(?: [\w\-]+){0,2}:\s+\S.{0,40}$")
_TERM = re.compile(r"^-{0,2}[A-Za-z_][\w.\-\[\]]{0,40}$")  # "ferror_current", "--verbose", "max_velocity"
# A program's option in its short and long forms, alone on its line: "-Mcsecs --message-timeout=csecs",
# "-o, --output=FILE"
_OPTION_FORMS = re.compile(r"^-{1,2}[A-Za-z0-9][\w-]*(?:=\S+)?(?:,?\s+-{1,2}[A-Za-z0-9][\w-]*(?:=\S+)?){1,2}$")
# A name in capitals, then what it takes in lower case: "LOTRANS", "MINUTES battery runtime in minutes",
# "LOTRANSFER <voltage>", "NOLOGON disable | timeout | always" (a directive or a status field)
_CAPS_TERM = re.compile(r"^[A-Z][A-Z0-9_]{2,30}(?:\s+[a-z<\[(|0-9]\S*){0,10}$")
# A configuration file's line: a keyword in capitals, then what it takes, a value among it ("MINSUPPLIES 2",
# "LISTEN 0.0.0.0 3493", "AT ONBATT * START-TIMER onbattwarn 30", "MONITOR ups@host 1 monuser pass primary")
_DIRECTIVE = re.compile(r"^[A-Z][A-Z0-9_]{1,30}(?=(?:[ \t]+\S+)*?[ \t]+(?:\S*[\d/@=<>\"'_]|\*(?:\s|$)))"
                        r"(?:[ \t]+\S+){1,8}(?<![.,;:!?])$")
# What no heading holds: a path, an address, a lone "*", two numbers ("RLOAD 2 10 10 K")
_NO_HEADING = re.compile(r"(?:^|\s)/\w|\w@\w|\s\*(?:\s|$)|(?:\s[-+]?\d[\d.]*(?=\s|$)){2}")
# An option or an error code named on its line's start, its description after it: "ABSTOL=x resets ...",
# "GMINSTEPS=x [*] sets ...", "KEEPOPINFO Retain ...", "-b --batch Run ...", "-o, --output=FILE Write ...",
# "-o <path/file> The output path ...", "302 Register in operand not in bank 0.", "E-07 Overcurrent"
_ENTRY = re.compile(r"^(?:[A-Z][A-Z0-9_]{1,30}=\S{0,20}\s+(?:\[\*\]\s+)?[A-Za-z]|[A-Z][A-Z0-9_]{3,30}\s+[A-Z][a-z]"
                    r"|-{1,2}[A-Za-z][\w-]*(?:=\S+|\s+<[^>\s]{1,30}>)?(?:,?\s+-{1,2}[A-Za-z][\w-]*(?:=\S+)?)?\s+[A-Z][a-z]"
                    r"|(?:\d{3,5}|[A-Z]{1,3}-?\d{2,5})\s+[A-Z])")
# What comes before a heading's words: Markdown's "## ", a section number "5.2 " (either may be absent)
_SECTION_LABEL = re.compile(r"^(?:#{1,6}\s+)?(?:(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d+(?:\.\d+)*)\s+)?")
# A heading that names a thing: a code-like word ("P0.01", "max_velocity", "--verbose"), or a word
# then what it is ("gpxver option", "telnet_port command")
_NAME_WORDS = r"(?:option|command|parameter|directive|variable|setting|register|function|key|keyword|field|flag)"
# "gpxver", "telnet_port", "LOTRANS"; not "Advanced", nor "the" ("the option" ends a wrapped sentence)
_NAME = r"(?!(?:the|this|that|each|every|any|which|one|an?)\s)(?:[a-z_\-][\w.\-]*|[A-Z][A-Z0-9_]+)"
_NAMING_HEADING = re.compile(rf"^(?:{_NAME}\s+{_NAME_WORDS}|(?i:{_NAME_WORDS}):?\s+{_NAME})$")
# A parameter's or an error's code: "P0.01", "F1-02", "E-07", "H05"
_PARAMETER_CODE = re.compile(r"^[A-Z]{1,3}(?:\d{2,4}|-?\d{1,3}[.-]\d{1,3}|[-.]\d{1,4})\b")
_MARKDOWN_HEADING = re.compile(r"^#{1,6}\s+")
_SECTION_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d+(?:\.\d+)*|Chapter \d+:?)\s*$")  # "5.14"
_WARNING = re.compile(r"^\s*(?:(?:WARNING|CAUTION|DANGER|NOTE|IMPORTANT)\b|(?:Warning|Caution|Danger|Note|Important)\s*[:!]"
                      r"|(?:Warning|Caution|Danger|Note|Important|Tip)\t)")


@dataclass(frozen=True)
class Unit:
    start: int  # the unit's characters in the text
    end: int
    kind: str  # sentence, item, row, definition, setting, warning, answer, question
    show: tuple[int, int]  # what to show with it: the unit, or its block, or its rows beside it
    header: tuple[int, int] | None = None  # shown above it: a row's table header, an answer's question
    then: int | None = None  # a sentence: the end of the sentence after it, when the two fit in THEN_CHARS
    lines: tuple[int, int] | None = None  # code or header lines shown with it, each on its own line


def units(text: str, start: int = 0, end: int | None = None,
          heading_path: Sequence[str] = ()) -> list[Unit]:
    """The units of text[start:end], in order (see the module's docstring)."""
    end = len(text) if end is None else end
    lines = line_spans(text, start, end)
    reader = _Reader(text, heading_path, max((b - a for a, b in lines), default=0))
    for i, (a, b) in enumerate(lines):
        following = text[lines[i + 1][0]:lines[i + 1][1]].strip() if i + 1 < len(lines) else ""
        reader.line(a, b, following)
    reader.flush()
    return _answered(text, _followed(text, _introduced_code(text, reader.found)))


def text_sentences(text: str, heading_path: Sequence[str] = ()) -> list[tuple[int, int]]:
    """(start, end) of the units of a whole text: the sentence checks read passages so."""
    return [(u.start, u.end) for u in units(text, 0, len(text), heading_path)]


class _Reader:
    """Gathers a text's lines into blocks and units, line by line."""

    def __init__(self, text: str, heading_path: Sequence[str], measure: int = 0):
        self.text = text
        self.measure = measure  # the longest line: a wrapped text's width
        self.headings = {" ".join(h.split()).casefold() for h in heading_path}
        self.found: list[Unit] = []
        self.block: list[tuple[int, int]] = []  # the prose lines gathered
        self.block_kind = "sentence"
        self.rows: list[tuple[int, int]] = []  # the table being read, its header first
        self.term: int | None = None  # the definition just read: its description may run on
        self.intro: int | None = None  # the sentence ending in ":" that the list items read follow
        self.name: tuple[int, int] | None = None  # the heading above, when it names a thing
        self.last = ""  # the line before, "" after a break

    def line(self, start: int, end: int, following: str) -> None:
        line = self.text[start:end].strip()
        shaped = bool(line) and _untitled_heading(line, following) and not _term_line(line, self.last, following)
        own_line = shaped and _own_line(line)
        untitled = shaped and not own_line
        if (not line or _breaks(line, self.headings, following, self.last) or (untitled and not _runs_on(self.last))
                or _naming_line(line, following)):
            self.flush()
            self.last = ""
            self.term = self.intro = None
            heading = _unnumbered(self.text, start, end)
            if line and not _PAGE_NUMBER.match(line):
                self.name = heading if _names_a_thing(self.text[heading[0]:heading[1]]) else None
            self._asking_heading(*heading)
            return
        if self.name and _ends_section(line, self.last, following):
            self._flush_block()  # a heading ingest did not mark: what follows is no longer about the name
            self.name = None
        kind = _line_kind(line, self.last)
        if kind == "text" and (_term_line(line, self.last, following) or _entry_line(line, self.last)):
            kind = "definition"
        elif kind == "setting" and _signature(line, following) and _term_line(line, self.last, following):
            kind = "definition"  # "x = csvread (filename)" over its description: a function's form
        elif kind == "text" and not _runs_on(self.last) and (
                _DIRECTIVE.match(line) or shaped and _KEY_VALUE.match(line)
                or _keyed_block(line, self.last, following)):
            kind = "setting"  # a configuration file's or a status report's line, a synopsis' or a data sheet's
        # a sentence that runs on to a short line ends there ("Change the following line from:
        # LogLevel Info to" over "LogLevel Debug" over "This will allow ...")
        named = kind == "text" and (untitled or own_line or _named_after_colon(line, self.last))
        if kind == "text" and self.block_kind == "item" and self._item_ended(line):
            self._flush_block()  # the paragraph after a list, not its last item's next line
        self.last = line
        if kind != "row":
            self._table()
        if kind in ("row", "definition", "setting"):
            self._flush_block()  # the item before may still join its introduction; the list ends
            self.intro = None
        if kind == "row":
            self.rows.append(trimmed(self.text, start, end))
        elif kind in ("definition", "setting"):
            s, e = trimmed(self.text, start, end)
            self.found.append(Unit(s, e, kind, (s, e)))
            self.term = len(self.found) - 1 if kind == "definition" else None
        else:
            if kind in ("item", "warning"):
                self._flush_block()
                self._introduced_by(kind)
                self.block_kind = kind
            self.block.append((start, end))
            if named:
                self._flush_block()

    def _name_over(self, kind: str, start: int, in_entry: bool) -> tuple[int, int] | None:
        """The heading that names what a sentence or an item starting at `start` is about."""
        if kind in ("sentence", "item") and not in_entry and self.name and start - self.name[1] <= NAME_SCOPE_CHARS:
            return self.name
        return None

    def flush(self) -> None:
        self._table()
        self._flush_block()

    def _item_ended(self, line: str) -> bool:
        """Whether a list item ended on the line before this one: that line stopped well short
        of the text's width (a wrapped line runs to it) and this one starts a sentence with a
        capitalised word ("Through most of ..."; not "EEPROM cells ...", which an indented
        item's narrower lines wrap onto)."""
        return (self.measure >= WRAPPED_WIDTH and len(self.last) < ITEM_END_SHARE * self.measure
                and bool(_CAPITALISED.match(line)))

    def _asking_heading(self, s: int, e: int) -> None:
        """A heading that asks ("5.2 How should I set the gain controls for RX?"), given without its
        section number or Markdown's marks: the units under it answer it (_answered), as under a
        question in the text."""
        own = self.text[s:e]
        if _asks_itself(own) and len(own.split()) >= ASKS_WORDS:
            self.found.append(Unit(s, e, "asked", (s, e)))

    def _table(self) -> None:
        """The rows read, each shown under the table's header with the rows beside it that fit
        in SHOW_CHARS (an answer may take two rows: old and new command)."""
        rows, self.rows = self.rows, []
        if not rows:
            return
        header = rows[0] if len(rows) > 1 and self._is_header(rows) else None
        body = rows[1:] if header else rows
        for i, (s, e) in enumerate(body):
            room = SHOW_CHARS - (header[1] - header[0] if header else 0) - (e - s)
            first = last = i
            for j in (i - 1, i + 1):  # the rows beside it, while they fit
                if 0 <= j < len(body) and body[j][1] - body[j][0] <= room:
                    first, last, room = min(first, j), max(last, j), room - (body[j][1] - body[j][0])
            self.found.append(Unit(s, e, "row", (body[first][0], body[last][1]), header))

    def _run_on_term(self, pieces: list[tuple[int, int]]) -> Unit | None:
        """A definition's description wraps onto the lines after it ("--png <tab> Generate pictures
        of each page, in PNG format. This option is equivalent to -fpng."): shown with it, as
        many of its sentences (`pieces`) as fit in SHOW_CHARS. Returns the term, shown as that
        entry (the term and the sentences that fit), when any did: each of those sentences is
        shown as the entry, with the term's `lines` (its
        term's setting and its default read together: "ANNOY time in seconds" over "Specify the
        time ... The default is 300 seconds")."""
        term, self.term = self.term, None
        if term is None or self.block_kind != "sentence":
            return None
        group = self._headers_over(term)
        first = self.found[group[0]].start
        fits = [e for _, e in pieces if e - first <= SHOW_CHARS]
        if not fits:
            return None
        headers = (first, self.found[term].end) if self._entry_header(term) else None
        for i in group:
            self.found[i] = replace(self.found[i], show=(first, fits[-1]), lines=headers)
        return self.found[term]

    def _headers_over(self, term: int) -> list[int]:
        """The definition `term`, after the texinfo headers or function forms right above it that
        share its description ("Command: reset ¶", "Command: reset halt ¶", ... over "Perform as
        hard a reset as possible"; "semilogy (y)", "semilogy (x, y)", ...): all of them are shown
        with it, one to a line."""
        if not self._entry_header(term):
            return [term]
        first = term
        while (first > 0 and self._entry_header(first - 1)
               and not self.text[self.found[first - 1].end:self.found[first].start].strip()):
            first -= 1
        return list(range(first, term + 1))

    def _entry_header(self, i: int) -> bool:
        """Whether found[i] is texinfo's header of an entry or a function's form: it may share its
        description with the headers right above it, and is shown on a line of its own."""
        unit = self.found[i]
        own = self.text[unit.start:unit.end]
        return unit.kind == "definition" and bool(_DEFINITION_HEADER.match(own) or _SIGNATURE.match(own))

    def _is_header(self, rows: list[tuple[int, int]]) -> bool:
        """A table's first row names its columns: capitalised words, no numbers (a name with a
        digit is a word: "A2 Jumper"), where a later row has a number or a cell in lower case
        ("Part | Thread | Torque" over "Cover screws | M6 | 9 Nm"; not "apt-get update | -> | apt
        update" over more commands)."""
        def cells(span: tuple[int, int]) -> list[str]:
            return [c.strip() for c in self.text[span[0]:span[1]].split("\t") if c.strip()]

        def plain_title(cell: str) -> bool:  # "A2 Jumper" names a column; "9 Nm", "M6 x 1.0" are values
            return cell[0].isupper() and not any(_NUMBER.fullmatch(word) for word in cell.split())

        later = [cell for row in rows[1:] for cell in cells(row)]
        return all(plain_title(c) for c in cells(rows[0])) and not all(plain_title(c) for c in later)

    def _introduced_by(self, kind: str) -> None:
        """A list that follows a sentence ending in ":" ("To turn the laser off: 1. Press ...") is
        that sentence's: its steps are shown with it, as many as fit in SHOW_CHARS."""
        last = self.found[-1] if self.found else None
        if kind != "item":
            self.intro = None
        elif last is not None and last.kind in ("sentence", "item") and self.text[last.end - 1] == ":":
            self.intro = len(self.found) - 1

    def _list_shown_with_intro(self, end: int) -> None:
        intro = self.found[self.intro]
        if end - intro.show[0] > SHOW_CHARS:
            self.intro = None
        else:
            self.found[self.intro] = Unit(intro.start, intro.end, intro.kind, (intro.show[0], end))

    def _flush_block(self) -> None:
        if not self.block:
            self.term = None
            return
        kind, pieces = self.block_kind, _split_block(self.text, self.block)
        entry = self._run_on_term(pieces)
        kept = pieces
        if kind == "item" and len(pieces) > 1 and self.text[pieces[-1][1] - 1] == ":":
            kept = pieces[:-1]  # the next list's introduction ("To turn the laser off:") is not this item's
        block = (kept[0][0], kept[-1][1]) if kept else None
        if kind == "item" and self.intro is not None and block:
            self._list_shown_with_intro(block[1])
        for i, (s, e) in enumerate(pieces):
            own = kind if (kind == "warning" or i == 0) else "sentence"
            show = block if own in ("item", "warning") and block[1] - block[0] <= SHOW_CHARS else (s, e)
            in_entry = entry is not None and e <= entry.show[1]
            self.found.append(Unit(s, e, own, entry.show if in_entry else show, self._name_over(own, s, in_entry),
                                   lines=entry.lines if in_entry else None))
        self.block, self.block_kind = [], "sentence"


def _introduced_code(text: str, found: list[Unit]) -> list[Unit]:
    """A sentence ending in ":" and the command or code it introduces ("To set the JTAG frequency
    use the command:" over "adapter speed 1234"; "Put this in upsmon.conf:" over its lines), lines
    that end no sentence, are shown together, as many of those lines as fit in SHOW_CHARS. So is
    a sentence and the table right after it, when the whole table fits ("The NMC connection is
    an 8P8C RJ45-style jack." over "TxD 2 3", "RxD 3 6", ...): a table's rows seldom repeat the
    words its introduction uses."""
    result = list(found)
    for i, intro in enumerate(found):
        if intro.kind != "sentence" or intro.show != (intro.start, intro.end):
            continue
        if text[intro.end - 1] != ":" and (i + 1 == len(found) or found[i + 1].kind != "row"):
            continue  # a sentence not ending in ":" is shown only over a table
        run = _lines_after(text, found, i)
        if run:
            first = run[0].header[0] if run[0].header and run[0].header[0] >= intro.end else run[0].start
            shown, code = (intro.start, run[-1].end), (first, run[-1].end)
            result[i] = replace(intro, show=shown, lines=code)
            for j in range(i + 1, i + 1 + len(run)):
                if found[j].kind != "row":  # a row is shown under its header, with the rows beside it
                    result[j] = replace(found[j], show=shown, lines=code)
    return result


def _lines_after(text: str, found: list[Unit], i: int) -> list[Unit]:
    """The code lines and table rows right after found[i] that fit in SHOW_CHARS with it; a
    table that does not fit whole is left out from its first row."""
    run, at = [], found[i].end
    for unit in found[i + 1:]:
        if (not (_code_line(text, unit) or unit.kind == "row") or not _next_to(text, at, unit)
                or unit.end - found[i].start > SHOW_CHARS):
            break
        run.append(unit)
        at = unit.end
    following = found[i + 1 + len(run)] if i + 1 + len(run) < len(found) else None
    if following is not None and following.kind == "row" and _next_to(text, at, following):
        rows = [k for k, unit in enumerate(run) if unit.kind == "row"]
        run = run[:rows[0]] if rows else run
    return run


def _next_to(text: str, at: int, unit: Unit) -> bool:
    """Whether nothing but space, or the table header a row is shown under, comes between `at`
    and the unit."""
    header = unit.header if unit.kind == "row" and unit.header and unit.header[0] >= at else None
    if header:
        return not text[at:header[0]].strip() and not text[header[1]:unit.start].strip()
    return not text[at:unit.start].strip()


def _code_line(text: str, unit: Unit) -> bool:
    """A unit shown alone that ends no sentence: a command, a setting, a configuration line."""
    return (unit.kind in ("sentence", "definition", "setting") and unit.show == (unit.start, unit.end)
            and text[unit.end - 1] not in ".!?:")


def _followed(text: str, found: list[Unit]) -> list[Unit]:
    """Each sentence or list item shown alone, with where the sentence after it ends (`then`)
    when that one follows it, in its paragraph or the next (nothing but space between: no
    heading), and the two fit in THEN_CHARS (a FAQ's item "6. LPC2000 Flash ... fails at
    random." over "Make sure the core frequency ...")."""
    result = list(found)
    for i, (unit, after) in enumerate(zip(found, found[1:])):
        if (unit.kind in ("sentence", "item") and after.kind == "sentence" and unit.show == (unit.start, unit.end)
                and not text[unit.end:after.start].strip() and after.end - unit.start <= THEN_CHARS):
            result[i] = replace(unit, then=after.end)
    return result


# A question the manual asks itself, or a problem it states, before the answer or the solution.
_PROBLEM = re.compile(r"^(?:[-*+•◦▪‣–·]\s*)?(?:Problem|Symptom|Issue|Question|Q)\s*:")
_ANSWERABLE = ("sentence", "item", "setting", "definition", "warning")


def _answered(text: str, found: list[Unit]) -> list[Unit]:
    """The units that follow a question or a problem the manual states, in its text or as a
    heading, next to it (nothing but space between), become its "answer", each shown under it;
    the question, then answered, a "question". A technician's question repeats the manual's, so
    the manual's question would lead and the solution under it would not."""
    result = list(found)
    asks = [_asks(text, unit) for unit in found]
    for i, unit in enumerate(found):
        if not asks[i] or unit.show[1] > unit.end:  # an item shown with its block answers itself
            continue
        answer = _answer_after(text, found, asks, i)
        asked = unit.start + _SECTION_LABEL.match(text[unit.start:unit.end]).end()  # "## How ...?": "How ...?"
        for j in answer:
            result[j] = Unit(found[j].start, found[j].end, "answer", found[j].show, (asked, unit.end))
        if answer:
            result[i] = Unit(unit.start, unit.end, "question", unit.show)
    return [unit for unit in result if unit.kind != "asked"]  # a heading that asks, with no answer here


MAX_ANSWER_UNITS = 8  # a manual's answer runs a paragraph or two; then its text goes on


def _answer_after(text: str, found: list[Unit], asks: list[bool], asked: int) -> list[int]:
    """The units next to one another after the question `asked`, up to the next question (`asks`:
    which units ask one), each short enough to be shown under it."""
    room = THEN_CHARS - (found[asked].end - found[asked].start)
    taken: list[int] = []
    for j in range(asked + 1, min(len(found), asked + 1 + MAX_ANSWER_UNITS)):
        unit = found[j]
        if (unit.kind not in _ANSWERABLE or asks[j] or text[found[j - 1].end:unit.start].strip()
                or unit.show[1] - unit.show[0] > room):
            break
        taken.append(j)
    return taken


def _asks(text: str, unit: Unit) -> bool:
    """A problem the manual states ("Problem: ...", "Symptom: ..."), or a question that starts
    its line ("Why does the spindle stop?"), not one in the middle of prose ("so, how?")."""
    if unit.kind == "asked":
        return True
    if unit.kind not in ("sentence", "item"):
        return False
    own = text[unit.start:unit.end].strip()
    if _PROBLEM.match(own):
        return True
    starts_line = not text[text.rfind("\n", 0, unit.start) + 1:unit.start].strip()
    return _asks_itself(own) and starts_line and len(own.split()) >= ASKS_WORDS


def _line_kind(line: str, before: str) -> str:
    """What one line of a manual is, beside the line `before` it ("" after a break): row,
    definition, setting, item, warning or text. A line of a paragraph wraps anywhere, so only a
    line that starts anew can be a setting: after a sentence's end, a colon or a break. A
    command or code line stays in the sentence around it ("The command > sink("record.lis")
    will divert ..."), which is how manuals write them: measured, a line of its own lost the
    command's sentence (lead hit on the R manuals 0.45 -> 0.38)."""
    if table_row(line):
        return "row"
    if _WARNING.match(line):
        return "warning"  # also an admonition's label in a cell beside its text (Asciidoctor's "Note")
    if "\t" in line and not _PROBLEM.match(line):  # "Question:" beside its text is asked, as on its own line
        cells = [c for c in line.split("\t") if c.strip()]
        if len(cells) == 2 and len(cells[0].split()) <= 5 and not _SECTION_NUMBER.match(cells[0]):
            return "definition"
    if LIST_ITEM.match(line):
        return "item"
    keyed_number = _KEY_VALUE.match(line) and any(c.isdigit() for c in line)
    if _starts_anew(before) and (_ASSIGNMENT.match(line) or keyed_number):
        return "setting"
    return "text"


def _keyed_block(line: str, before: str, following: str) -> bool:
    """Whether a "Key: value" line stands among others like it ("Features: tty_clk" over
    "Requires: a dial-out device."; "Material: stainless steel" over "Connector: RJ45"): each is
    a line of its own, though the one before ends in no full stop. A problem or a question
    ("Q: ...", "Problem: ...") is none: its answer is read under it."""
    return _keyed(line) and (_keyed(before) or _keyed(following))


def _keyed(line: str) -> bool:
    return bool(_KEY_VALUE.match(line)) and not _PROBLEM.match(line) and not _asks_itself(line)


def _asks_itself(text: str) -> bool:
    """Whether text ends in a question mark, before any closing quote or bracket."""
    return text.rstrip("\"'”’)").endswith("?")


def table_row(line: str) -> bool:
    """Three cells or more, parted by tabs (ingest writes a wide gap so)."""
    return sum(bool(cell.strip()) for cell in line.split("\t")) >= 3


def _starts_anew(before: str) -> bool:
    """Whether a line starts anew after the line `before` it ("" after a break): a line of a
    paragraph wraps anywhere, so only one after a sentence's end, a colon or a break can."""
    return not before or before[-1] in ".!?:;"


# Words a sentence never ends on: the line after one ending so continues the sentence.
_RUNS_ON = frozenset("a an the to from of and or with by for in on at as into onto than".split())


def _runs_on(before: str) -> bool:
    """Whether the line before ends in a word that leaves its sentence open ("... from:
    LogLevel Info to"): the next line is part of that sentence, not a heading."""
    words = before.split()
    return bool(words) and words[-1] in _RUNS_ON


def _named_after_colon(line: str, before: str) -> bool:
    """A name alone on its line that a sentence ending in ":" gave ("... via a HAL pin with the
    following name:" over "qtplasmac.laser_on"): it ends that sentence, and what follows starts anew."""
    return before.endswith(":") and bool(_TERM.match(line)) and bool(CODE.search(line))


# Texinfo's header of a command's, function's or variable's entry: "Config Command: telnet_port
# [number] ¶" (HTML), "double gammafn (double x) <tab> [Function]" (PDF)
_DEFINITION_HEADER = re.compile(r"^(?:[A-Z][a-z]+ ){0,2}[A-Z][a-z]+: \S.{0,100}¶$"
                                r"|^\S.{0,100}\s\[(?:[A-Z][a-z]+ ){0,2}[A-Z][a-z]+\]$")
# A function's forms, one to a line above its description, as texinfo's PDF sets them with no
# category: "semilogy (x, y)", "x = csvread (filename, dlm_opt1, . . .)", "[tok, rem] = strtok (str)"
_SIGNATURE = re.compile(r"^(?:\[?[\w, ]{1,40}\]?\s*=\s*)?([A-Za-z_][\w.]{0,40}) ?\((?:[^()]|\([^()]*\)){0,100}\);?$")


def _term_line(line: str, before: str, following: str) -> bool:
    """A name alone on its line, its description on the lines after it, as DocBook and
    AsciiDoc set a list of terms ("ferror_current" over "(returns float) - current following
    error."): a name that reads as code, or any word before a bracketed description; or a
    name in capitals before a sentence ("LOTRANS" over "The line voltage below which ...",
    "MINUTES battery runtime in minutes" over "If MINUTES is specified, ..."); or an option's
    forms ("-Mcsecs --message-timeout=csecs" over "Specify the amount of time ..."); or texinfo's
    header of an entry or a function's form (texinfo's PDF sets the forms with no category: "x
    = csvread (filename)"), also under another header that shares its description. A line
    that ends in ":" is no description: it introduces what follows ("qtplasmac.laser_on" over
    "To set the origin with zero rotation:" is the name a sentence gave, its own unit)."""
    texinfo_header = bool(_DEFINITION_HEADER.match(line)) or _signature(line, following)
    if texinfo_header and following and (_DEFINITION_HEADER.match(before) or _same_function(before, line)):
        return True  # texinfo's next header over the same description
    if not (_starts_anew(before) and following and not following.endswith(":")):
        return False
    if texinfo_header:
        return True
    if _CAPS_TERM.match(line) and not _WARNING.match(line):
        return following[0].isupper()
    if _OPTION_FORMS.match(line):
        return True
    return bool(_TERM.match(line)) and (bool(CODE.search(line)) or line.startswith("-") or following.startswith("("))


def _signature(line: str, following: str) -> bool:
    """A function's form over its next form or its description (a capitalised sentence); not a
    line of a program's example, where the next line calls another function ("s.poll()" over
    "print(...)")."""
    return bool(_SIGNATURE.match(line)) and bool(following) and (
        _same_function(line, following) or following[0].isupper())


def _same_function(line: str, other: str) -> bool:
    """Two forms of one function ("semilogy (y)", "h = semilogy (. . .)")."""
    a, b = _SIGNATURE.match(line), _SIGNATURE.match(other)
    return bool(a and b) and a[1] == b[1]


def _entry_line(line: str, before: str) -> bool:
    """An option's entry, its name and the start of its description on one line ("ABSTOL=x
    resets the absolute current error tolerance of the program. The default value is 1" over
    "pA.", "-b --batch Run in batch mode."): the description's sentences are the entry's."""
    return _starts_anew(before) and bool(_ENTRY.match(line))


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each line of text[start:end], as offsets into `text`."""
    lines, at = [], start
    for line in text[start:end].split("\n"):
        lines.append((at, at + len(line)))
        at += len(line) + 1
    return lines


def _breaks(line: str, headings: set[str], following: str, before: str) -> bool:
    """A line that is never part of a sentence: a heading (also one set in capitals: "CHAPTER
    12. GETTING SUPPORT … 12.3. HOW DO I REPORT A BUG…") or a page number. A short line that
    ends in a number is no page header here ("latency-test 50000 1000000" is a command): ingest
    has cut the running headers and footers already."""
    if " ".join(_MARKDOWN_HEADING.sub("", line).split()).casefold() in headings or _shouted(line):
        return True  # Markdown's "## Priming" is the heading "Priming"
    if line[-1] in ".,;:" and not DOT_LEADERS.search(line):
        return False
    if table_row(line) and not DOT_LEADERS.search(line):
        return False  # "1 <tab> No <tab> No <tab> Yes": a row that starts with its number
    numbered = (_NUMBERED_HEADING.match(line) and not _wrapped_step(line, following)
                and not _LOWER_STEP.match(line) and not _listed(line, before))
    return bool(numbered or _PAGE_NUMBER.match(line) or DOT_LEADERS.search(line))


def _listed(line: str, before: str) -> bool:
    """A numbered line that is no heading: a step under the sentence that introduces its list
    ("... happens:" over "1. The UPS goes on battery"), or under the step numbered one less
    ("2. The UPS reaches low battery"); or a row of numbers alone ("1965 <tab> 103", a data file's)."""
    if not any(ch.isalpha() for ch in line):
        return True
    step, last = _STEP_NUMBER.match(line), _STEP_NUMBER.match(before)
    return bool(step) and (before.endswith(":") or bool(last) and int(step[1]) == int(last[1]) + 1)


def _wrapped_step(line: str, following: str) -> bool:
    """A numbered step, not a heading: one too long for a heading whose sentence runs on in lower
    case ("2. LASER button label will change to LASER and the HAL pin named" over
    "qtplasmac.laser_on will be turned off."), or one that holds a sentence's end. A numbered
    question that wraps ("7.36 Why are there unwanted borders, lines or grid-like") stays a
    heading."""
    if not LIST_ITEM.match(line):
        return False
    if SENTENCE_END.search(line, _SECTION_LABEL.match(line).end()):
        return True  # a heading holds no sentence's end: "6. If you use CUPS, enable debugging output. This can be"
    return len(line.split()) > HEADING_WORDS + 1 and following[:1].islower()


def _unnumbered(text: str, start: int, end: int) -> tuple[int, int]:
    """A heading line's span without its section number or Markdown's marks."""
    s, e = trimmed(text, start, end)
    return s + _SECTION_LABEL.match(text[s:e]).end(), e


def _naming_line(line: str, following: str) -> bool:
    """A heading that names an option or a command, which ingest did not mark (a section that
    starts inside a chunk): "dropwpt option" over a sentence."""
    return bool(_NAMING_HEADING.match(line)) and following[:1].isupper()


def _ends_section(line: str, before: str, following: str) -> bool:
    """A line that may be a heading ingest did not mark: after a sentence's end, without closing
    punctuation, before a capitalised line ("Rearrange waypoints, routes and/or tracks by
    resorting (sort)", which may wrap)."""
    wraps = bool(following) and following[-1] not in ".,;:!?" and len(following.split()) <= HEADING_WORDS
    return ((not before or before[-1] in ".!?") and line[-1] not in ".,;:!?" and len(line.split()) <= 12
            and (following[:1].isupper() or wraps))


def _names_a_thing(own: str) -> bool:
    """Whether a heading, without its section number, names an option, a command or a parameter
    (see _NAMING_HEADING), not a topic: at most HEADING_WORDS words."""
    if not own or len(own.split()) > HEADING_WORDS or own.endswith("?"):
        return False
    first = own.split()[0]
    code_like = _TERM.match(first) and CODE.search(first)
    return bool(_NAMING_HEADING.match(own) or code_like or _PARAMETER_CODE.match(own))


def _shouted(line: str) -> bool:
    """Three words or more in capitals, and not a warning ("CAUTION: HIGH VOLTAGE" is one)."""
    letters = [ch for ch in line if ch.isalpha()]
    words = [w for w in line.split() if any(ch.isalpha() for ch in w)]
    return (len(words) >= 3 and len(letters) >= 10 and sum(ch.isupper() for ch in letters) >= 0.9 * len(letters)
            and not _WARNING.match(line))


def _own_line(line: str) -> bool:
    """A short line that is no heading but a line of its own: a configuration file's ("MINSUPPLIES
    2", "License: GPL-2", "CUMONBATT: 0 seconds"), a program's message ("Unable to open /dev/ttyS2:
    Permission denied"), a netlist's ("RLOAD 2 10 10 K")."""
    return bool(_DIRECTIVE.match(line) or _KEY_VALUE.match(line) or _NO_HEADING.search(line))


def _untitled_heading(line: str, following: str) -> bool:
    """A short capitalised line with no closing punctuation, before a line that starts a
    sentence: a heading that ingest did not recognise ("Multiple keys" above "It is possible
    ..."), which would otherwise be glued onto the sentence."""
    words = line.split()
    return (len(words) <= HEADING_WORDS and len(line) <= HEADING_CHARS and line[0].isupper()
            and line[-1] not in ".,;:!?-" and not CODE.search(line) and "\t" not in line
            and bool(following) and following[0].isupper())


def _split_block(text: str, block: list[tuple[int, int]]) -> list[tuple[int, int]]:
    start, end = block[0][0], block[-1][1]
    sentences, at = [], start
    for stop, sentence_end, next_start in _stops(text, start, end):
        piece = text[at:stop + 1]
        if _LIST_MARKER.fullmatch(piece.strip()) or _FIRST_ITEM_INLINE.search(piece):
            continue  # a list item's "2." ends no sentence, nor "...rotation: 1.": each stays with its item
        sentences.append((at, sentence_end))
        at = next_start
    sentences.append((at, end))
    found = []
    for s, e in sentences:
        s, e = trimmed(text, s, e)
        if e - s > MAX_CHARS:
            found += _by_lines(text, s, e)
        elif e > s:
            found.append((s, e))
    return found


def _stops(text: str, start: int, end: int) -> list[tuple[int, int, int]]:
    """Where sentences end in text[start:end]: (the stop, the sentence's end after its closing
    quotes, where the next starts). Before a capital or a digit; or before a word in lower case,
    which a program's name is ("... (5 minutes). apcupsd sends ..."), after a word that is no
    abbreviation ("e.g. the", "etc. and", "a. b." are no ends)."""
    found = [(m.start(), m.start() + len(m.group(0).rstrip()), m.end())
             for m in SENTENCE_END.finditer(text, start, end)]
    found += [(m.start(2), m.end(2), m.end()) for m in _LOWER_START.finditer(text, start, end)
              if m.group(1).lower() not in ABBREVIATIONS]
    return sorted(found)


def _by_lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A long run cut at line ends into pieces of at most MAX_CHARS (a longer line alone)."""
    pieces, first, last = [], start, start
    for s, e in line_spans(text, start, end):
        if e - first > MAX_CHARS and last > first:
            pieces.append(trimmed(text, first, last))
            first = s
        last = e
    pieces.append(trimmed(text, first, last))
    return [(s, e) for s, e in pieces if e - s <= MAX_CHARS and e > s]


def ends_sentence(text: str) -> bool:
    """Whether text ends with a full stop (a chunk that does not run on to the next page)."""
    return bool(re.search(r"[.!?]['\")\]]?\s*$", text))


# -- the model's answer ---------------------------------------------------------------------------
_FENCE = re.compile(r"^\s*(```|~~~)")
# A full stop, its closing quotes or brackets and any citations ("[1]", "[2, 3]") that follow
# it, then space and what starts a sentence.
_CITES = r"\[\d{1,3}(?:\s*,\s*\d{1,3})*\]"
_END = re.compile(rf"[.!?][\"'”’)\]*`]*(?:\s*{_CITES})*(?!\s*{_CITES})(?=\s+[\"'“‘(\[`*>$]?[A-Z0-9])")
ABBREVIATIONS = frozenset("e.g i.e eg ie etc vs cf fig figs no nos approx eq eqs sec ch pp p resp incl "
                          "esp viz ca mr mrs dr st vol".split())


def answer_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of the model's text: blank lines and list items start a
    block, a fenced code block is one piece (an unclosed one runs to the end), and a block of
    prose is split after a full stop that ends a sentence (not "e.g.", not "read.csv(")."""
    found: list[tuple[int, int]] = []
    block: list[tuple[int, int]] = []  # the prose lines gathered
    code_start: int | None = None
    for start, end in line_spans(text, 0, len(text)):
        line = text[start:end]
        if _FENCE.match(line):
            if code_start is None:
                found += _split_prose(text, block)
                block, code_start = [], start
            else:
                found.append((code_start, end))
                code_start = None
            continue
        if code_start is not None:
            continue
        if not line.strip() or LIST_ITEM.match(line):
            found += _split_prose(text, block)
            block = []
        if line.strip():
            block.append((start, end))
    if code_start is not None:
        found.append(trimmed(text, code_start, len(text)))
    found += _split_prose(text, block)
    return sorted(span for span in found if span[1] > span[0])


# While the answer streams: a loop is cut at a sentence's end, a colon's or a line's (the nearest
# to where it starts repeating); repeated sentences are compared between full stops or lines.
STREAM_END = re.compile(r"[.!?:](?=\s)|\n")
REPEAT_END = re.compile(r"[.!?]+(?=\s)|\n")


def is_code_block(text: str) -> bool:
    return bool(_FENCE.match(text))


def _split_prose(text: str, block: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if not block:
        return []
    start, end = block[0][0], block[-1][1]
    found, at = [], start
    for match in _END.finditer(text, start, end):
        before = text[at:match.start()].split()
        word = before[-1].lstrip("(\"'`*").casefold() if before else ""
        if not before or word in ABBREVIATIONS or (len(before) == 1 and re.fullmatch(r"\d{1,2}|[a-z]", word)):
            continue  # "e.g." or a list's "1." ends no sentence
        found.append(trimmed(text, at, match.end()))
        at = match.end()
    found.append(trimmed(text, at, end))
    return found
