"""The chat: questions, streamed answers with their sources, and the input box.

    view = ChatView()
    view.attach(controller)                 # a workers.AssistantController
    view.citationClicked.connect(lambda citation: source_view.show_source(...))
    view.ask("How do I prime the pump?")

Tokens arrive faster than the eye: they are buffered and the answer is redrawn from the buffer
by a ~30 ms timer. An answer is Markdown written by a model, so it is rendered inertly: raw HTML
is shown as text (MarkdownNoHTML), images become their alt text before any layout could load
them, every link the model wrote is turned into plain text, no browser follows a link or loads
a resource, and the only links are our own "cite:N" ones (the [N] markers and the source list).
"""

from __future__ import annotations

import html
import logging
import math
import re
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QFont,
    QFontDatabase,
    QGuiApplication,
    QKeyEvent,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.answer.assistant import Citation
from engine.conversations import SavedAnswer, history, user_message
from engine.types import Passage

log = logging.getLogger(__name__)

FLUSH_MS = 30
MARKDOWN = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
            | QTextDocument.MarkdownFeature.MarkdownNoHTML)
WRAP = QTextOption()
WRAP.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
CITE_MARK = re.compile(r"\[(\d{1,2})\]")
NOT_FOUND_TITLE = "Not found in your manuals"
CAUTION = ("Parts of this answer are not in the cited passages; check the sources before "
           "relying on it.")
EMPTY_HINT = ("<h3>Ask a question about your manuals</h3>"
              "<p>Drop PDF manuals (or a folder of them) anywhere on this window, or use "
              "<b>Add documents…</b> (Ctrl+O). Answers cite the page they come from; click a "
              "citation to open it.</p>")


def page_label(passage: Passage) -> str:
    pages = passage.pages
    if len(pages) > 1:
        return f"pages {pages[0]}–{pages[-1]}"
    return f"page {passage.page}"


# -- safe rendering ---------------------------------------------------------------------------
class InertDocument(QTextDocument):
    """A document that loads no resource: nothing named in an answer is ever read."""

    def loadResource(self, type_, name):  # noqa: N802 (Qt's name)
        log.info("refused to load a resource named in an answer: %s", name.toString())
        return None


def render_answer(text: str, font: QFont, palette: QPalette, citations: dict[int, Citation] | None = None,
                  parent=None) -> InertDocument:
    """The answer's Markdown as an inert document: no HTML, no images, no links of the model's;
    with `citations`, its [N] markers become cite:N links."""
    doc = InertDocument(parent)
    doc.setDefaultFont(font)
    doc.setDocumentMargin(2)
    doc.setDefaultTextOption(WRAP)
    doc.setMarkdown(text, MARKDOWN)
    _make_inert(doc, font, palette)
    if citations:
        _link_citations(doc, citations, palette)
    return doc


def _make_inert(doc: QTextDocument, font: QFont, palette: QPalette) -> None:
    """Images -> their alt text, links -> plain text, code in the system's fixed font on a
    tinted background, code blocks wrapped. Runs before any layout, so no image is loaded."""
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families()
    tint = palette.color(QPalette.ColorRole.AlternateBase)
    edits = []  # (position, length, what, alt); applied from the end, so positions hold
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isImageFormat():
                alt = str(fmt.property(QTextFormat.Property.ImageAltText) or "").strip()
                edits.append((fragment.position(), fragment.length(), "image", alt))
            elif (fmt.isAnchor() or fmt.hasProperty(QTextFormat.Property.AnchorHref)
                  or _is_code(fmt)):
                edits.append((fragment.position(), fragment.length(), "restyle", ""))
            it += 1
        if block.blockFormat().nonBreakableLines() or block.blockFormat().hasProperty(
                QTextFormat.Property.BlockCodeFence):
            edits.append((block.position(), 0, "code block", ""))
        block = block.next()
    cursor = QTextCursor(doc)
    for position, length, what, alt in sorted(edits, key=lambda e: e[0], reverse=True):
        cursor.setPosition(position)
        if what == "code block":
            fmt = QTextBlockFormat(cursor.blockFormat())
            fmt.setNonBreakableLines(False)  # long lines wrap instead of hiding off the edge
            fmt.setBackground(tint)
            fmt.setLeftMargin(6)
            fmt.setRightMargin(6)
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            chars = QTextCharFormat()
            chars.setFontFamilies(fixed)
            cursor.mergeCharFormat(chars)
            continue
        cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        if what == "image":
            cursor.insertText(f"[image: {alt}]" if alt else "[image]", QTextCharFormat())
            continue
        fmt = cursor.charFormat()
        if fmt.isAnchor() or fmt.hasProperty(QTextFormat.Property.AnchorHref):
            fmt.setAnchor(False)
            fmt.clearProperty(QTextFormat.Property.AnchorHref)
            fmt.clearProperty(QTextFormat.Property.AnchorName)
            fmt.clearForeground()
            fmt.setFontUnderline(False)
        if _is_code(fmt):
            fmt.setFontFamilies(fixed)
            fmt.setBackground(tint)
        cursor.setCharFormat(fmt)


