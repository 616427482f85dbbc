"""Settings: TOML in the data dir; a bad file or value never stops the app, a save is atomic."""

from __future__ import annotations

import logging
import os
import tomllib
from dataclasses import replace

import pytest

from engine.answer.assistant import AssistantSettings
from engine.config import Settings, load_settings, save_settings

EDITED = Settings(model='my "tuned" model\\v2 – ünï', temperature=0.7, max_new_tokens=320,
                  passages=6, use_reranker=False, font_size=18, theme="dark")


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_a_missing_file_gives_the_defaults(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        settings = load_settings(tmp_path / "settings.toml")
    assert settings == Settings()
    assert settings == Settings(model=None, temperature=0.0, max_new_tokens=192, passages=4,
                                use_reranker=True, font_size=11, theme="light")
    assert caplog.records == []


@pytest.mark.parametrize("settings", [EDITED, Settings(), replace(EDITED, model=None)])
def test_settings_survive_a_save_and_a_load(tmp_path, settings):
    path = tmp_path / "settings.toml"
    save_settings(path, settings)
    assert load_settings(path) == settings
    assert sorted(os.listdir(tmp_path)) == ["settings.toml"]  # no temporary file is left


def test_the_file_is_plain_toml_a_person_can_edit(tmp_path):
    path = tmp_path / "settings.toml"
    save_settings(path, EDITED)
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data == {"model": 'my "tuned" model\\v2 – ünï', "temperature": 0.7,
                    "max_new_tokens": 320, "passages": 6, "use_reranker": False, "ocr": True,
                    "font_size": 18, "theme": "dark", "source_zoom": 0.0, "kiosk": False, "idle_reset_min": 3.0,
                    "admin_relock_min": 2.0, "audit_log": False, "inbox_poll_s": 10.0,
                    "bundle_keys": [], "bundle_poll_s": 60.0}
    assert 'theme = "dark"' in path.read_text(encoding="utf-8")


def test_control_characters_in_a_model_name_are_escaped(tmp_path):
    path = tmp_path / "settings.toml"
    save_settings(path, Settings(model="a\tb\x7fc\x01d"))
    assert load_settings(path).model == "a\tb\x7fc\x01d"


def test_a_lone_surrogate_in_a_model_name_is_saved_as_a_replacement_character(tmp_path):
    path = tmp_path / "settings.toml"
    save_settings(path, Settings(model="pump\udcffmodel"))
    assert load_settings(path).model == "pump\ufffdmodel"


@pytest.mark.parametrize("text", [
    "this is [not toml",
    'theme = "dark"\ntheme = "light"\n',  # a duplicate key is invalid TOML
    "\udcff",
])
def test_a_damaged_file_gives_the_defaults_and_a_warning(tmp_path, caplog, text):
    path = tmp_path / "settings.toml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with caplog.at_level(logging.WARNING, logger="engine.config"):
        assert load_settings(path) == Settings()
    assert "damaged" in caplog.text and str(path) in caplog.text


def test_an_unreadable_file_gives_the_defaults_and_a_warning(tmp_path, caplog):
    (tmp_path / "settings.toml").mkdir()
    with caplog.at_level(logging.WARNING, logger="engine.config"):
        assert load_settings(tmp_path / "settings.toml") == Settings()
    assert "Could not read" in caplog.text


def test_wrong_values_fall_back_one_by_one(tmp_path, caplog):
    path = write(tmp_path / "settings.toml", "\n".join([
        'temperature = "hot"',
        "max_new_tokens = 256",
        "passages = true",  # a bool is not a number here
        'use_reranker = "yes"',
        "font_size = 14.0",  # a whole float is fine
        "theme = 3",
        "model = 42",
        'future_option = "ignored"',
        "[some_table]",
        "x = 1",
    ]))
    with caplog.at_level(logging.WARNING, logger="engine.config"):
        settings = load_settings(path)
    assert settings == Settings(max_new_tokens=256, font_size=14)
    for name in ("temperature", "passages", "use_reranker", "theme", "model"):
        assert f"'{name}'" in caplog.text
    assert "future_option" not in caplog.text and "max_new_tokens" not in caplog.text


@pytest.mark.parametrize("line, expected", [
    ("temperature = 5.5", Settings(temperature=2.0)),
    ("temperature = -1", Settings(temperature=0.0)),
    ("temperature = nan", Settings()),
    ("temperature = inf", Settings()),
    ("temperature = 1", Settings(temperature=1.0)),
    ("max_new_tokens = 1", Settings(max_new_tokens=16)),
    ("max_new_tokens = 100000", Settings(max_new_tokens=1024)),
    ("max_new_tokens = 64.5", Settings()),
    ("passages = 0", Settings(passages=1)),
    ("passages = 99", Settings(passages=8)),
    ("font_size = 2", Settings(font_size=8)),
    ("font_size = 96", Settings(font_size=32)),
    ('theme = "Dark"', Settings(theme="dark")),
    ('theme = "blue"', Settings()),
    ('model = ""', Settings()),
    ('model = "built-in"', Settings()),
    ('model = "  phi-mini  "', Settings(model="phi-mini")),
    ("idle_reset_min = 0.01", Settings(idle_reset_min=0.5)),
    ("idle_reset_min = 1000", Settings(idle_reset_min=240.0)),
    ("idle_reset_min = 10", Settings(idle_reset_min=10.0)),
    ("admin_relock_min = 0", Settings(admin_relock_min=0.5)),
    ("admin_relock_min = 90", Settings(admin_relock_min=60.0)),
    ('kiosk = "yes"', Settings()),
    ("audit_log = 1", Settings()),
])
def test_values_are_clamped_to_sane_ranges(tmp_path, line, expected):
    assert load_settings(write(tmp_path / "settings.toml", line + "\n")) == expected


def test_kiosk_options_survive_a_save_and_a_load(tmp_path):
    path = write(tmp_path / "settings.toml", "kiosk = true\nidle_reset_min = 5\nadmin_relock_min = 1.5\n"
                                             "audit_log = true\n")
    settings = load_settings(path)
    assert settings == Settings(kiosk=True, idle_reset_min=5.0, admin_relock_min=1.5, audit_log=True)
    assert isinstance(settings.idle_reset_min, float)
    save_settings(path, settings)
    assert load_settings(path) == settings
    assert Settings().kiosk is False and Settings().audit_log is False


def test_clamping_is_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="engine.config"):
        load_settings(write(tmp_path / "s.toml", "passages = 50\n"))
    assert "'passages' = 50 is outside 1..8; using 8" in caplog.text


