"""Where the app keeps its data. Always passed around as an object, never a global."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "OfflineAssistant"
DEFAULT_COLLECTION = "default"


@dataclass(frozen=True)
class AppPaths:
    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def default(cls) -> "AppPaths":
        return cls(Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)))

    @classmethod
    def from_arg(cls, data_dir: str | Path | None) -> "AppPaths":
        return cls(Path(data_dir).expanduser().resolve()) if data_dir else cls.default()

    @property
    def models(self) -> Path:
        return self.root / "models"

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

    def ensure(self) -> "AppPaths":
        for folder in (self.root, self.models, self.collections, self.logs, self.conversations):
            folder.mkdir(parents=True, exist_ok=True)
        return self
