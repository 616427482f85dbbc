"""ScriptedLLM: a model that writes a given text, for tests of everything around the model
(the answer guard, the fence, the CLI's printing, hostile answers) with no model runtime."""

from __future__ import annotations

import re

from engine.llm.local import GenerationStream
from engine.types import GenerationStats
from tests.helpers.streamed_pieces import pieces_of


class ScriptedLLM:
    """A model that writes `script`, `size` characters a piece, whatever it is asked, with
    "{marker}" replaced by the prompt's fence marker. Like LocalLLM it checks the cancel flag
    before each piece. One token per two characters (real tokenizers give about four), so the
    prompt's fixed pieces leave room for the small test passages within the default budget."""

    context_length = 1_000_000

    def __init__(self, script: str, size: int = 3):
        self.script = script
        self.size = size
        self.written = 0  # the pieces written for the last request

    def count_tokens(self, text: str) -> int:
        return (len(text) + 1) // 2

    def template_tokens(self, messages: int) -> int:
        return 0  # the prompt reserves grounding.TEMPLATE_TOKENS all the same

    def stream(self, messages, *, max_new_tokens, temperature, cancel=None) -> GenerationStream:
        marker = re.search(r"<<([0-9a-f]+)>>", messages[-1]["content"])
        return GenerationStream(self._write(self.script.replace("{marker}", marker.group(1)), cancel))

    def _write(self, text: str, cancel):
        self.written, finish = 0, "stop"
        for piece in pieces_of(text, self.size):
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
                break
            self.written += 1
            yield piece
        yield GenerationStats(prompt_tokens=1, new_tokens=self.written, time_to_first_token_s=0.0,
                              tokens_per_s=0.0, total_s=0.0, finish_reason=finish, provider="scripted")
