"""The main window: conversations | chat | documents and the source of a citation.

    window = MainWindow(paths, provider="auto")      # settings from paths.settings_file
    window.show()

It wires the parts and owns their threads: the IndexController (indexing), the
AssistantController (answers; the model in its child process) and, on first start, the
preparation of the built-in model, and the ModelsController (importing and removing models).
The panels own their dialogs (panels/models.py: the import and preparation boxes;
panels/settings.py: the settings dialog); the window keeps its own notices, errors and About.
Files and folders dropped anywhere on the window are indexed; a dropped .gguf is a model to
import instead.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QRect, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QStyle,
    QToolBar,
    QWidget,
)

from desktop_app.chat.bubbles import tokens_per_s
from desktop_app.chat.view import ChatView
from desktop_app.controllers.assistant import AssistantController
from desktop_app.controllers.indexing import IndexController
from desktop_app.controllers.models import ModelsController
from desktop_app.panels.conversations import ConversationsPanel
from desktop_app.panels.documents import DocumentsPanel
from desktop_app.panels.models import ImportBox, Preparation, model_files
from desktop_app.panels.settings import edit_settings
from desktop_app.sources.view import SourceView
from desktop_app.theme import apply_theme
from engine.answer.central import CentralServer, chosen_server
from engine.config import Settings, load_settings, save_settings
from engine.conversations import ConversationStore
from engine.kiosk import sd_notify
from engine.models.prepare import needs_preparation
from engine.paths import DEFAULT_COLLECTION, AppPaths

log = logging.getLogger(__name__)

TITLE = "Offline Assistant"
FIRST_SIZE = QSize(1440, 900)  # where the screen has room for it
# a window manager's frame and title bar, which Qt learns only once the window is shown
FRAME_ROOM = QSize(16, 48)
DAMAGED_COLLECTION = "is damaged"  # in every CollectionDamagedError message
KIOSK_MODELS = ("On a kiosk the administrator installs and chooses the model "
                "('offline-assistant-cli models import', then the settings file).")
STYLE = """
#chatView, #transcript, #transcriptScroll { background: palette(alternate-base); }
#userBubble { background: palette(highlight); border-radius: 14px; }
#userBubble QLabel { color: palette(highlighted-text); }
#answerBubble { background: palette(base); border: 1px solid palette(midlight); border-radius: 14px; }
#answerBubble QTextBrowser { background: transparent; }
#answerMeta { color: palette(placeholder-text); }
#notice { border-left: 4px solid palette(highlight); background: palette(alternate-base);
          padding: 6px 8px; border-radius: 4px; }
#notice[kind="notFound"], #notice[kind="error"] { border-left-color: palette(bright-text); }
#notice[kind="caution"], #notice[kind="stopped"] { border-left-color: palette(link-visited); }
#composer { background: palette(window); border-top: 1px solid palette(midlight); }
#messageInput { border: 1px solid palette(mid); border-radius: 8px; padding: 4px 6px;
                background: palette(base); }
