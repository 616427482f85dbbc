"""AnswerGuard: what of the model's stream a person gets to see, and when generation stops.

- The source fence's opening marker is removed: small models often open their answer by
  copying it, then quote a source, which is a fine answer without the marker.
- The fence's closing marker stops the answer: what follows is made up.
- A loop stops it: small models at temperature 0 repeat one sentence. onnxruntime-genai's
  repetition_penalty and no_repeat_ngram_size count the prompt too, so they push the model
  away from the sources' own words (measured: asked to copy a source sentence, SmolLM2 wrote
  something else with a penalty of 1.1, and reworded it with no 6-gram repeats), so the loop
  is cut instead. A
  phrase said twice is not a loop; any of these is (has_loop tells, by the same rules):
  - the same text twice in a row, over LOOP_WINDOW characters: the answer keeps one copy,
    up to the nearest sentence end;
  - a sentence of MIN_SENTENCE_WORDS words or more said again (case, punctuation, list
    numbers and [n] markers aside: "1. Open it." and "2. Open it [1]." are the same), or a
    run of REPEAT_WORDS words said again: the answer ends where the second copy begins
    (at the start of its sentence, if the first copy lies before that);
  - a sentence of TEMPLATE_WORDS words or more said a third time with one word changed each
    time ("You must also change the `B` to 2." after the same for `A` and `C`): the answer
    ends before the third. Two such sentences may be an answer (joint 0, joint 1).

- A copy of the prompt's worked example stops it: a sentence holding a run of ECHO_WORDS words
  from the example ("Hold the FEED key for five seconds") that no passage holds is made up
  for this manual; the answer ends where that sentence begins. While the text streams, words
  that may begin such a run are held back until they are known not to.

- A web or mail address that none of the passages holds is replaced by ADDRESS_REMOVED as it
  streams (when the guard is given the passages' texts): a made-up link never reaches the
  screen. To tell, the last word of the stream is held back until it is finished.

Text that might be the start of a marker is held back until it is known not to be one, so
markers never reach the screen. After the first sentence, which streams word by word, each
sentence is held back until it is finished and checked: a loop that begins after the first
sentence never reaches the screen (on the built-in model most answers end in one). The final
answer (DoneEvent.answer) never holds a loop; views show it at the end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.answer.actions import addresses, missing_actions
from engine.answer.sentences import REPEAT_END, STREAM_END
from engine.types import CancelFlag

ADDRESS_REMOVED = "[address removed: not in the manuals]"

LOOP_WINDOW = 40
# Measured on 20 answers of SmolLM2-135M: 8 words also cut an answer that only reused a phrase;
# 10 and 12 find the same looping answers but for one, and leave more room for quoted commands.
REPEAT_WORDS = 12
MIN_SENTENCE_WORDS = 3  # "Press Enter." may well come twice in a procedure
TEMPLATE_WORDS = 6  # "Set HOME_SEARCH_VEL to 0." for three settings is an answer, not a loop
ECHO_WORDS = 5  # the worked example's own words: "to print a test label" (4: "from 1 to 15")
# Not words of the sentence: citations and list numbers at a line's or a sentence's start.
_CITATION = re.compile(r"\[\d+\]")
_NOT_WORDS = re.compile(_CITATION.pattern + r"|(?:^|(?<=[.!?:]\s))[ \t]*\d{1,3}[.)](?=\s)", re.MULTILINE)
_WORD = re.compile(r"\w+")


class AnswerGuard:
    """Feed it each piece; show what feed() returns; use it as the generation's cancel flag
    (the caller's own flag still works through it)."""

    def __init__(self, cancel: CancelFlag | None, hidden: Sequence[str] = (), stop_strings: Sequence[str] = (),
                 known: Sequence[str] | None = None, echoes: Sequence[str] = ()):
        self.cancel = cancel
        self.hidden = sorted(hidden, key=len, reverse=True)  # the longest match is removed first
        self.stop_strings = tuple(stop_strings)
        self.known = None if known is None else tuple(known)  # the passages' texts; None: no address check
        self.removed: list[str] = []  # the addresses replaced by ADDRESS_REMOVED
        self.text = ""  # what has been let through (markers removed)
        self.echoes = _Echoes(echoes, known or ())  # the worked example's texts (the prompt's)
        self.reason = ""  # "stop string", "repetition" or "example copied" once stopped
        self._pending = ""  # held back: it may be the start of a marker
        self._loop_cut: int | None = None

    def is_set(self) -> bool:
        return bool(self.reason) or (self.cancel is not None and self.cancel.is_set())

    def feed(self, piece: str) -> str:
        """The text that can be shown now."""
        if self.reason:
            return ""
        pending = self._pending + piece
        stops = [i for i in (pending.find(s) for s in self.stop_strings) if i >= 0]
        if stops:
            self.reason, self._pending = "stop string", ""
            shown = self._as_shown(pending[:min(stops)])
            self.text += shown
            return shown
        held = self._held_back(pending)
        return self._show(pending[:len(pending) - held], pending[len(pending) - held:])

    def flush(self) -> str:
        """At the end of the stream: what was held back (the start of a marker after all, a word,
        the last sentence), checked."""
        if self.reason:
            self._pending = ""
            return ""
        return self._show(self._pending, "", complete=True)  # the last sentence is finished now

    def answer(self) -> str:
        if self._loop_cut is None:
            return self.text.strip()
        return self.text[:self._loop_cut].strip()

    def _as_shown(self, text: str) -> str:
        """The stream's text as the screen gets it: markers and made-up addresses taken out."""
        return self._without_made_up_addresses(self._without_hidden(text))

    def _without_made_up_addresses(self, text: str) -> str:
        if self.known is None:
            return text
        for address in missing_actions(text, self.known, find=addresses):  # longest first
            self.removed.append(address)
            text = text.replace(address, ADDRESS_REMOVED)
        return text

    def _without_hidden(self, text: str) -> str:
        for marker in self.hidden:
            text = text.replace(marker, "")
        return text

    def _held_back(self, text: str) -> int:
        """How many characters at the end of `text` could begin a marker, or a longer one, or
        (with an address check) belong to a word still being written."""
        markers = [*self.hidden, *self.stop_strings]
        held = 0
        for size in range(min(len(text), max((len(m) for m in markers), default=0)), 0, -1):
            if any(len(m) > size and m.startswith(text[-size:]) for m in markers):
                held = size
                break
        if self.known is not None:
            held = max(held, len(text) - _last_word_start(text))
        held = max(held, min(len(text), self.echoes.may_begin(self.text + text)))
        return len(text) - self._not_splitting(text, len(text) - held)

    def _not_splitting(self, text: str, cut: int) -> int:
        """`cut`, moved back to the start of any hidden string it would split: the part let
        through never ends inside one ("...c0ffe" let through, "e" held back because another
        marker begins with "e")."""
        moved = True
        while moved:
            moved = False
            for marker in self.hidden:
                for start in range(max(0, cut - len(marker) + 1), cut):
                    if text.startswith(marker, start):
                        cut, moved = start, True
                        break
        return cut

    def _show(self, ready: str, held: str, complete: bool = False) -> str:
        """Of `ready` (the stream so far, less `held`: a marker or a word being written), what
        may be shown: up to a loop, where the answer stops, else all but a sentence being written
        after the first. The loop rules read the text as it will be shown, markers and made-up
        addresses taken out."""
        ready = self._as_shown(ready)
        shown = len(self.text)
        text = self.text + ready
        unshown = self._without_hidden(held)
        cut, reason = self._cut(text, complete, unshown)
        if cut is not None:
            if cut > len(text):  # a loop inside the word held back: its text before the loop is shown
                ready += self._without_made_up_addresses(unshown[:cut - len(text)])
                cut = len(self.text) + len(ready)
            self.reason, self._pending = reason, ""
            self._loop_cut = cut
            ready = ready[:max(0, cut - shown)].rstrip()  # the line breaks before the loop too
        elif complete:
            self._pending = ""
        else:
            keep = max(0, min(_unfinished_sentence(text), _letterless_tail(text, shown)) - shown)
            ready, self._pending = ready[:keep], ready[keep:] + held
        self.text += ready
        return ready

    def _cut(self, text: str, complete: bool, held: str) -> tuple[int | None, str]:
        """Where the answer stops, and why: the earlier of a loop and a copy of the example, both
        read with the word still held back (it may finish the copy, or loop with no space until
        the token limit)."""
        whole = text + held
        found = [(cut, why) for cut, why in ((loop_cut(whole, complete), "repetition"),
                                             (self.echoes.cut(whole), "example copied")) if cut is not None]
        return min(found, default=(None, ""))


class _Echoes:
    """The runs of ECHO_WORDS words of the worked example that no passage holds."""

    def __init__(self, texts: Sequence[str], known: Sequence[str]):
        runs = {run for text in texts for run in _runs(_words(text))}
        self.runs = runs - {run for text in known for run in _runs(_words(text))} if runs else runs

    def cut(self, text: str) -> int | None:
        """Where the sentence begins that holds the first run of the example, or None."""
        if not self.runs:
            return None
        masked = _masked(text)
        words = list(_WORD.finditer(masked))
        folded = [w.group().casefold() for w in words]
        for i in range(len(words) - ECHO_WORDS + 1):
            if tuple(folded[i:i + ECHO_WORDS]) in self.runs:
                ends = [m.end() for m in REPEAT_END.finditer(masked, 0, words[i].start())]
                return ends[-1] if ends else 0
        return None

    def may_begin(self, text: str) -> int:
        """How many characters at the end of `text` may be the start of a run of the example
        (its last word maybe unfinished): held back until the next words tell."""
        if not self.runs:
            return 0
        words = list(_WORD.finditer(_masked(text)))[-ECHO_WORDS:]
        unfinished = bool(words) and words[-1].end() == len(text)
        folded = [w.group().casefold() for w in words]
        for i in range(len(words)):
            begun = folded[i:]
            if len(begun) < ECHO_WORDS + unfinished and any(_begins(run, begun, unfinished) for run in self.runs):
                return len(text) - words[i].start()
        return 0


def _begins(run: tuple[str, ...], begun: list[str], unfinished: bool) -> bool:
    n = len(begun)
    if not unfinished:
        return run[:n] == tuple(begun)
    return run[:n - 1] == tuple(begun[:-1]) and run[n - 1].startswith(begun[-1])


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(_masked(text))]


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}