def _is_code(fmt: QTextCharFormat) -> bool:
    return fmt.fontFixedPitch() or "monospace" in (fmt.fontFamilies() or [])


def _link_citations(doc: QTextDocument, citations: dict[int, Citation], palette: QPalette) -> None:
    cursor = QTextCursor(doc)
    for match in reversed(list(CITE_MARK.finditer(doc.toPlainText()))):
        number = int(match.group(1))
        if number not in citations:
            continue
        cursor.setPosition(match.start())
        cursor.setPosition(match.end(), QTextCursor.MoveMode.KeepAnchor)
        if doc.findBlock(match.start()).blockFormat().nonBreakableLines():
            continue
        fmt = QTextCharFormat()
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"cite:{number}")
        fmt.setForeground(palette.color(QPalette.ColorRole.Link))
        fmt.setFontWeight(QFont.Weight.DemiBold)
        cursor.mergeCharFormat(fmt)


def append_sources(doc: QTextDocument, citations: list[Citation], heading: str, palette: QPalette) -> None:
    """The numbered source list under an answer, "[1] R-intro.pdf, page 12 — quote", each a
    cite:N link; written with the cursor API (no HTML is parsed)."""
    cursor = QTextCursor(doc)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    block = QTextBlockFormat()
    block.setTopMargin(12)
    block.setBottomMargin(2)
    bold = QTextCharFormat()
    bold.setFontWeight(QFont.Weight.Bold)
    if doc.isEmpty():
        cursor.setBlockFormat(block)
        cursor.setCharFormat(bold)
    else:
        cursor.insertBlock(block, bold)
    cursor.insertText(heading)
    item = QTextBlockFormat()
    item.setTopMargin(2)
    item.setBottomMargin(2)
    for citation in citations:
        p = citation.passage
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"cite:{citation.number}")
        link.setForeground(palette.color(QPalette.ColorRole.Link))
        link.setFontUnderline(True)
        cursor.insertBlock(item, QTextCharFormat())
        cursor.insertText(f"[{citation.number}] {p.document}, {page_label(p)}", link)
        if citation.quote:
            quote = QTextCharFormat()
            quote.setFontItalic(True)
            cursor.insertText(" — ", QTextCharFormat())
            cursor.insertText(f"“{citation.quote}”", quote)


def evidence_html(citations: list[Citation]) -> str:
    parts = []
    for citation in citations:
        p = citation.passage
        where = " › ".join(p.heading_path)
        text = html.escape(" ".join(p.text.split()))
        parts.append(f'<p style="margin:6px 0 0 0"><b>[{citation.number}] {html.escape(p.document)}, '
                     f'{html.escape(page_label(p))}</b>'
                     + (f' <span style="color:gray">{html.escape(where)}</span>' if where else "")
                     + f'</p><p style="margin:2px 0 6px 0">{text}</p>')
    return "".join(parts)


