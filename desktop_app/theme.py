"""Light and dark themes: the Fusion style, a palette, and the application font size.

    apply_theme(app, settings.theme, settings.font_size)

Idempotent: applying the same theme twice changes nothing; applying another switches cleanly.
Every widget takes its colours from the palette (no hard-coded colours elsewhere), so the
chat, the documents list and the source view follow the theme and the font size.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

THEMES = ("light", "dark")
Role = QPalette.ColorRole
Group = QPalette.ColorGroup

LIGHT = {
    Role.Window: "#f3f3f3",
    Role.WindowText: "#1b1b1b",
    Role.Base: "#ffffff",
    Role.AlternateBase: "#f0f2f5",
    Role.ToolTipBase: "#ffffe1",
    Role.ToolTipText: "#1b1b1b",
    Role.PlaceholderText: "#6e6e6e",
    Role.Text: "#1b1b1b",
    Role.Button: "#e9e9e9",
    Role.ButtonText: "#1b1b1b",
    Role.BrightText: "#d00000",
    Role.Light: "#ffffff",
    Role.Midlight: "#e3e3e3",
    Role.Mid: "#b8b8b8",
    Role.Dark: "#9f9f9f",
    Role.Shadow: "#767676",
    Role.Highlight: "#2f6fd1",
    Role.HighlightedText: "#ffffff",
    Role.Link: "#1a5fb4",
    Role.LinkVisited: "#7a3fb0",
}
LIGHT_DISABLED = {Role.WindowText: "#8c8c8c", Role.Text: "#8c8c8c", Role.ButtonText: "#8c8c8c",
                  Role.Highlight: "#b8b8b8", Role.HighlightedText: "#f3f3f3"}

DARK = {
    Role.Window: "#2b2d30",
    Role.WindowText: "#e6e6e6",
    Role.Base: "#1e1f22",
    Role.AlternateBase: "#26282b",
    Role.ToolTipBase: "#3c3f41",
    Role.ToolTipText: "#e6e6e6",
    Role.PlaceholderText: "#8a8d91",
    Role.Text: "#e6e6e6",
    Role.Button: "#3a3d41",
    Role.ButtonText: "#e6e6e6",
    Role.BrightText: "#ff6b6b",
    Role.Light: "#4a4d52",
    Role.Midlight: "#404347",
    Role.Mid: "#323437",
    Role.Dark: "#1a1b1d",
    Role.Shadow: "#0d0d0e",
    Role.Highlight: "#3d7be0",
    Role.HighlightedText: "#ffffff",
    Role.Link: "#7fb2ff",
    Role.LinkVisited: "#c49bff",
}
DARK_DISABLED = {Role.WindowText: "#7a7d82", Role.Text: "#7a7d82", Role.ButtonText: "#7a7d82",
                 Role.Highlight: "#4a4d52", Role.HighlightedText: "#a0a0a0"}


def palette_for(theme: str) -> QPalette:
    """The palette of `theme` ("light" or "dark"; anything else is light)."""
    colours, disabled = (DARK, DARK_DISABLED) if theme == "dark" else (LIGHT, LIGHT_DISABLED)
    palette = QPalette()
    for role, colour in colours.items():
        palette.setColor(role, QColor(colour))
    for role, colour in disabled.items():
        palette.setColor(Group.Disabled, role, QColor(colour))
    return palette


def apply_theme(app: QApplication, theme: str, font_size: int) -> None:
    """Fusion, the palette of `theme` and `font_size` points for every widget."""
    style = app.style()
    if style is None or style.name().lower() != "fusion":
        app.setStyle("Fusion")
    palette = palette_for(theme)
    if app.palette() != palette:
        app.setPalette(palette)
    font = QFont(app.font())
    if font.pointSize() != font_size:
        font.setPointSize(int(font_size))
        app.setFont(font)
    app.setProperty("theme", theme if theme in THEMES else "light")


def current_theme(app: QApplication) -> str:
    """The theme apply_theme last set ("light" before it ran)."""
    return app.property("theme") or "light"


def highlight_colour(app: QApplication | None = None) -> QColor:
    """A passage highlight that reads on both themes (a marker yellow; darker on dark)."""
    theme = current_theme(app) if app is not None else "light"
    return QColor("#8a6d00") if theme == "dark" else QColor("#fff1a8")
