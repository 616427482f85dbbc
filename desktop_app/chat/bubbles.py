"""The chat's messages: the question, the answer as it streams in (with its notice, the manual's
own sentences first, sources and evidence), and the input box.

    bubble = AnswerBubble()
    bubble.set_lead(quotes)                     # the lead sentences, before the model writes
    bubble.append("Fill the casing ")          # as pieces arrive
    bubble.set_citations(citations); bubble.finish(answer, stats, sentences)   # marks the sentences
    AnswerBubble.showing(SavedAnswer.from_message(message))   # an answer of a saved conversation

A refusal shows its notice and, beneath it, the nearest passages one line each; a click on a
line opens its page and unfolds the passage's text.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFont, QGuiApplication, QKeyEvent, QPalette, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
)

from desktop_app.chat.render import (
    NEAREST_TITLE,
    SafeBrowser,
    append_sources,
    evidence_html,
    html_document,
    mark_sentences,
    nearest_html,
    ocr_tag_html,
    render_answer,
)
from desktop_app.theme import highlight_colour
from engine.answer.grounding import not_mentioned
from engine.answer.sentence_check import NO_TEXT_OF_ITS_OWN, needs_caution, no_text_of_its_own
from engine.conversations import SavedAnswer
from engine.types import CheckedSentence, Citation, Quote

log = logging.getLogger(__name__)

NOT_FOUND_TITLE = "Not found in your manuals"
LEAD_TITLE = "From the manuals"
PLACEHOLDER = "Ask a question about your manuals…"
KIOSK_PLACEHOLDER = "Ask a question about the manuals…"  # an operator's station: not their manuals
CAUTION = ("The model's answer below the quotes may not be what the manuals say; rely on the "
           "quotes and the sources.")

# -- messages ---------------------------------------------------------------------------------
class UserBubble(QFrame):
    def __init__(self, text: str, parent=None):
        super().__init__(parent)
        self.setObjectName("userBubble")
        self.text = text
        label = QLabel(text)
        label.setObjectName("userText")
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setAccessibleName("Your question")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.addWidget(label)
        self.label = label


@dataclass
class AnswerState:
    text: str = ""
    citations: tuple[Citation, ...] = ()
    answerable: bool | None = None  # None until the passages are known
    well_supported: bool = True
    stopped: bool = False
    error: str = ""
    finished: bool = False
    meta: str = ""
    lead: tuple[Quote, ...] = ()
    sentences: tuple[CheckedSentence, ...] = ()  # marked once the answer is finished
    unknown_names: tuple[str, ...] = ()  # a refusal's words that no manual contains


class AnswerBubble(QFrame):
    """One answer: its notice (not found / caution / stopped / error), the manual's own sentences
    that answer it (each a link to its page), the rendered text, its numbered sources (cite:
    links) and, folded, the evidence passages."""

    citationClicked = Signal(object)  # Citation
    regenerateRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("answerBubble")
        self.state = AnswerState()
        self.notice = QLabel()
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setTextFormat(Qt.TextFormat.RichText)
        self.notice.hide()
        self.lead_view = SafeBrowser()  # its cite:N links are the Nth lead sentence
        self.lead_view.setObjectName("lead")
        self.lead_view.setAccessibleName(LEAD_TITLE)
        self.lead_view.citeClicked.connect(self._on_lead_clicked)
        self.lead_view.hide()
        self.nearest = SafeBrowser()  # a refusal's nearest passages; cite:N unfolds and opens the Nth
        self.nearest.setObjectName("nearest")
        self.nearest.setAccessibleName(NEAREST_TITLE)
        self.nearest.citeClicked.connect(self._on_nearest_clicked)
        self.nearest.hide()
        self._unfolded: set[int] = set()  # the nearest passages shown in full
        self.browser = SafeBrowser()
        self.browser.setAccessibleName("Answer")
        self.browser.citeClicked.connect(self._on_cite)
        self.evidence = SafeBrowser()
        self.evidence.setObjectName("evidence")
        self.evidence.setAccessibleName("Evidence passages")
        self.evidence.citeClicked.connect(self._on_cite)
        self.evidence.hide()
        self.status = QLabel()
        self.status.setObjectName("answerMeta")
        # wraps beside the buttons in a narrow bubble, rather than being cut ("· first t")
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.status.setMinimumWidth(1)
        self.evidence_button = QToolButton()
        self.evidence_button.setText("Show evidence")
        self.evidence_button.setCheckable(True)
        self.evidence_button.setAccessibleName("Show the evidence passages")
        self.evidence_button.toggled.connect(self._show_evidence)
        self.evidence_button.hide()
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy this answer (Ctrl+Shift+C for the last one)")
        self.copy_button.setAccessibleName("Copy answer")
        self.copy_button.clicked.connect(self.copy)
        self.regenerate_button = QToolButton()
        self.regenerate_button.setText("Regenerate")
        self.regenerate_button.setToolTip("Ask the last question again (Ctrl+R)")
        self.regenerate_button.setAccessibleName("Regenerate answer")
        self.regenerate_button.clicked.connect(self._regenerate)
        self.regenerate_button.hide()
        for button in (self.evidence_button, self.copy_button, self.regenerate_button):
            button.setAutoRaise(True)
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        # The figures get a row of their own: beside the buttons a narrow bubble or a large font
        # (the kiosk's) left them a few pixels, and they were cut off.
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addStretch(1)
        buttons.addWidget(self.evidence_button)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.regenerate_button)
        footer = QVBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(0)
        footer.addWidget(self.status)
        footer.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 6)
        layout.setSpacing(4)
        layout.addWidget(self.notice)
        layout.addWidget(self.nearest)
        layout.addWidget(self.lead_view)
        layout.addWidget(self.browser)
        layout.addWidget(self.evidence)
        layout.addLayout(footer)
        self.set_status("Searching your manuals…")
        self.render()

    # -- building up ------------------------------------------------------------------------
    def append(self, text: str) -> None:
        if text:
            self.state.text += text
            self.render()

    def set_passages(self, answerable: bool, unknown_names: tuple[str, ...] = ()) -> None:
        """Whether the gate let the question through; if not, the words no manual contains."""
        self.state.answerable = answerable
        self.state.unknown_names = tuple(unknown_names)
        self.set_status("Writing…" if answerable else "")
        self._update_notice()
        self.render()

    def set_citations(self, citations) -> None:
        self.state.citations = tuple(citations)

    def set_lead(self, quotes) -> None:
        """Shows the lead sentences at once, above the answer still to come."""
        self.state.lead = tuple(quotes)
        self._render_lead()

    def finish(self, answer: str, stats, sentences: tuple[CheckedSentence, ...] = ()) -> None:
        """The final text (DoneEvent.answer) with its checked sentences, marked now."""
        s = self.state
        s.text = answer
        s.sentences = tuple(sentences)
        s.answerable = stats.answerable
        s.unknown_names = tuple(stats.relevance.unknown_names) or s.unknown_names
        # an address or command no passage holds calls for the caution however well the rest is
        # supported; saved with the message, so a reopened conversation shows it too
        s.well_supported = not needs_caution(answer, s.sentences, stats.well_supported) or not stats.answerable
        s.finished = True
        s.meta = answer_meta(stats)
        self.set_status(s.meta)
        self._update_notice()
        self.render()

    def mark_stopped(self) -> None:
        self.state.stopped = True
        self.state.finished = True
        self.set_status("Stopped")
        self._update_notice()
        self.render()

    def fail(self, message: str) -> None:
        self.state.error = message
        self.state.finished = True
        self.set_status("")
        self._update_notice()
        self.render()

    def copy(self) -> None:
        """Puts the answer's text (Markdown, as the model wrote it) on the clipboard."""
        QGuiApplication.clipboard().setText(self.state.text)

    def _regenerate(self) -> None:
        self.regenerateRequested.emit()

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_last(self, last: bool) -> None:
        self.regenerate_button.setVisible(last and self.state.finished)

    # -- saved ------------------------------------------------------------------------------
    @classmethod
    def showing(cls, saved: SavedAnswer, parent=None) -> "AnswerBubble":
        """A finished bubble showing an answer of a saved conversation."""
        bubble = cls(parent)
        if saved.error:
            bubble.fail(saved.error)
            return bubble
        s = bubble.state
        s.text = saved.text
        s.citations = saved.citations
        s.answerable = saved.answerable
        s.well_supported = saved.well_supported
        s.stopped = saved.stopped
        s.finished = True
        s.meta = saved.meta
        s.lead = saved.lead
        s.sentences = saved.sentences
        s.unknown_names = saved.unknown_names
        bubble._render_lead()
        bubble.set_status("Stopped" if s.stopped else s.meta)
        bubble._update_notice()
        bubble.render()
        return bubble

    def saved(self) -> SavedAnswer:
        """The answer as the conversation keeps it."""
        s = self.state
        if s.error:
            return SavedAnswer(error=s.error)
        return SavedAnswer(s.text, s.citations, bool(s.answerable) if s.answerable is not None else True,
                           s.well_supported, s.stopped, s.meta, lead=s.lead, sentences=s.sentences,
                           unknown_names=s.unknown_names)

    # -- drawing ----------------------------------------------------------------------------
    def render(self) -> None:
        s = self.state
        if s.answerable is False:  # the notice says it; the nearest passages follow, folded
            self.browser.hide()
            self.evidence_button.hide()
            self.evidence.hide()
            self._render_nearest()
            return
        self.nearest.hide()
        cited = {c.number: c for c in s.citations} if s.finished else None
        doc = render_answer(s.text, self.browser.font(), self.palette(), cited)
        if s.finished and s.sentences:  # while it streams the text shows plainly
            mark_sentences(doc, s.text, s.sentences, cited or {}, self.palette())
        if s.finished and s.citations:
            if any(c.cited for c in s.citations):
                heading = "Sources"
            else:  # the model cited no number: these are what it was given
                heading = "Passages the answer was written from"
            append_sources(doc, list(s.citations), heading, self.palette())
            self.evidence.show_document(html_document(evidence_html(list(s.citations)),
                                                       self._small_font(), self.palette()))
            self.evidence_button.show()
        self.browser.setVisible(bool(s.text) or not s.finished or bool(s.citations))
        self.browser.show_document(doc)

    def _render_nearest(self) -> None:
        citations = list(self.state.citations) if self.state.finished else []
        self.nearest.setVisible(bool(citations))
        if citations:
            self.nearest.show_document(html_document(nearest_html(citations, self._unfolded, self.palette()),
                                                     self.browser.font(), self.palette()))

    def _render_lead(self) -> None:
        lead = self.state.lead
        self.lead_view.setVisible(bool(lead))
        if lead:
            self.lead_view.show_document(html_document(lead_html(lead, self.palette()), self.browser.font(), self.palette()))

    def changeEvent(self, event) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.PaletteChange) and hasattr(self, "state"):
            self._render_lead()
            self.render()  # the nearest passages too  # the documents carry the font and the link and code colours

    def focus_answer(self) -> None:
        """Keyboard focus on the answer: Tab then moves through its citations, Enter opens one."""
        self.browser.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _small_font(self) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.9))
        return font

    def _update_notice(self) -> None:
        s = self.state
        if s.error:
            self._notice("error", "<b>The answer failed.</b> " + html.escape(s.error))
        elif s.answerable is False:
            self._notice("notFound", not_found_html(s.unknown_names, bool(s.citations) or not s.finished))
        elif s.stopped:
            self._notice("stopped", "<b>Stopped.</b> The answer is incomplete.")
        elif s.finished and not s.well_supported:
            self._notice("caution", "<b>Check the sources.</b> " + html.escape(CAUTION))
        elif s.finished and no_text_of_its_own(s.text, bool(s.answerable)):
            self._notice("noText", html.escape(NO_TEXT_OF_ITS_OWN, quote=False))
        else:
            self.notice.hide()

    def _notice(self, kind: str, rich_text: str) -> None:
        self.notice.setProperty("kind", kind)
        self.notice.setText(rich_text)
        self.notice.setAccessibleName(self.notice.text())
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.show()

    def _show_evidence(self, shown: bool) -> None:
        self.evidence.setVisible(shown)
        self.evidence_button.setText("Hide evidence" if shown else "Show evidence")

    def _on_lead_clicked(self, index: int) -> None:
        """The Nth lead sentence opens its page with just that sentence marked."""
        if 1 <= index <= len(self.state.lead):
            self.citationClicked.emit(Citation.of_quote(self.state.lead[index - 1]))

    def _on_nearest_clicked(self, number: int) -> None:
        """A nearest passage's line: unfolds its text and opens its page; a second click folds it."""
        citation = next((c for c in self.state.citations if c.number == number), None)
        if citation is None:
            log.info("no nearest passage [%d] in this answer", number)
            return
        opening = number not in self._unfolded
        self._unfolded ^= {number}
        self._render_nearest()
        self._focus_link(self.nearest, f"cite:{number}")
        if opening:
            self.citationClicked.emit(citation)

    @staticmethod
    def _focus_link(browser: SafeBrowser, href: str) -> None:
        """Keeps the keyboard on the link just used after its document was redrawn: selected
        (the focused link's look) when followed from the keyboard, else just after it, so Tab
        goes on to the next one either way."""
        doc = browser.document()
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            span = None  # the link's [start, end): its text may be several fragments
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.charFormat().anchorHref() == href:
                    end = fragment.position() + fragment.length()
                    span = (span[0] if span else fragment.position(), end)
                elif span:
                    break
                it += 1
            if span:
                cursor = QTextCursor(doc)
                cursor.setPosition(span[0] if browser.keyboard_used else span[1])
                cursor.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
                browser.setTextCursor(cursor)
                return
            block = block.next()

    def _on_cite(self, number: int) -> None:
        for citation in self.state.citations:
            if citation.number == number:
                self.citationClicked.emit(citation)
                return
        log.info("no citation [%d] in this answer", number)