def _last_word_start(text: str) -> int:
    """Where the run of non-space characters that ends `text` begins."""
    at = len(text)
    while at > 0 and not text[at - 1].isspace():
        at -= 1
    return at


def loop_cut(text: str, complete: bool = True) -> int | None:
    """Where the answer stops for a loop in `text` (see the module's docstring), or None: the
    earlier of the same text twice in a row at the end and a repeated sentence or run (a loop
    may change its period: "file.gpx.gpx.file.gpx.gpx" runs on as ".gpx.gpx")."""
    cuts = [cut for cut in (_periodic_cut(text), repeat_cut(text, complete)) if cut is not None]
    return min(cuts, default=None)


def _periodic_cut(text: str) -> int | None:
    """The same text twice in a row over LOOP_WINDOW characters at the end, citations aside (a
    model counting "# [2]", "# [3]" ... repeats itself): the sentence end nearest to where its
    second copy begins."""
    cited = {i for m in _CITATION.finditer(text) for i in range(m.start(), m.end())}
    if not cited:
        return _periodic_cut_in(text)
    kept = [i for i in range(len(text)) if i not in cited]
    cut = _periodic_cut_in("".join(text[i] for i in kept))
    return None if cut is None else (kept[cut] if cut < len(kept) else len(text))


def _periodic_cut_in(text: str) -> int | None:
    if len(text) < 2 * LOOP_WINDOW:
        return None
    earlier = text.rfind(text[-LOOP_WINDOW:], 0, len(text) - 1)
    period = len(text) - LOOP_WINDOW - earlier
    if earlier < 0 or period > len(text) // 2 or text[-2 * period:-period] != text[-period:]:
        return None
    start = len(text) - 2 * period  # back to where the repeating text begins
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return _nearest_sentence_end(text, start + period)