#messageInput:focus { border: 2px solid palette(highlight); }
#emptyHint { color: palette(placeholder-text); padding: 40px; }
#panelTitle { font-weight: bold; padding: 2px 0 4px 0; }
#composerHint { color: palette(placeholder-text); }
"""


class MainWindow(QMainWindow):
    def __init__(self, paths: AppPaths, provider: str = "auto", settings: Settings | None = None, *,
                 llm_folder: Path | None = None, collection: str = DEFAULT_COLLECTION,
                 assistant_settings=None, notices: list[str] = ()):
        super().__init__()
        self.paths = paths
        # what was set aside (damaged files) or could not be written (a full disk), told once
        # in a box that does not block, shown once the window is up (`notices`: the app's own)
        self._notices: list[str] = list(notices)
        self._told: set[str] = set()
        self._notices_due = False  # True once the window is up: a notice is shown at once
        self.notice_box: QMessageBox | None = None
        self.settings = settings if settings is not None else load_settings(paths.settings_file, self._notices)
        self._closed = False
        self._model_folder: Path | None = None  # the local model answering, for its speed
        self.setWindowTitle(TITLE)
        self.setObjectName("mainWindow")
        self.setAcceptDrops(True)
        self._apply_look()

        self._llm_folder = llm_folder  # a fixed model folder (tests): never prepared here
        self.index = IndexController(paths, collection, parent=self, ocr=self.settings.ocr)
        self.assistant = AssistantController(paths, collection, provider, self.settings, llm_folder,
                                             assistant_settings, start=False, parent=self)
        self.index.pause_while(self.assistant.answering)  # an answer gets the CPU; indexing waits
        self.models = ModelsController(paths, provider, parent=self)
        self.model_import = ImportBox(self.models, self)  # for a .gguf dropped on the window
        self.preparation = Preparation(paths, self)
        self.chat = ChatView()
        self.chat.attach(self.assistant)
        self.conversations = ConversationsPanel(ConversationStore(paths.conversations))
        self.documents = DocumentsPanel(self.index)
        self.source = SourceView(ocr_source=self.index)  # scanned pages: word boxes from the store
        self._fetch_sources_from_server()
        self._build_layout()
        self._build_actions()
        self._build_status_bar()
        self._connect()
        self.fit_to(self.screen().availableGeometry())

        self.conversations.restore()
        self._notices += self.conversations.store.take_notices()
        QTimer.singleShot(0, self._show_pending_notices)  # once the window is up
        if needs_preparation(paths, self.settings, llm_folder):
            self._prepare_model()
        else:
            self.assistant.start()
        self.chat.focus_input()

    def _fetch_sources_from_server(self) -> None:
        """A thin kiosk (settings.server_url) opens cited pages from the central server's files."""
        url, key = chosen_server(self.settings)
        self.source.fetch_documents_from(CentralServer(url, key) if url else None,
                                         self.paths.root / "cache" / "central")

    # -- building -------------------------------------------------------------------------
    def fit_to(self, available: QRect) -> None:
        """Sizes and places the window, frame included, inside `available` (a screen's area
        without its panels): at 1366x768 a 1440x900 window hid the question box below the edge."""
        frame = fitted_frame(available, self.minimumSizeHint())
        self.resize(frame.size() - FRAME_ROOM)
        self.move(frame.topLeft())  # a window's position is its frame's

    def _apply_look(self) -> None:
        app = QApplication.instance()
        apply_theme(app, self.settings.theme, self.settings.font_size)
        self.setStyleSheet(STYLE)

    def _build_layout(self) -> None:
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.setObjectName("sideSplitter")
        self.side.addWidget(self.documents)
        self.side.addWidget(self.source)
        self.side.setStretchFactor(0, 1)
        self.side.setStretchFactor(1, 2)
        self.side.setChildrenCollapsible(False)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(self.chat)
        self.splitter.addWidget(self.side)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setStretchFactor(2, 2)
        self.splitter.setSizes([220, 660, 560])
        self.side.setSizes([240, 660])
        self.setCentralWidget(self.splitter)

    def _action(self, text: str, shortcut, slot, tip: str = "", icon=None) -> QAction:
        action = QAction(text, self)
        if shortcut:
            keys = shortcut if isinstance(shortcut, list) else [shortcut]
            action.setShortcuts([QKeySequence(k) for k in keys])
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        name = text.replace("&", "").rstrip("…")
        shown = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        action.setToolTip(f"{tip or name} ({shown})" if shown else (tip or name))
        action.setStatusTip(tip or name)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        action.triggered.connect(slot)
        self.addAction(action)  # shortcuts work even with the menu bar hidden (kiosks)
        return action

    def _build_actions(self) -> None:
        sp = QStyle.StandardPixmap
        self.new_action = self._action("&New conversation", "Ctrl+N", self.conversations.new_conversation,
                                       "Start a new conversation", sp.SP_FileDialogNewFolder)
        self.add_action = self._action("&Add documents…", "Ctrl+O", self.documents.choose_files,
                                       "Add PDF, text, Markdown, HTML or Word files", sp.SP_FileIcon)
        self.add_folder_action = self._action("Add &folder…", "Ctrl+Shift+O", self.documents.choose_folder,
                                              "Add every document in a folder", sp.SP_DirIcon)
        self.settings_action = self._action("&Settings…", "Ctrl+,", self.open_settings,
                                            "Model, answers, font size and theme")
        self.quit_action = self._action("&Quit", "Ctrl+Q", self.close, "Quit Offline Assistant")
        self.stop_action = self._action("S&top answer", "Esc", self.chat.stop, "Stop the answer",
                                        sp.SP_MediaStop)
        self.regenerate_action = self._action("&Regenerate answer", "Ctrl+R", self.chat.regenerate,
                                              "Ask the last question again", sp.SP_BrowserReload)
        self.copy_action = self._action("&Copy answer", "Ctrl+Shift+C", self.chat.copy_last_answer,
                                        "Copy the last answer")
        self.rename_action = self._action("Re&name conversation…", "F2", self.conversations.rename_current,
                                          "Rename the open conversation")
        self.delete_action = self._action("&Delete conversation…", "Ctrl+Shift+Del",
                                          self.conversations.delete_current, "Delete the open conversation")
        self.focus_input_action = self._action("Focus &question box", "Ctrl+L", self.chat.focus_input,
                                               "Type a question")
        self.focus_conversations_action = self._action(
            "Focus c&onversations", "Ctrl+1", lambda: self.conversations.list.setFocus(), "The conversations list")
        self.focus_answer_action = self._action(
            "Focus the last &answer", "Ctrl+2", self.chat.focus_last_answer,
            "Then Tab moves through its citations and Enter opens one")
        self.focus_documents_action = self._action(
            "Focus &documents", "Ctrl+3", lambda: self.documents.list.setFocus(), "The documents list")
        self.focus_source_action = self._action(
            "Focus &source", "Ctrl+4", lambda: self.source.setFocus(), "The source view")
        self.cancel_index_action = self._action("Cancel &indexing", "Ctrl+Shift+X", self.index.cancel,
                                                "Stop indexing; what is done stays")
        self.log_action = self._action("Open the &log folder", None, self.open_log_folder,
                                       "Where errors are recorded")
        self.about_action = self._action("&About Offline Assistant", None, self.about)
        self.stop_action.setEnabled(False)

        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        for action in (self.new_action, self.add_action, self.add_folder_action, self.cancel_index_action):
            file_menu.addAction(action)
        file_menu.addSeparator()
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        chat_menu = bar.addMenu("&Chat")
        for action in (self.stop_action, self.regenerate_action, self.copy_action, self.rename_action,
                       self.delete_action):
            chat_menu.addAction(action)
        view_menu = bar.addMenu("&View")
        for action in (self.focus_input_action, self.focus_conversations_action, self.focus_answer_action,
                       self.focus_documents_action, self.focus_source_action):
            view_menu.addAction(action)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.log_action)
        help_menu.addAction(self.about_action)

        toolbar = QToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        toolbar.setAccessibleName("Main toolbar")
        for action in (self.new_action, self.add_action, self.add_folder_action):
            toolbar.addAction(action)
        toolbar.addSeparator()
        for action in (self.stop_action, self.regenerate_action):
            toolbar.addAction(action)
        toolbar.addSeparator()
        toolbar.addAction(self.settings_action)
        self.addToolBar(toolbar)

    def _build_status_bar(self) -> None:
        self.model_label = _status_label("Model: loading…", "Model")
        self.provider_label = _status_label("", "Execution provider")
        self.speed_label = _status_label("", "Speed of the last answer")
        self.index_label = _status_label("No documents indexed", "Indexed documents")
        bar = self.statusBar()
        for label in (self.model_label, self.provider_label, self.speed_label, self.index_label):
            bar.addPermanentWidget(label)
        self._show_index_stats(*self.index.stats)

    def _connect(self) -> None:
        self.chat.citationClicked.connect(self.open_citation)
        self.source.set_zoom(self.settings.source_zoom)
        self.source.zoomChosen.connect(self._remember_source_zoom)
        self.chat.conversationChanged.connect(self.save_conversation)
        self.chat.answerFinished.connect(self._show_answer_stats)
        self.chat.busyChanged.connect(self._on_chat_busy)
        self.chat.regenerateAvailable.connect(self.regenerate_action.setEnabled)
        self.regenerate_action.setEnabled(self.chat.can_regenerate())  # not in an empty conversation
        self.chat.set_kiosk(self.settings.kiosk)
        self.chat.set_documents(self.index.stats[0])
        self.index.statsChanged.connect(lambda ready, _chunks: self.chat.set_documents(ready))
        self.conversations.aboutToSwitch.connect(self._before_switch)
        self.conversations.conversationSelected.connect(self._show_conversation)
        self.conversations.failed.connect(self._show_store_failure)
        self.index.statsChanged.connect(self._show_index_stats)
        self.index.failed.connect(self._show_index_failure)
        self.index.rereading.connect(self._show_rereading)
        self.assistant.modelReady.connect(self._show_model)
        self.assistant.modelFailed.connect(self._show_model_failure)
        self.assistant.engineRestarting.connect(self._show_model_restarting)
        self.assistant.engineUnreachable.connect(self.show_notice)  # said once, beside the status bar
        self.models.importEnded.connect(self._on_import_ended)
        self.preparation.prepared.connect(self._on_prepared)
        self.preparation.failed.connect(self._on_prepare_failed)
        QWidget.setTabOrder(self.conversations.list, self.chat.input)
        QWidget.setTabOrder(self.chat.input, self.chat.send_button)
        QWidget.setTabOrder(self.chat.send_button, self.documents.add_button)

    # -- conversations --------------------------------------------------------------------
    def _before_switch(self) -> None:
        self.chat.stop()
        self.save_conversation()

    def _show_conversation(self, conversation) -> None:
        self.chat.set_messages(conversation.messages)
        self.assistant.session = conversation.id  # its next questions belong to it
        self.setWindowTitle(f"{conversation.title} — {TITLE}")

    def save_conversation(self) -> None:
        self.conversations.save_current(self.chat.messages())
        current = self.conversations.current()
        if current is not None:
            self.setWindowTitle(f"{current.title} — {TITLE}")

    # -- citations ------------------------------------------------------------------------
    def open_citation(self, citation) -> None:
        self.source.show_citation(citation)  # path, page, spans and text
        sizes = self.side.sizes()
        if sizes[1] < 200:
            self.side.setSizes([max(120, sum(sizes) // 3), sum(sizes) * 2 // 3])

    # -- drops ----------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if _local_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        if _local_paths(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        paths = _local_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        models = model_files(paths)
        if models:
            self.import_models(models)
        documents = [p for p in paths if p not in models]
        if documents:
            self.index.add_paths(documents)
            self.statusBar().showMessage(f"Adding {len(documents)} item(s) to the index…", 5000)

    # -- models ---------------------------------------------------------------------------
    def import_models(self, files: list[str]) -> bool:
        """Imports .gguf files (dropped on the window), with a progress box that can cancel."""
        if self.settings.kiosk:
            self.statusBar().showMessage(KIOSK_MODELS, 15000)
            return False
        if not self.models.import_files(files):
            self.statusBar().showMessage("A model is being imported; wait for it, or cancel it.", 10000)
            return False
        self.model_import.show(f"Importing {Path(files[0]).name}…")
        return True

    def _on_import_ended(self, _name: str, message: str, failed: bool) -> None:
        self.statusBar().showMessage(message, 15000)
        dropped_here = self.model_import.end()  # else the Models page says it
        if failed and dropped_here:
            self.show_notice(message)  # a box that does not block

    # -- settings -------------------------------------------------------------------------
    def open_settings(self, models_page: bool = False) -> bool:
        settings = edit_settings(self.settings, self.paths, self.models, self, models_page=models_page)
        self.model_import.keep_in_view()  # its page is closed: progress stays in view
        if settings is not None:
            self.apply_settings(settings)
        return settings is not None

    def apply_settings(self, settings: Settings) -> None:
        old, self.settings = self.settings, settings
        try:
            save_settings(self.paths.settings_file, settings)
        except OSError as exc:
            self.show_error(f"The settings could not be saved in '{self.paths.settings_file}' ({exc}); "
                            "they apply until the app is closed.")
        self._apply_look()
        self.index.set_ocr(settings.ocr)
        if chosen_server(old) != chosen_server(settings):
            self._fetch_sources_from_server()
        if replace(old, font_size=settings.font_size, theme=settings.theme,
                   source_zoom=settings.source_zoom, ocr=settings.ocr) == settings:
            return
        if self.preparation.running() or needs_preparation(self.paths, settings, self._llm_folder):
            # the built-in model, chosen again on the Models page, is prepared first (once);
            # the assistant opens it with these settings when it is ready
            if not self.preparation.running():
                self._prepare_model()
            return
        self.assistant.apply_settings(settings)
        self.model_label.setText("Model: loading…")

    def _remember_source_zoom(self, zoom: float) -> None:
        """The zoom chosen in the source view is kept for the next page and the next start
        (not on a kiosk: its settings are the administrator's)."""
        self.settings = replace(self.settings, source_zoom=zoom)
        if self.settings.kiosk:
            return
        try:
            save_settings(self.paths.settings_file, self.settings)
        except OSError as exc:
            log.warning("the source zoom could not be saved: %s", exc)

    # -- first start ----------------------------------------------------------------------
    def _prepare_model(self) -> None:
        self.chat.set_ready(False, "Preparing the built-in model (once, about 10 s); "
                                   "you can add documents meanwhile.")
        self.model_label.setText("Model: preparing…")
        self.preparation.start()

    def _on_prepared(self, _folder: str) -> None:
        self.chat.set_ready(True)
        self.assistant.apply_settings(self.settings)  # those chosen while it was prepared
        self.assistant.start()

    def _on_prepare_failed(self, message: str) -> None:
        self.chat.set_ready(False, "The built-in model could not be prepared; see the message.")
        self.model_label.setText("Model: not available")
        self.show_error(message)

    # -- status ---------------------------------------------------------------------------
    def _show_model(self, status) -> None:
        self._model_folder = status.folder  # None for a remote engine: its speed is not this machine's
        self.model_label.setText(f"Model: {status.name}")
        self.provider_label.setText(f"Provider: {status.provider.upper()}")

    def _show_model_failure(self, message: str) -> None:
        self.model_label.setText("Model: not available")
        self.statusBar().showMessage(message, 15000)

    def _show_model_restarting(self, message: str) -> None:
        self.model_label.setText("Model: restarting…")  # until modelReady shows it again
        self.statusBar().showMessage(message, 15000)

    def _show_answer_stats(self, event) -> None:
        speed = tokens_per_s(event.stats)
        if speed is not None:
            self.speed_label.setText(f"{speed:.1f} tokens/s")
            if self._model_folder is not None:  # the Models page shows it
                self.models.record_speed(self._model_folder, speed, event.stats.new_tokens,
                                         event.stats.provider)
        if event.stats.provider:
            self.provider_label.setText(f"Provider: {event.stats.provider.upper()}")

    def _show_index_stats(self, documents: int, chunks: int) -> None:
        if documents == 0:
            self.index_label.setText("No documents indexed")
        else:
            self.index_label.setText(f"{documents} document{'s' if documents != 1 else ''} · "
                                     f"{chunks:,} passages indexed")

    def _show_index_failure(self, message: str) -> None:
        self.statusBar().showMessage(message, 15000)
        if DAMAGED_COLLECTION in message:  # its files were set aside: say so where it stays
            self.show_notice(message)

    def _show_store_failure(self, message: str) -> None:
        """A conversation could not be saved (a full or read-only disk): said in the status bar
        each time and once in the notice box, never in a modal box (at the start it would hold
        the window back before it is shown)."""
        self.statusBar().showMessage(message, 15000)
        self.show_notice(message)

    def _show_pending_notices(self) -> None:
        self._notices_due = True
        notices, self._notices = self._notices, []
        for notice in notices:
            self.show_notice(notice)

    def _show_rereading(self, count: int) -> None:
        """Said once, when a collection's documents read by an earlier version are read again."""
        manuals = "1 manual" if count == 1 else f"{count} manuals"
        message = (f"Reading {manuals} again, as this version reads them better: a PDF's words no longer run "
                   "together, tables keep their rows, and citations mark the exact words. Answers use the "
                   "earlier copy of each until it is done.")
        self.statusBar().showMessage(message, 15000)
        self.show_notice(message)

    def show_notice(self, message: str) -> None:
        """Tell the person once what was set aside or could not be written, and where, in one
        box that does not block the window (a second notice is added to the box while it is
        open). Before the window is up, the notice waits for it."""
        if not self._notices_due:
            if message not in self._notices:
                self._notices.append(message)
            return
        if message in self._told:
            return
        self._told.add(message)
        log.warning("told the user: %s", message)
        if self.notice_box is not None and self.notice_box.isVisible():
            self.notice_box.setText(self.notice_box.text() + "\n\n" + message)
            return
        box = QMessageBox(QMessageBox.Icon.Warning, f"{TITLE}: notice", message,
                          QMessageBox.StandardButton.Ok, self)
        box.setObjectName("setAsideNotice")
        box.setWindowModality(Qt.WindowModality.NonModal)
        self.notice_box = box
        box.show()

    def _on_chat_busy(self, busy: bool) -> None:
        self.stop_action.setEnabled(busy)
        self.regenerate_action.setEnabled(self.chat.can_regenerate())

    def show_error(self, message: str) -> None:
        QMessageBox.warning(self, TITLE, message)

    def open_log_folder(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.paths.logs)))

    def about(self) -> None:
        QMessageBox.about(self, f"About {TITLE}",
                          "<b>Offline Assistant</b><p>Answers questions over your own manuals, "
                          "fully offline, with a small local language model.</p>"
                          f"<p>Data folder: {self.paths.root}</p>")

    # -- closing --------------------------------------------------------------------------
    def closeEvent(self, event) -> None:  # noqa: N802
        if not self._closed:
            self._closed = True
            # systemd stops the watchdog here and allows TimeoutStopSec: ending the threads and
            # the model's process blocks this thread, and heartbeats stop meanwhile
            sd_notify.stopping()
            self.chat.stop()
            self.save_conversation()
            self.assistant.shutdown()
            self.index.shutdown()
            self.models.shutdown()
            self.model_import.close()
            self.preparation.close()
        super().closeEvent(event)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self.preparation.window_shown()

    def changeEvent(self, event) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            QTimer.singleShot(0, self.chat, self.chat.update)  # dropped if the chat is gone by then


def fitted_frame(available: QRect, least: QSize = QSize()) -> QRect:
    """The window's first frame: FIRST_SIZE and its frame, or less where `available` is smaller
    (never under `least`, the window's own minimum), centred in it."""
    size = (FIRST_SIZE + FRAME_ROOM).boundedTo(available.size()).expandedTo(least + FRAME_ROOM)
    frame = QRect(QPoint(0, 0), size)
    frame.moveCenter(available.center())
    return frame.translated(max(0, available.left() - frame.left()), max(0, available.top() - frame.top()))


def _status_label(text: str, name: str) -> QLabel:
    label = QLabel(text)
    label.setAccessibleName(name)
    label.setContentsMargins(6, 0, 6, 0)
    return label


def _local_paths(mime) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]