def test_settings_made_in_code_are_clamped_too():
    assert Settings(temperature=9, passages=0, font_size=100, theme="neon") == Settings(
        temperature=2.0, passages=1, font_size=32, theme="light")
    assert isinstance(Settings(temperature=1).temperature, float)


def test_a_failed_save_leaves_the_old_file_whole_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "settings.toml"
    save_settings(path, EDITED)
    before = path.read_bytes()

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match=f"The disk holding {tmp_path} is full"):  # DiskFullError
        save_settings(path, Settings())
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["settings.toml"]


def test_save_creates_the_folder_and_replaces_an_older_file(tmp_path):
    path = tmp_path / "data" / "settings.toml"
    save_settings(path, Settings())
    save_settings(path, EDITED)
    assert load_settings(path) == EDITED
    assert sorted(os.listdir(path.parent)) == ["settings.toml"]


def test_assistant_settings_carry_the_answer_options():
    assistant = EDITED.assistant_settings()
    assert isinstance(assistant, AssistantSettings)
    assert (assistant.passages, assistant.max_new_tokens, assistant.temperature) == (6, 320, 0.7)
    defaults = AssistantSettings()
    assert assistant.prompt_budget_tokens == defaults.prompt_budget_tokens
    assert Settings().assistant_settings() == defaults


