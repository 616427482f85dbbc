"""The list of conversations: new, rename, delete (after asking), switch.

    panel = ConversationsPanel(ConversationStore(paths.conversations))
    panel.conversationSelected.connect(lambda c: chat.set_messages(c.messages))
    panel.save_current(chat.messages())          # after each answer

Conversations live in the data dir (engine.conversations); the most recently used one is
opened on start.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.conversations import Conversation, ConversationStore
from engine.errors import EngineError

log = logging.getLogger(__name__)

DEFAULT_TITLE = "New conversation"
TITLE_CHARS = 60


class ConversationsPanel(QWidget):
    aboutToSwitch = Signal()  # the open conversation is about to change: stop and save it now
    conversationSelected = Signal(object)  # Conversation
    failed = Signal(str)  # a message for the user (a conversation could not be saved)

    def __init__(self, store: ConversationStore, parent=None):
        super().__init__(parent)
        self.setObjectName("conversationsPanel")
        self.store = store
        self._current: Conversation | None = None

        title = QLabel("Conversations")
        title.setObjectName("panelTitle")
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setAccessibleDescription("Enter or a click opens a conversation; F2 renames it")
        self.list.setUniformItemSizes(True)
        self.list.setWordWrap(False)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.currentItemChanged.connect(self._on_current_item)
        self.list.setAcceptDrops(False)

        self.new_button = _button("New", "New conversation (Ctrl+N)", self.new_conversation)
        self.rename_button = _button("Rename", "Rename the conversation (F2)", self.rename_current)
        self.delete_button = _button("Delete", "Delete the conversation", self.delete_current)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        for button in (self.new_button, self.rename_button, self.delete_button):
            buttons.addWidget(button)
        buttons.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 4, 8)
        layout.addWidget(title)
        layout.addLayout(buttons)
        layout.addWidget(self.list, 1)
        QWidget.setTabOrder(self.new_button, self.rename_button)
        QWidget.setTabOrder(self.rename_button, self.delete_button)
        QWidget.setTabOrder(self.delete_button, self.list)

    # -- state ------------------------------------------------------------------------------
    def current(self) -> Conversation | None:
        return self._current

    def restore(self) -> Conversation:
        """Lists the stored conversations and opens the most recently used (or a new one)."""
        conversations = self.store.list()
        self._fill(conversations)
        if not conversations:
            return self.new_conversation()
        self._select(conversations[0].id)
        return self._current

    def conversations(self) -> list[tuple[str, str]]:
        """(id, title) of the listed conversations, top first."""
        return [(self.list.item(i).data(Qt.ItemDataRole.UserRole), self.list.item(i).text())
                for i in range(self.list.count())]

    # -- actions ----------------------------------------------------------------------------
    def new_conversation(self) -> Conversation:
        current = self._current
        if current is not None and not current.messages and self._row_of(current.id) >= 0:
            self._select(current.id)  # an empty one is already open: reuse it
            return current
        if current is not None:
            self.aboutToSwitch.emit()  # saves it before the new one is listed above it
        ok, conversation = self._guard(lambda: self.store.create(DEFAULT_TITLE))
        if not ok:
            return self._current
        self.list.insertItem(0, _item(conversation))
        self._select(conversation.id)
        return conversation

    def save_current(self, messages: list[dict]) -> None:
        """Stores the open conversation's messages; a new one takes its first question as title."""
        conversation = self._current
        if conversation is None or conversation.messages == messages:
            return  # nothing new: keeps "last used" as it was
        conversation.messages = list(messages)
        if conversation.title == DEFAULT_TITLE:
            first = next((m["content"] for m in messages if m.get("role") == "user"), "")
            if first:
                conversation.title = title_from(first)
        if self._guard(lambda: self.store.save(conversation))[0]:
            self._move_to_top(conversation)

    def rename_current(self) -> bool:
        conversation = self._current
        if conversation is None:
            return False
        title, ok = QInputDialog.getText(self, "Rename conversation", "Title:",
                                         QLineEdit.EchoMode.Normal, conversation.title)
        if not ok or not title.strip():
            return False
        conversation.title = title.strip()[:200]
        ok, _ = self._guard(lambda: self.store.save(conversation))
        self._move_to_top(conversation)
        return ok

    def keep_latest(self, count: int) -> int:
        """Deletes the conversations below the `count` most recent (never the open one): a kiosk
        starts one per operator, for weeks, and lists them all at every start. Returns how many
        went."""
        current = self._current.id if self._current is not None else None
        removed = 0
        self.list.blockSignals(True)
        try:
            for row in range(self.list.count() - 1, count - 1, -1):  # the oldest at the bottom
                conversation_id = self.list.item(row).data(Qt.ItemDataRole.UserRole)
                if conversation_id == current:
                    continue
                ok, _ = self._guard(lambda cid=conversation_id: self.store.delete(cid))
                if ok:
                    self.list.takeItem(row)
                    removed += 1
        finally:
            self.list.blockSignals(False)
        return removed

    def delete_current(self) -> bool:
        conversation = self._current
        if conversation is None:
            return False
        answer = QMessageBox.question(
            self, "Delete conversation",
            f"Delete the conversation “{conversation.title}”? This cannot be undone.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        if answer != QMessageBox.StandardButton.Yes:
            return False
        self._guard(lambda: self.store.delete(conversation.id))
        row = self._row_of(conversation.id)
        self._current = None
        if row >= 0:
            self.list.blockSignals(True)
            self.list.takeItem(row)
            self.list.blockSignals(False)
        if self.list.count() == 0:
            self.new_conversation()
        else:
            self._select(self.list.item(min(row, self.list.count() - 1)).data(Qt.ItemDataRole.UserRole))
        return True

    # -- helpers ----------------------------------------------------------------------------
    def _fill(self, conversations: list[Conversation]) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for conversation in conversations:
            self.list.addItem(_item(conversation))
        self.list.blockSignals(False)

    def _select(self, conversation_id: str) -> None:
        row = self._row_of(conversation_id)
        if row < 0:
            return
        if self.list.currentRow() == row:
            self._on_current_item(self.list.item(row), None)
        else:
            self.list.setCurrentRow(row)

    def _on_current_item(self, item: QListWidgetItem | None, _previous) -> None:
        if item is None:
            return
        conversation_id = item.data(Qt.ItemDataRole.UserRole)
        if self._current is not None and self._current.id == conversation_id:
            self.conversationSelected.emit(self._current)
            return
        ok, conversation = self._guard(lambda: self.store.get(conversation_id))
        if not ok:
            return
        if self._current is not None:
            self.aboutToSwitch.emit()
        self._current = conversation
        self.conversationSelected.emit(conversation)

    def _move_to_top(self, conversation: Conversation) -> None:
        row = self._row_of(conversation.id)
        self.list.blockSignals(True)
        if row >= 0:
            self.list.takeItem(row)
        self.list.insertItem(0, _item(conversation))
        self.list.setCurrentRow(0)
        self.list.blockSignals(False)

    def _row_of(self, conversation_id: str) -> int:
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == conversation_id:
                return i
        return -1

    def _guard(self, call) -> tuple[bool, object]:
        """(ok, result) of a store call; an EngineError (a full or read-only disk) is shown
        through `failed`, never raised into Qt."""
        try:
            return True, call()
        except EngineError as exc:
            log.error("conversation store: %s", exc)
            self.failed.emit(str(exc))
            return False, None


def _item(conversation: Conversation) -> QListWidgetItem:
    item = QListWidgetItem(conversation.title)
    item.setData(Qt.ItemDataRole.UserRole, conversation.id)
    item.setToolTip(conversation.title)
    return item


def _button(text: str, tip: str, slot) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAccessibleName(tip.split(" (")[0])
    button.clicked.connect(slot)
    return button


def title_from(question: str) -> str:
    title = " ".join(question.split())
    return title if len(title) <= TITLE_CHARS else title[:TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
