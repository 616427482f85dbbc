"""Tests of desktop_app/chat/: the chat view, its answer bubbles and their rendering."""
