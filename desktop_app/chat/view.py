"""The chat: questions, streamed answers with their sources, and the input box.

    view = ChatView()
    view.attach(controller)                 # a controllers.assistant.AssistantController
    view.citationClicked.connect(lambda citation: source_view.show_citation(citation))
    view.ask("How do I prime the pump?")

Tokens arrive faster than the eye: they are buffered and the answer is redrawn from the buffer
by a ~30 ms timer. The bubbles are in chat/bubbles.py, the inert rendering in chat/render.py.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from desktop_app.chat.bubbles import KIOSK_PLACEHOLDER, PLACEHOLDER, AnswerBubble, MessageInput, UserBubble
from engine.answer.assistant import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    LeadEvent,
    PassagesEvent,
    TextEvent,
)
from engine.conversations import SavedAnswer, history, user_message

log = logging.getLogger(__name__)

FLUSH_MS = 30
WELCOME_CHARS = 72  # the welcome text's longest line, in average characters
EMPTY_HINT = ("<h3>Ask a question about your manuals</h3>"
              "<p>Drop PDF manuals (or a folder of them) anywhere on this window, or use "
              "<b>Add documents…</b> (Ctrl+O). Answers cite the page they come from; click a "
              "citation to open it.</p>")
READY_HINT = ("<h3>Ask a question about your manuals</h3>"
              "<p>{documents} indexed. Type a question below; the answer cites the pages it "
              "comes from: click a citation to open the page. More manuals can be dropped on "
              "the window at any time.</p>")
KIOSK_HINT = ("<h3>Ask a question about the manuals</h3>"
              "<p>Type your question below. The answer cites the pages it comes from: touch a "
              "citation to open the page.</p>")
KIOSK_EMPTY_HINT = ("<h3>No manuals are installed yet</h3>"
                    "<p>Please ask the administrator to install the manuals for this station.</p>")


def welcome_text(documents: int, kiosk: bool) -> str:
    """What the empty conversation says: how to add manuals while there are none; how to ask
    once there are; on a kiosk, where adding is locked, never to drop files or press Ctrl+O."""
    if kiosk:
        return KIOSK_HINT if documents else KIOSK_EMPTY_HINT
    if not documents:
        return EMPTY_HINT
    return READY_HINT.format(documents="One document is" if documents == 1 else f"{documents} documents are")



# -- the view ---------------------------------------------------------------------------------
class ChatView(QWidget):
    """The transcript and the input box of one conversation."""

    citationClicked = Signal(object)  # Citation
    conversationChanged = Signal()  # a turn ended (answered, stopped, failed): save it
    answerFinished = Signal(object)  # DoneEvent, for the status bar
    busyChanged = Signal(bool)
    regenerateAvailable = Signal(bool)  # whether there is a question to ask again, now

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
        self._follow = True  # the view rests where _resting_place() says, until the person scrolls
        self._placing = False  # True while the view scrolls itself
        self._documents = 0  # ready documents, for the welcome text
        self._kiosk = False
        self._can_regenerate = False

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
        self._column.addWidget(self.empty, 1, Qt.AlignmentFlag.AlignHCenter)
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
        self.scroll.viewport().installEventFilter(self)  # its width, not the view's, sets the lines
        bar = self.scroll.verticalScrollBar()
        bar.rangeChanged.connect(self._keep_in_place)
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
        controller.answerEvent.connect(self.on_event)

    def set_documents(self, ready: int) -> None:
        """How many documents are ready: the welcome text says how to add or how to ask."""
        self._documents = ready
        self.empty.setText(welcome_text(self._documents, self._kiosk))
        self._fit_welcome()

    def set_kiosk(self, kiosk: bool) -> None:
        """On a kiosk the welcome text never mentions adding files (it is locked there), and
        answers offer no Copy (there is nobody's clipboard to paste into)."""
        self._kiosk = kiosk
        self.empty.setText(welcome_text(self._documents, self._kiosk))
        self._fit_welcome()
        self.input.setPlaceholderText(KIOSK_PLACEHOLDER if kiosk else PLACEHOLDER)
        for bubble in self.answers():
            bubble.copy_button.setVisible(not kiosk)

    def can_regenerate(self) -> bool:
        """A question was asked in this conversation and none is being answered."""
        has_question = any(m and m.get("role") == "user" for m, _w in self._rows)
        return has_question and not self._busy and self._ready and self._controller is not None

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
        self._keep_in_place()

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

    def on_event(self, event) -> None:
        """An event of the answer being written (engine.answer.assistant's types)."""
        if isinstance(event, PassagesEvent):
            self._on_passages(event)
        elif isinstance(event, LeadEvent):
            self._on_lead(event.quotes)
        elif isinstance(event, TextEvent):
            self._on_text(event.text)
        elif isinstance(event, CitationsEvent):
            self._on_citations(event.citations)
        elif isinstance(event, DoneEvent):
            self._on_done(event)
        elif isinstance(event, ErrorEvent):
            self._on_error(event.message)

    def _on_passages(self, event: PassagesEvent) -> None:
        if self._current is not None:
            self._current.set_passages(event.answerable, event.relevance.unknown_names)

    def _on_lead(self, quotes) -> None:
        if self._current is not None:
            self._current.set_lead(quotes)  # at once, not through the text buffer

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
        bubble.finish(event.answer, event.stats, event.sentences)
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
        self._update_regenerate()
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
        bubble.copy_button.setVisible(not self._kiosk)

    def _mark_last(self) -> None:
        answers = self.answers()
        for bubble in answers:
            bubble.set_last(bubble is answers[-1] and not self._busy)

    def _on_citation(self, citation) -> None:
        # The person is reading: what the click unfolds or reflows must not scroll it away.
        self._follow = False
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
        self._update_regenerate()

    def _update_regenerate(self) -> None:
        can = self.can_regenerate()
        if can != self._can_regenerate:
            self._can_regenerate = can
            self.regenerateAvailable.emit(can)

    def eventFilter(self, _viewport, event) -> bool:  # noqa: N802
        if event.type() == event.Type.Resize:
            self._fit_to_viewport()
        return False

    def _fit_to_viewport(self) -> None:
        width = max(320, int(self.scroll.viewport().width() * 0.75))
        self._fit_welcome()
        for _m, widget in self._rows:
            if isinstance(widget, UserBubble):
                widget.setMaximumWidth(width)

    def changeEvent(self, event) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() == event.Type.FontChange:  # the kiosk's larger text
            self._fit_welcome()

    def _fit_welcome(self) -> None:
        """The welcome text in lines a person can read: WELCOME_CHARS wide where there is room
        (centred, a label takes the width its size hint guesses: a narrow column of a few words
        on a wide kiosk), and as tall as its lines, so a short view scrolls it instead of
        cutting it mid-line."""
        margins = self._column.contentsMargins()
        room = self.scroll.viewport().width() - margins.left() - margins.right()
        width = max(160, min(room, self.empty.fontMetrics().averageCharWidth() * WELCOME_CHARS))
        self.empty.setFixedWidth(width)
        self.empty.setMinimumHeight(self.empty.heightForWidth(width))

    def _on_scrolled(self, value: int) -> None:
        if not self._placing:  # the person scrolled: back where the view rests, it follows again
            self._follow = abs(value - self._resting_place()) <= 8

    def _keep_in_place(self, *_range) -> None:
        if self._follow:
            self._placing = True
            try:
                self.scroll.verticalScrollBar().setValue(self._resting_place())
            finally:
                self._placing = False

    def _resting_place(self) -> int:
        """The end of the transcript, following the stream, while the newest answer fits above
        it; else the answer's start (its question too, when short), where the manual's own
        words are: scrolled to the end, the lead went off the top and the model's least
        trusted sentences were what a person read first."""
        bar = self.scroll.verticalScrollBar()
        answer = self.last_answer()
        if answer is None:
            return bar.maximum()
        top = answer.row.y()
        index = next(i for i, (_m, w) in enumerate(self._rows) if w is answer)
        if index and self._rows[index - 1][1].row.height() < self.scroll.viewport().height() // 3:
            top = self._rows[index - 1][1].row.y()  # its question, for context
        return min(bar.maximum(), max(0, top - self._column.spacing()))