class SafeBrowser(QTextBrowser):
    """A read-only, auto-height text browser that follows no link and loads no resource. Its
    cite:N links emit citeClicked(N); every other link is ignored."""

    citeClicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setAcceptDrops(False)  # a drop anywhere goes to the window (documents), not here
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # long paths too
        self.viewport().setAutoFillBackground(False)
        self.anchorClicked.connect(self._on_anchor)
        self.refused: list[str] = []  # resources something asked us to load (never loaded)
        self._watch(self.document())

    def show_document(self, doc: QTextDocument) -> None:
        """Shows `doc` (an inert one); the editor owns it and deletes the previous one."""
        doc.setParent(self)
        self.setDocument(doc)
        self._watch(doc)
        self._fit()

    def loadResource(self, type_, name):  # noqa: N802 (Qt's name)
        self.refused.append(name.toString())
        return None

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(super().sizeHint().width(), self.height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def _watch(self, doc: QTextDocument) -> None:
        doc.documentLayout().documentSizeChanged.connect(self._fit)

    def _fit(self, *_args) -> None:
        doc = self.document()
        doc.setTextWidth(self.viewport().width())
        height = math.ceil(doc.size().height()) + 2 * self.frameWidth() + 2
        if height != self.height():
            self.setFixedHeight(height)

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == "cite" and url.path().isdigit():
            self.citeClicked.emit(int(url.path()))
        else:
            log.info("ignored a link in an answer: %s", url.toString())


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


class AnswerBubble(QFrame):
    """One answer: its notice (not found / caution / stopped / error), the rendered text, its
    numbered sources (cite: links) and, folded, the evidence passages."""

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
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
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
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.addWidget(self.status, 1)
        footer.addWidget(self.evidence_button)
        footer.addWidget(self.copy_button)
        footer.addWidget(self.regenerate_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 6)
        layout.setSpacing(4)
        layout.addWidget(self.notice)
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

    def set_passages(self, answerable: bool) -> None:
        self.state.answerable = answerable
        if answerable:
            self.set_status("Writing…")
        self._update_notice()

    def set_citations(self, citations) -> None:
        self.state.citations = tuple(citations)

    def finish(self, answer: str, stats) -> None:
        s = self.state
        s.text = answer
        s.answerable = stats.answerable
        s.well_supported = stats.well_supported or not stats.answerable
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
                           s.well_supported, s.stopped, s.meta)

    # -- drawing ----------------------------------------------------------------------------
    def render(self) -> None:
        s = self.state
        cited = {c.number: c for c in s.citations} if s.finished else None
        text = s.text
        if s.answerable is False and s.finished:
            text = ""  # the notice says it; the nearest passages follow
        doc = render_answer(text, self.browser.font(), self.palette(), cited)
        if s.finished and s.citations:
            if s.answerable is False:
                heading = "Nearest passages"
            elif any(c.cited for c in s.citations):
                heading = "Sources"
            else:  # the model cited no number: these are what it was given
                heading = "Passages the answer was written from"
            append_sources(doc, list(s.citations), heading, self.palette())
            self.evidence.show_document(_html_document(evidence_html(list(s.citations)),
                                                       self._small_font(), self.palette()))
            self.evidence_button.show()
            if s.answerable is False and not self.evidence_button.isChecked():
                self.evidence_button.setChecked(True)
        if not text and not (s.finished and s.citations):
            self.browser.setVisible(not s.finished)
        else:
            self.browser.setVisible(True)
        self.browser.show_document(doc)

    def changeEvent(self, event) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.PaletteChange) and hasattr(self, "state"):
            self.render()  # the documents carry the font and the link and code colours

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
            self._notice("notFound", f"<b>{NOT_FOUND_TITLE}.</b> Nothing in the indexed manuals "
                         "answers this; the nearest passages are below, in case they help.")
        elif s.stopped:
            self._notice("stopped", "<b>Stopped.</b> The answer is incomplete.")
        elif s.finished and not s.well_supported:
            self._notice("caution", "<b>Check the sources.</b> " + html.escape(CAUTION))
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

    def _on_cite(self, number: int) -> None:
        for citation in self.state.citations:
            if citation.number == number:
                self.citationClicked.emit(citation)
                return
        log.info("no citation [%d] in this answer", number)