def lead_html(quotes, palette=None) -> str:
    """The lead's quotes, each with a cite:N link (N: its place in the lead) naming its document
    and page, and an "OCR" tag when that page was a scan; every string from a manual is escaped.
    Shown with what it needs (a table row under its header, beside its neighbours), a quote's
    own unit is in bold, the question's words are marked as in the source view, and a row keeps
    its line."""
    lines = [f'<p style="margin:0 0 2px 0"><b>{LEAD_TITLE}</b></p>']
    marker = highlight_colour(QGuiApplication.instance()).name()
    for index, quote in enumerate(quotes, 1):
        where = html.escape(f"{quote.document}, {quote.passage.pages_text((quote.page,))}")
        tag = ocr_tag_html(palette or QPalette()) if quote.page in quote.passage.ocr_pages else ""
        lines.append(f'<p style="margin:2px 0 2px 0">\u201c{quote_html(quote, marker)}\u201d '
                     f'<a href="cite:{index}">[{quote.number}] {where}</a>{tag}</p>')
    return "".join(lines)


def quote_html(quote, marker: str = "") -> str:
    """A quote's text, escaped, its lines kept, its own unit in bold when it is shown with more,
    and the question's words on a marker colour (`marker`, a CSS colour; none: not marked)."""
    text = quote.text
    focus = quote.focus if quote.focus and quote.focus != (0, len(text)) else (0, 0)
    marks = [(a, b) for a, b in quote.marks if 0 <= a < b <= len(text)] if marker else []
    cuts = sorted({0, len(text), *focus, *(i for mark in marks for i in mark)})
    parts = []
    for start, end in zip(cuts, cuts[1:]):
        piece = html.escape(text[start:end]).replace("\n", "<br>")
        if any(a <= start and end <= b for a, b in marks):
            piece = f'<span style="background-color:{marker}">{piece}</span>'
        if focus[0] <= start and end <= focus[1]:
            piece = f"<b>{piece}</b>"
        parts.append(piece)
    return "".join(parts)


