from desktop_app.main_window import MainWindow
from engine.models.registry import list_models
from engine.paths import AppPaths


def test_main_window_opens_and_shows_model_status(qtbot, tmp_path):
    window = MainWindow(list_models(AppPaths(tmp_path).ensure(), "cpu"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.windowTitle() == "Offline Assistant"
    status = window.statusBar().currentMessage()
    assert "SmolLM2" in status and "needs preparation" in status
