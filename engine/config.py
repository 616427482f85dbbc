"""The user's settings: a frozen dataclass, read from TOML (tomllib) and written to it (tomli-w)
in the data dir.

    settings = load_settings(paths.settings_file)        # never raises: bad values -> defaults
    save_settings(paths.settings_file, replace(settings, theme="dark"))   # atomic
    assistant.ask(..., settings=settings.assistant_settings())

A missing file gives the defaults; a damaged file, a value of the wrong type or one out of range
gives the default (or the nearest allowed value) for that key and a logged warning. Unknown keys
are ignored, so an older app reads a newer file. No Qt here: the CLI and a kiosk share it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import tomli_w

from engine.atomic_file import move_aside, write_atomic

if TYPE_CHECKING:
    from engine.answer.assistant import AssistantSettings

log = logging.getLogger(__name__)

THEMES = ("light", "dark")
# inclusive ranges; values outside are clamped to the nearest end
LIMITS: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "max_new_tokens": (16, 1024),
    "passages": (1, 8),
    "font_size": (8, 32),
    "idle_reset_min": (0.5, 240.0),
    "admin_relock_min": (0.5, 60.0),
    "inbox_poll_s": (2.0, 3600.0),
    "source_zoom": (0.0, 6.0),
    "bundle_poll_s": (2.0, 86400.0),
}
MODEL_NAME_MAX = 200
FOLDER_MAX = 4096  # characters: PATH_MAX on Linux; longer is a mistake, not a folder
# what a key left at None means, written as a comment (TOML has no null)
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone one cannot be written as UTF-8
NONE_MEANS = {"model": "(the built-in model)", "inbox_folder": "(none: no watched inbox folder)",
              "engine_url": "(none: the local model answers)", "engine_key": "(none)",
              "engine_model": "(the first model the engine lists)",
              "server_url": "(none: answers are made on this machine)", "server_key": "(none)",
              "bundle_source": "(none: no bundle updates; a folder, a network share or an http(s):// URL)"}
ENGINE_TEXT_MAX = 2048  # an engine URL, key or model name longer than this is a mistake


@dataclass(frozen=True)
class Settings:
    model: str | None = None  # None: the built-in model; otherwise an imported model's name
    temperature: float = 0.0
    max_new_tokens: int = 192
    passages: int = 4
    use_reranker: bool = True
    ocr: bool = True  # recognise the text of scanned pages when indexing (OCR); off: they are skipped
    font_size: int = 11
    theme: str = "light"
    source_zoom: float = 0.0  # the source view's PDF zoom, kept from the last one chosen; 0: fit width
    # kiosk mode (an administrator sets these in the file; `offline-assistant --kiosk` too)
    kiosk: bool = False
    idle_reset_min: float = 3.0  # minutes without input before the conversation is cleared
    admin_relock_min: float = 2.0  # minutes without input before the admin panel locks again
    audit_log: bool = False  # one JSON line per question in DATA_DIR/audit; always on in kiosk mode
    inbox_folder: str | None = None  # new manuals copied here are indexed (engine/ingest/inbox.py)
    inbox_poll_s: float = 10.0  # seconds between two looks into the inbox folder
    # a remote OpenAI-compatible engine for generation (retrieval and the checks stay here);
    # when it cannot be reached the local model answers, if one is installed
    engine_url: str | None = None  # http(s)://host:port, with or without /v1; None: the local model
    engine_key: str | None = field(default=None, repr=False)  # never in a log; or OFFLINE_ASSISTANT_ENGINE_KEY
    engine_model: str | None = None  # the engine's model name; None: the first one it lists
    # a thin kiosk: whole answers (retrieval included) from a central `serve`; this machine's own
    # collection and model answer only while that server cannot be reached
    server_url: str | None = None  # http(s)://host:port of the central server; None: answer here
    server_key: str | None = field(default=None, repr=False)  # its API key; or OFFLINE_ASSISTANT_SERVER_KEY
    # a kiosk fleet (engine/fleet, docs/fleet.md): signed index bundles published by an administrator
    bundle_source: str | None = None  # a folder, a network share or an http(s):// URL; None: no updates
    bundle_keys: tuple[str, ...] = ()  # base64 Ed25519 public keys (32 bytes) whose bundles are accepted
    bundle_poll_s: float = 60.0  # seconds between two looks at the source's latest.json (jittered)

    def __post_init__(self):
        # every Settings is valid, however it was made (a dialog, a file, a test)
        for f in fields(self):
            value, problem = _checked(f.name, getattr(self, f.name), f.default)
            if problem:
                log.debug("settings: %s", problem)
            object.__setattr__(self, f.name, value)

    def assistant_settings(self) -> "AssistantSettings":
        """What Assistant.ask needs from these settings; the rest keeps the engine's defaults."""
        from engine.answer.assistant import AssistantSettings

        return AssistantSettings(passages=self.passages, max_new_tokens=self.max_new_tokens,
                                 temperature=self.temperature)


