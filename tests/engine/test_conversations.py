"""Conversations persist as JSON files; a damaged one is set aside, never fatal."""

from __future__ import annotations

import json

import pytest

from engine.conversations import ConversationStore, history
from engine.errors import EngineError


def test_a_conversation_round_trips_and_lists_newest_first(tmp_path):
    store = ConversationStore(tmp_path / "conversations")
    first = store.create("Pump")
    first.messages += [{"role": "user", "content": "How do I prime it?"},
                       {"role": "assistant", "content": "Fill it [1].", "citations": [{"number": 1}]}]
    store.save(first)
    second = store.create("")
    assert second.title == "New conversation"
    again = ConversationStore(tmp_path / "conversations")
    assert [c.id for c in again.list()] == [second.id, first.id]
    loaded = again.get(first.id)
    assert loaded.messages == first.messages
    assert history(loaded.messages) == [{"role": "user", "content": "How do I prime it?"},
                                        {"role": "assistant", "content": "Fill it [1]."}]


def test_rename_and_delete(tmp_path):
    store = ConversationStore(tmp_path)
    chat = store.create("Old")
    assert store.rename(chat.id, "  New title ").title == "New title"
    assert store.get(chat.id).title == "New title"
    store.delete(chat.id)
    store.delete(chat.id)  # twice is fine
    assert store.list() == []
    with pytest.raises(EngineError, match="not there"):
        store.get(chat.id)


def test_a_damaged_file_is_set_aside_and_the_others_still_list(tmp_path):
    store = ConversationStore(tmp_path)
    good = store.create("Good")
    (tmp_path / "0123abcd.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "4567abcd.json").write_text(json.dumps({"id": "x"}), encoding="utf-8")
    assert [c.id for c in store.list()] == [good.id]
    assert sorted(p.name for p in tmp_path.glob("*.damaged")) == ["0123abcd.damaged", "4567abcd.damaged"]


def test_ids_that_are_paths_are_refused(tmp_path):
    with pytest.raises(EngineError, match="not a conversation id"):
        ConversationStore(tmp_path).get("../settings")


def test_no_temporary_file_is_left_behind(tmp_path):
    store = ConversationStore(tmp_path)
    store.save(store.create("x"))
    assert [p.suffix for p in tmp_path.iterdir()] == [".json"]


def test_a_saved_answer_keeps_its_checked_sentences_and_an_older_one_has_none():
    from engine.conversations import SavedAnswer
    from engine.types import CheckedSentence

    checked = (CheckedSentence(0, 12, True, 2, 0.81), CheckedSentence(13, 30, False, None, 0.2))
    saved = SavedAnswer("Fill it [2]. Reboot it twice.", well_supported=False, sentences=checked)
    message = json.loads(json.dumps(saved.to_message()))
    assert message["sentences"][1] == {"start": 13, "end": 30, "supported": False, "source": None, "score": 0.2}
    again = SavedAnswer.from_message(message)
    assert again.sentences == checked and again.well_supported is False
    del message["sentences"]
    assert SavedAnswer.from_message(message).sentences == ()


def test_what_was_set_aside_is_told_once(tmp_path):
    store = ConversationStore(tmp_path)
    (tmp_path / "0123abcd.json").write_text("not json", encoding="utf-8")
    assert store.list() == []
    [notice] = store.take_notices()
    assert "'0123abcd.damaged'" in notice and str(tmp_path) in notice
    assert store.take_notices() == [] and store.list() == [] and store.take_notices() == []
