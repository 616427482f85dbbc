"""Versions of what the model code writes (kept apart so that light modules can read them)."""

# Bumped whenever the GGUF converter's graph or weight layout changes: folders prepared by an
# older converter are then prepared again, so nobody keeps a model built by a superseded one.
GGUF_CONVERTER = 2