def load_settings(path: str | Path, set_aside: list[str] | None = None) -> Settings:
    """The settings stored at `path`; the defaults for whatever is missing or wrong there. A
    file that cannot be parsed is renamed `settings.toml.damaged` (so that the next save does
    not overwrite it), and a sentence saying so is appended to `set_aside`, for the window to
    tell the person once."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings()
    except OSError as error:
        log.warning("Could not read the settings file %s (%s); using the defaults", path, error)
        return Settings()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        log.warning("The settings file %s is damaged (%s); using the defaults", path, error)
        aside = move_aside(path, path.with_name(path.name + ".damaged"))
        if set_aside is not None:
            where = f"it was renamed '{aside}'" if aside else "it was left where it is"
            set_aside.append(f"The settings file '{path}' was damaged ({error}), so the default settings "
                             f"are in use; {where}. Set your settings again in Settings.")
        return Settings()
    values = {}
    for f in fields(Settings):
        if f.name not in data:
            continue
        value, problem = _checked(f.name, data[f.name], f.default)
        if problem:
            log.warning("Settings file %s: %s", path, problem)
        values[f.name] = value
    return Settings(**values)


def save_settings(path: str | Path, settings: Settings) -> None:
    """Write `settings` as TOML; a crash or a full disk leaves the old file whole, never half."""
    write_atomic(path, to_toml(settings))


def to_toml(settings: Settings) -> str:
    lines = ["# Offline Assistant settings. Unknown keys are ignored; a bad value falls back",
             "# to its default. Delete this file to restore all the defaults.", ""]
    for f in fields(settings):
        value = getattr(settings, f.name)
        if value is None:  # TOML has no null: the key is left out, and reads back as None
            lines.append(f"# {f.name} = {NONE_MEANS.get(f.name, '(none)')}")
            continue
        lines.append(tomli_w.dumps({f.name: _storable(value)}).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _storable(value):
    """A lone surrogate cannot be stored in UTF-8 TOML: it becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


def _checked(name: str, value, default):
    """(a valid value for `name`, a sentence saying what was wrong or "")."""
    if name == "model":
        if value is None:
            return None, ""
        if not isinstance(value, str):
            return default, f"'model' must be a model name, not {value!r}; using the built-in model"
        value = value.strip()
        if value.lower() in ("", "built-in", "builtin"):
            return None, ""
        if len(value) > MODEL_NAME_MAX:
            return default, "'model' is too long to be a model name; using the built-in model"
        return value, ""
    if name == "inbox_folder":
        if value is None:
            return None, ""
        if not isinstance(value, str):
            return default, f"'inbox_folder' must be a folder path, not {value!r}; no inbox folder is watched"
        value = value.strip()
        if not value:
            return None, ""
        if len(value) > FOLDER_MAX or "\0" in value:
            return default, "'inbox_folder' is not a usable folder path; no inbox folder is watched"
        return value, ""
    if name in ("engine_url", "engine_key", "engine_model", "server_url", "server_key"):
        return _engine_text(name, value)
    if name == "bundle_source":
        return _bundle_source(value)
    if name == "bundle_keys":
        return _bundle_keys(value)
    if name == "theme":
        if isinstance(value, str) and value.strip().lower() in THEMES:
            return value.strip().lower(), ""
        return default, f"'theme' must be one of {', '.join(THEMES)}, not {value!r}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value, ""
        return default, f"'{name}' must be true or false, not {value!r}"
    low, high = LIMITS[name]
    if isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value):
            return default, f"'{name}' must be a number, not {value!r}; using {default}"
        value = float(value)
    else:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            return default, f"'{name}' must be a whole number, not {value!r}; using {default}"
    clamped = type(default)(min(max(value, low), high))
    if clamped != value:
        return clamped, f"'{name}' = {value} is outside {low:g}..{high:g}; using {clamped}"
    return clamped, ""


def _engine_text(name: str, value):
    """engine_url or server_url (an http or https address), a key, or engine_model; "" means none."""
    if value is None:
        return None, ""
    if not isinstance(value, str):
        return None, f"'{name}' must be text, not {type(value).__name__}; it is left unset"
    value = value.strip()
    if not value:
        return None, ""
    if len(value) > ENGINE_TEXT_MAX or any(ord(c) < 32 for c in value):
        return None, f"'{name}' is not usable (too long, or a control character); it is left unset"
    if name.endswith("_url") and not re.match(r"https?://[^/\s]+", value):
        return None, (f"'{name}' must start with http:// or https://, not {value[:80]!r}; "
                      f"{NONE_MEANS[name][7:-1]}")
    return value, ""


def _bundle_source(value):
    """A folder path or an http(s):// URL; "" means none."""
    if value is None:
        return None, ""
    if not isinstance(value, str):
        return None, f"'bundle_source' must be a folder or an http(s):// URL, not {value!r}; no bundle updates"
    value = value.strip()
    if not value:
        return None, ""
    if len(value) > FOLDER_MAX or any(ord(c) < 32 for c in value):
        return None, "'bundle_source' is not a usable folder or URL (too long, or a control character)"
    if re.match(r"[a-z][a-z0-9+.-]*://", value, re.IGNORECASE) and \
            not re.match(r"(https?://[^/\s]+|file://.)", value, re.IGNORECASE):
        return None, (f"'bundle_source' must be a folder, or start with http:// or https://, not "
                      f"{value[:80]!r}; no bundle updates")
    return value, ""


def _bundle_keys(value):
    """The public keys that are valid (base64 of 32 bytes); each bad one is named and dropped."""
    if isinstance(value, str):
        value = [value]  # one key written without the brackets
    if not isinstance(value, (list, tuple)):
        return (), f"'bundle_keys' must be a list of base64 public keys, not {value!r}; no bundle is trusted"
    keys, bad = [], []
    for key in value:
        text = key.strip() if isinstance(key, str) else ""
        try:
            ok = len(base64.b64decode(text, validate=True)) == 32
        except (binascii.Error, ValueError):
            ok = False
        (keys if ok else bad).append(text if ok else key)
    problem = (f"'bundle_keys': {', '.join(repr(b)[:60] for b in bad)} "
               f"{'is not an Ed25519 public key' if len(bad) == 1 else 'are not Ed25519 public keys'} "
               "(base64 of 32 bytes); left out") if bad else ""
    return tuple(dict.fromkeys(keys)), problem
