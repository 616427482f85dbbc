"""Entry point of the desktop app: `offline-assistant [--data-dir DIR] [--provider P]`."""

from __future__ import annotations

import argparse
import sys

from engine.hardware import PROVIDER_CHOICES
from engine.paths import AppPaths


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="offline-assistant", description=__doc__)
    parser.add_argument("--data-dir", help="where models, collections, settings and logs live")
    parser.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from PySide6.QtWidgets import QApplication

    from engine.models.registry import list_models

    from .main_window import MainWindow

    paths = AppPaths.from_arg(args.data_dir).ensure()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Offline Assistant")
    window = MainWindow(list_models(paths, args.provider))
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