def _letterless_tail(text: str, shown: int) -> int:
    """Where the lines with no letter that end the text begin ("#", "# [2]", "```"), past what is
    shown: they wait for a line with words, so a loop of them never reaches the screen."""
    at = len(text)
    while at > shown:
        start = text.rfind("\n", 0, at - 1) + 1  # the line's start, maybe shown already
        if any(ch.isalpha() for ch in text[start:at]):
            break
        at = max(start, shown)
    return at


def _unfinished_sentence(text: str) -> int:
    """Where the sentence being written begins, once a first sentence is finished; before that,
    the end of the text (the first sentence streams as it comes). List numbers and citations
    end no sentence ("2." over a step)."""
    masked = _masked(text + " ")[:-1]  # a list number just written is followed by a space to come
    start = len(masked[:_sentence_starts(masked, complete=False)[-1]].rstrip())  # line breaks wait with it
    start += len(text[start:]) - len(text[start:].lstrip(" \t"))  # a space goes on
    return start if masked[:start].strip() else len(text)


def has_loop(text: str) -> bool:
    """Whether the guard would cut this text as a loop, streamed word by word."""
    guard = AnswerGuard(None)
    for piece in re.findall(r"\s*\S+", text):
        guard.feed(piece)
        if guard.reason:
            return True
    guard.flush()
    return bool(guard.reason)


