"""The installed window program, `offline-assistant` (frozen by packaging/offline-assistant.spec)."""

import multiprocessing
import sys

if __name__ == "__main__":
    # The engine's child processes are this same program started again: they stop here.
    multiprocessing.freeze_support()
    from desktop_app.app import main

    sys.exit(main())