# -- the kiosk's inbox folder ------------------------------------------------------------------
def test_the_inbox_folder_and_its_poll_interval_survive_a_save_and_a_load(tmp_path):
    path = write(tmp_path / "settings.toml", 'inbox_folder = "  /srv/manuals/inbox  "\ninbox_poll_s = 30\n')
    settings = load_settings(path)
    assert settings == Settings(inbox_folder="/srv/manuals/inbox", inbox_poll_s=30.0)
    assert isinstance(settings.inbox_poll_s, float)
    save_settings(path, settings)
    assert load_settings(path) == settings
    assert Settings().inbox_folder is None and Settings().inbox_poll_s == 10.0


def test_no_inbox_folder_is_written_as_a_comment(tmp_path):
    path = tmp_path / "settings.toml"
    save_settings(path, Settings())
    text = path.read_text(encoding="utf-8")
    assert "# inbox_folder = (none: no watched inbox folder)" in text
    assert "# model = (the built-in model)" in text
    assert "inbox_folder" not in tomllib.loads(text)


@pytest.mark.parametrize("line, expected", [
    ('inbox_folder = ""', None),
    ('inbox_folder = "   "', None),
    ("inbox_folder = 42", None),
    ("inbox_folder = true", None),
    ('inbox_folder = ["/a", "/b"]', None),
    ('inbox_folder = "/a\\u0000b"', None),
    ('inbox_folder = "' + "x" * 5000 + '"', None),
    ('inbox_folder = "C:\\\\Manuals\\\\Inbox"', "C:\\Manuals\\Inbox"),
    ('inbox_folder = "//server/share/inbox"', "//server/share/inbox"),
])
def test_a_bad_inbox_folder_means_no_inbox(tmp_path, line, expected):
    assert load_settings(write(tmp_path / "settings.toml", line + "\n")).inbox_folder == expected


@pytest.mark.parametrize("line, expected", [
    ("inbox_poll_s = 0.05", 2.0),
    ("inbox_poll_s = 0", 2.0),
    ("inbox_poll_s = 99999", 3600.0),
    ("inbox_poll_s = 60", 60.0),
    ("inbox_poll_s = nan", 10.0),
    ('inbox_poll_s = "10"', 10.0),
    ("inbox_poll_s = true", 10.0),
])
def test_the_inbox_poll_interval_is_clamped(tmp_path, line, expected):
    assert load_settings(write(tmp_path / "settings.toml", line + "\n")).inbox_poll_s == expected


def test_a_bad_inbox_folder_is_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="engine.config"):
        settings = load_settings(write(tmp_path / "s.toml", "inbox_folder = 7\ninbox_poll_s = 1\n"))
    assert settings.inbox_folder is None
    assert "'inbox_folder' must be a folder path" in caplog.text
    assert "'inbox_poll_s' = 1.0 is outside 2..3600; using 2.0" in caplog.text
    assert Settings(inbox_folder=3, inbox_poll_s=0).inbox_folder is None  # made in code: the same rules


def test_a_damaged_file_is_set_aside_and_said_once(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_bytes(b"font_size = \xff")
    told: list[str] = []
    assert load_settings(path, told) == Settings()
    assert len(told) == 1 and str(path) in told[0] and "settings.toml.damaged" in told[0]
    assert (tmp_path / "settings.toml.damaged").read_bytes() == b"font_size = \xff" and not path.exists()
    told.clear()
    assert load_settings(path, told) == Settings() and told == []  # nothing left to tell


def test_the_source_zoom_is_kept_and_a_wrong_one_falls_back_to_fit_width(tmp_path):
    path = tmp_path / "settings.toml"
    save_settings(path, Settings(source_zoom=1.5625))
    assert load_settings(path).source_zoom == 1.5625
    path.write_text('source_zoom = "big"\n', encoding="utf-8")
    assert load_settings(path).source_zoom == 0.0
    assert Settings(source_zoom=40.0).source_zoom == 6.0