def repeat_cut(text: str, complete: bool = True) -> int | None:
    """Where the text's first repeated sentence or run of REPEAT_WORDS words begins its second
    copy, or None. While the text is still streaming (complete=False) its last word and
    sentence may be unfinished, so they are not compared yet."""
    masked = _masked(text)
    words = [m for m in _WORD.finditer(masked) if complete or m.end() < len(masked)]
    starts = _sentence_starts(masked, complete)
    sentences = [(start, tuple(w.casefold() for w in _WORD.findall(masked[start:end])))
                 for start, end in zip(starts, starts[1:])]
    found = (_repeated_sentence(sentences), _repeated_run(words, starts), _third_of_a_template(sentences))
    return min((c for c in found if c is not None), default=None)


def _masked(text: str) -> str:
    """The text with what is not a word of a sentence (citations, list numbers) blanked out."""
    return _NOT_WORDS.sub(lambda m: " " * len(m.group()), text)


def _sentence_starts(masked: str, complete: bool) -> list[int]:
    """Where each finished sentence begins, and the end of the last one."""
    ends = [m.end() for m in REPEAT_END.finditer(masked)]
    if complete and masked[ends[-1] if ends else 0:].strip():
        ends.append(len(masked))
    return [0, *ends]


def _repeated_sentence(sentences: list[tuple[int, tuple[str, ...]]]) -> int | None:
    seen: set[tuple[str, ...]] = set()
    for start, words in sentences:
        if len(words) < MIN_SENTENCE_WORDS:
            continue
        if words in seen:
            return start
        seen.add(words)
    return None


def _third_of_a_template(sentences: list[tuple[int, tuple[str, ...]]]) -> int | None:
    """Where a sentence begins that two earlier ones each match but for one word."""
    seen: list[tuple[str, ...]] = []
    for start, words in sentences:
        if len(words) < TEMPLATE_WORDS:
            continue
        if sum(len(w) == len(words) and sum(a != b for a, b in zip(w, words)) == 1 for w in seen) >= 2:
            return start
        seen.append(words)
    return None


def _repeated_run(words: list[re.Match], starts: list[int]) -> int | None:
    seen: dict[tuple[str, ...], int] = {}
    folded = [w.group().casefold() for w in words]
    for i in range(len(words) - REPEAT_WORDS + 1):
        run = tuple(folded[i:i + REPEAT_WORDS])
        if run not in seen:
            seen[run] = i
            continue
        second, first = words[i].start(), words[seen[run]].start()
        sentence = max(s for s in starts if s <= second)
        return sentence if sentence > first else second
    return None


def _nearest_sentence_end(text: str, cut: int) -> int:
    """The sentence end nearest to `cut`: after a loop's first copy the text repeats it, so a
    sentence end of the loop lies on one side or the other."""
    ends = [m.end() for m in STREAM_END.finditer(text)]
    if not ends:
        return cut
    return min(ends, key=lambda end: (abs(end - cut), end))