def not_found_html(unknown_names: tuple[str, ...], passages_below: bool) -> str:
    """The refusal's notice: it names the question's words that no manual mentions."""
    parts = [f"<b>{NOT_FOUND_TITLE}.</b>"]
    if unknown_names:
        parts.append(html.escape(not_mentioned(unknown_names)))
    else:
        parts.append("Nothing in the indexed manuals answers this.")
    if passages_below:
        parts.append("The nearest passages are below, in case they help.")
    return " ".join(parts)


def answer_meta(stats) -> str:
    if not stats.answerable:
        return ""
    parts = []
    speed = tokens_per_s(stats)
    if stats.new_tokens and speed:
        parts.append(f"{stats.new_tokens} tokens · {speed:.1f} tokens/s")
    if stats.time_to_first_token_s is not None:
        parts.append(f"first token {stats.time_to_first_token_s:.1f} s")
    return " · ".join(parts)


def tokens_per_s(stats) -> float | None:
    """The model's writing speed after its first token (the prompt's reading is not in it)."""
    return stats.tokens_per_s or None


# -- the input box ----------------------------------------------------------------------------
class MessageInput(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line; grows with its text up to a few lines."""

    submitted = Signal()
    MAX_LINES = 6

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("messageInput")
        self.setPlaceholderText(PLACEHOLDER)
        self.setToolTip("Enter sends the question; Shift+Enter starts a new line")
        self.setAccessibleName("Question")
        self.setAccessibleDescription("Type a question; Enter sends it, Shift+Enter starts a new line")
        self.setTabChangesFocus(True)
        self.setAcceptDrops(False)  # a dropped file is for indexing (the window takes it)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        if enter:  # Shift+Enter: a new paragraph, not a line separator
            self.textCursor().insertText("\n")
            return
        super().keyPressEvent(event)

    def changeEvent(self, event) -> None:  # noqa: N802
        super().changeEvent(event)
        # a style sheet's padding changes the margins too: fitted without it, the empty box
        # showed a scroll bar
        if event.type() in (event.Type.FontChange, event.Type.StyleChange):
            self._fit()

    def _fit(self, *_args) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, min(self.MAX_LINES, int(self.document().size().height())))
        margins = self.contentsMargins()
        height = lines * line + 2 * int(self.document().documentMargin()) + margins.top() + margins.bottom() + 6
        self.setFixedHeight(height)