def _html_document(markup: str, font: QFont, palette: QPalette) -> InertDocument:
    doc = InertDocument()
    doc.setDefaultFont(font)
    doc.setDocumentMargin(2)
    doc.setDefaultTextOption(WRAP)
    doc.setHtml(markup)  # our own markup: every dynamic string in it is escaped
    return doc


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
        self.setPlaceholderText("Ask a question about your manuals…")
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
        if event.type() == event.Type.FontChange:
            self._fit()

    def _fit(self, *_args) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, min(self.MAX_LINES, int(self.document().size().height())))
        margins = self.contentsMargins()
        height = lines * line + 2 * int(self.document().documentMargin()) + margins.top() + margins.bottom() + 6
        self.setFixedHeight(height)


# -- the view ---------------------------------------------------------------------------------
class ChatView(QWidget):
    """The transcript and the input box of one conversation."""

    citationClicked = Signal(object)  # Citation
    conversationChanged = Signal()  # a turn ended (answered, stopped, failed): save it
    answerFinished = Signal(object)  # DoneEvent, for the status bar
    busyChanged = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatView")
        self._controller = None
        self._ready = True
        self._not_ready_reason = ""
        self._busy = False
        self._buffer: list[str] = []
        self._current: AnswerBubble | None = None
        self._rows: list[tuple[dict | None, QWidget]] = []  # (message, bubble); None while streaming
        self._follow = True

        self.flush_timer = QTimer(self)
        self.flush_timer.setInterval(FLUSH_MS)
        self.flush_timer.timeout.connect(self.flush)

        self.transcript = QWidget()
        self.transcript.setObjectName("transcript")
        self._column = QVBoxLayout(self.transcript)
        self._column.setContentsMargins(16, 16, 16, 16)
        self._column.setSpacing(12)
        self.empty = QLabel(EMPTY_HINT)
        self.empty.setObjectName("emptyHint")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._column.addWidget(self.empty, 1)
        self._column.addStretch(1)
        self._set_empty(True)
        self.scroll = QScrollArea()
        self.scroll.setObjectName("transcriptScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.transcript)
        self.scroll.setAccessibleName("Conversation")
        self.scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        bar = self.scroll.verticalScrollBar()
        bar.rangeChanged.connect(self._keep_at_bottom)
        bar.valueChanged.connect(self._on_scrolled)

        self.input = MessageInput()
        self.input.submitted.connect(self.send)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setAccessibleName("Send question")
        self.send_button.setToolTip("Send the question (Enter)")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setAccessibleName("Stop answer")
        self.stop_button.setToolTip("Stop the answer (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.hide()
        self.hint = QLabel()
        self.hint.setObjectName("composerHint")
        self.hint.hide()

        composer = QFrame()
        composer.setObjectName("composer")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.input, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignBottom)
        box = QVBoxLayout(composer)
        box.setContentsMargins(12, 8, 12, 10)
        box.addWidget(self.hint)
        box.addLayout(row)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.scroll, 1)
        layout.addWidget(composer)
        QWidget.setTabOrder(self.input, self.send_button)
        QWidget.setTabOrder(self.send_button, self.stop_button)
        self.setFocusProxy(self.input)

    # -- wiring -----------------------------------------------------------------------------
    def attach(self, controller) -> None:
        """Answers come from `controller` (a workers.AssistantController)."""
        self._controller = controller
        controller.passages.connect(self._on_passages)
        controller.text.connect(self._on_text)
        controller.citations.connect(self._on_citations)
        controller.done.connect(self._on_done)
        controller.error.connect(self._on_error)

    def set_ready(self, ready: bool, reason: str = "") -> None:
        """Whether questions can be sent now (False while the model is being prepared)."""
        self._ready = ready
        self._not_ready_reason = reason
        self.hint.setText(reason)
        self.hint.setVisible(bool(reason) and not ready)
        self._update_buttons()

    # -- state ------------------------------------------------------------------------------
    def is_busy(self) -> bool:
        return self._busy

    def messages(self) -> list[dict]:
        """The conversation's messages as ConversationStore keeps them."""
        out = []
        for message, bubble in self._rows:
            if message is not None:
                out.append(message)
            elif isinstance(bubble, AnswerBubble) and bubble.state.finished:
                out.append(bubble.saved().to_message())
        return out

    def set_messages(self, messages: list[dict]) -> None:
        """Shows a saved conversation (stopping an answer in progress)."""
        self.stop()
        self.clear()
        for message in messages:
            role = message.get("role")
            if role == "user":
                self._add_row(dict(message), UserBubble(str(message.get("content") or "")))
            elif role in ("assistant", "error"):
                bubble = AnswerBubble.showing(SavedAnswer.from_message(message))
                self._connect_bubble(bubble)
                self._add_row(dict(message), bubble)
        self._mark_last()
        self._follow = True
        self._scroll_to_bottom()

    def clear(self) -> None:
        for _message, widget in self._rows:
            self._remove(widget)
        self._rows.clear()
        self._current = None
        self._set_empty(True)

    def answers(self) -> list[AnswerBubble]:
        return [w for _m, w in self._rows if isinstance(w, AnswerBubble)]

    def last_answer(self) -> AnswerBubble | None:
        answers = self.answers()
        return answers[-1] if answers else None

    # -- actions ----------------------------------------------------------------------------
    def send(self) -> bool:
        question = self.input.toPlainText().strip()
        if not question or not self.ask(question):
            return False
        self.input.clear()
        return True

    def ask(self, question: str) -> bool:
        """Shows `question` and starts its answer; False when busy or not ready."""
        question = question.strip()
        if not question or self._busy or not self._ready or self._controller is None:
            return False
        turns = history(self.messages())
        self._add_row(user_message(question), UserBubble(question))
        self._start(question, turns)
        return True

    def regenerate(self) -> bool:
        """Asks the last question again, replacing its answer."""
        if self._busy or not self._ready or self._controller is None:
            return False
        last_user = max((i for i, (m, _w) in enumerate(self._rows) if m and m.get("role") == "user"),
                        default=None)
        if last_user is None:
            return False
        for _message, widget in self._rows[last_user + 1:]:
            self._remove(widget)
        del self._rows[last_user + 1:]
        question = self._rows[last_user][0]["content"]
        turns = history([m for m, _w in self._rows[:last_user] if m is not None])
        self._start(question, turns)
        return True

    def stop(self) -> bool:
        """Stops the answer in progress: what was shown stays, nothing more is added."""
        if not self._busy or self._controller is None:
            return False
        self._controller.stop()
        self.flush()
        bubble = self._current
        self._end_turn()
        if bubble is not None:
            bubble.mark_stopped()
            self._store_turn(bubble)
        return True

    def copy_last_answer(self) -> bool:
        bubble = self.last_answer()
        if bubble is None or not bubble.state.text:
            return False
        bubble.copy()
        return True

    def focus_last_answer(self) -> bool:
        bubble = self.last_answer()
        if bubble is None:
            return False
        bubble.focus_answer()
        self.scroll.ensureWidgetVisible(bubble)
        return True

    def focus_input(self) -> None:
        self.input.setFocus(Qt.FocusReason.ShortcutFocusReason)

    # -- the stream -------------------------------------------------------------------------
    def flush(self) -> None:
        """Appends the buffered text to the answer (the timer calls this every ~30 ms)."""
        if self._buffer and self._current is not None:
            text = "".join(self._buffer)
            self._buffer.clear()
            self._current.append(text)
        else:
            self._buffer.clear()

    def _start(self, question: str, turns: list[dict]) -> None:
        bubble = AnswerBubble()
        self._connect_bubble(bubble)
        self._add_row(None, bubble)
        self._current = bubble
        self._buffer.clear()
        self._set_busy(True)
        self._follow = True
        self.flush_timer.start()
        self._mark_last()
        self._controller.ask(question, turns)

    def _on_passages(self, event) -> None:
        if self._current is not None:
            self._current.set_passages(event.answerable)

    def _on_text(self, text: str) -> None:
        if self._current is not None:
            self._buffer.append(text)

    def _on_citations(self, citations) -> None:
        if self._current is not None:
            self._current.set_citations(citations)

    def _on_done(self, event) -> None:
        bubble = self._current
        if bubble is None:
            return
        self._buffer.clear()  # DoneEvent.answer is the final text
        self._end_turn()
        bubble.finish(event.answer, event.stats)
        self._store_turn(bubble)
        self.answerFinished.emit(event)

    def _on_error(self, message: str) -> None:
        bubble = self._current
        if bubble is None:
            return
        self.flush()
        self._end_turn()
        bubble.fail(message)
        self._store_turn(bubble)

    def _end_turn(self) -> None:
        self.flush_timer.stop()
        self._current = None
        self._set_busy(False)

    def _store_turn(self, bubble: AnswerBubble) -> None:
        for i, (message, widget) in enumerate(self._rows):
            if widget is bubble:
                self._rows[i] = (bubble.saved().to_message(), widget)
        self._mark_last()
        self.conversationChanged.emit()

    # -- layout helpers ---------------------------------------------------------------------
    def _add_row(self, message: dict | None, bubble: QWidget) -> None:
        self._set_empty(False)
        row = QWidget()
        row.setObjectName("messageRow")
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        if isinstance(bubble, UserBubble):
            line.addStretch(1)
            line.addWidget(bubble, 0)
            bubble.setMaximumWidth(max(320, int(self.scroll.viewport().width() * 0.75)))
        else:
            line.addWidget(bubble, 1)
        # before the trailing stretch
        self._column.insertWidget(self._column.count() - 1, row)
        self._rows.append((message, bubble))
        bubble.row = row

    def _set_empty(self, empty: bool) -> None:
        """The hint fills the transcript when there is no message; else messages start at the top."""
        self.empty.setVisible(empty)
        self._column.setStretch(self._column.indexOf(self.empty), 1 if empty else 0)
        self._column.setStretch(self._column.count() - 1, 0 if empty else 1)

    def _remove(self, bubble: QWidget) -> None:
        row = bubble.row
        self._column.removeWidget(row)
        row.hide()
        row.deleteLater()

    def _connect_bubble(self, bubble: AnswerBubble) -> None:
        bubble.citationClicked.connect(self._on_citation)
        bubble.regenerateRequested.connect(self.regenerate)

    def _mark_last(self) -> None:
        answers = self.answers()
        for bubble in answers:
            bubble.set_last(bubble is answers[-1] and not self._busy)

    def _on_citation(self, citation) -> None:
        self.citationClicked.emit(citation)

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self._update_buttons()
            self.busyChanged.emit(busy)

    def _update_buttons(self) -> None:
        self.send_button.setVisible(not self._busy)
        self.stop_button.setVisible(self._busy)
        self.send_button.setEnabled(self._ready)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        width = max(320, int(self.scroll.viewport().width() * 0.75))
        for _m, widget in self._rows:
            if isinstance(widget, UserBubble):
                widget.setMaximumWidth(width)

    def _on_scrolled(self, value: int) -> None:
        bar = self.scroll.verticalScrollBar()
        self._follow = value >= bar.maximum() - 8

    def _keep_at_bottom(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.scroll.verticalScrollBar().setValue(maximum)

    def _scroll_to_bottom(self) -> None:
        bar = self.scroll.verticalScrollBar()
        bar.setValue(bar.maximum())

