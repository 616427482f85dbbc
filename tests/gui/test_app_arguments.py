"""`offline-assistant --version` and a --help written for the people who start the app (issue
15: it printed the module's docstring)."""

from __future__ import annotations

import pytest

from desktop_app.app import parse_args
from engine import __version__
from engine.paths import AppPaths


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag, capsys):
    with pytest.raises(SystemExit) as done:
        parse_args([flag])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"offline-assistant {__version__}\n"


def test_help_says_what_the_app_does_and_where_data_and_logs_go(capsys):
    with pytest.raises(SystemExit) as done:
        parse_args(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Entry point" not in text and "DATA_DIR" not in text  # not the module's docstring
    assert "answers questions from your own manuals" in text and "nothing is sent over the network" in text
    paths = AppPaths.default()
    assert f"Your data is kept in {paths.root}" in text
    assert f"{paths.log_file.relative_to(paths.root)} the log" in text
    assert str(paths.crash_log.relative_to(paths.root)) in text
    assert "cpu always uses the processor" in text  # --provider in plain words
    assert "offline-assistant-cli" in text


def test_a_remote_engine_can_be_given_for_one_run(capsys):
    args = parse_args(["--engine-url", "http://gpu-box:8080", "--engine-key", "k"])
    assert (args.engine_url, args.engine_key) == ("http://gpu-box:8080", "k")
    assert (parse_args([]).engine_url, parse_args([]).engine_key) == (None, None)  # settings.toml's, if any
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--engine-url URL" in text and "$OFFLINE_ASSISTANT_ENGINE_KEY" in text  # the key's safer way
