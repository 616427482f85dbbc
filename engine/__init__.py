"""Offline Assistant engine: everything the app does, without Qt."""

import os

# onnxruntime 1.32 and onnxruntime-genai 0.18 keep a device id and queue usage events under
# ~/.cache/Microsoft unless this is set before they load; an offline app records nothing.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
