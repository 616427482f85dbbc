"""Tests of desktop_app/panels/: the documents panel (with indexing), the Models page, the settings dialog."""
