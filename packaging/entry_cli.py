"""The installed command line, `offline-assistant-cli` (frozen by packaging/offline-assistant.spec)."""

import multiprocessing
import sys

if __name__ == "__main__":
    # The engine's child processes are this same program started again: they stop here.
    multiprocessing.freeze_support()
    from engine.cli.main import main

    sys.exit(main())
