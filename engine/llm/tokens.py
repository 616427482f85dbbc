"""TokenCounter: a model's tokens counted in the caller's process, from its folder's tokenizer.json.

The counts are onnxruntime-genai's own (tests compare them on the tiny and the built-in
model): both read the same tokenizer.json, and neither adds special tokens to a piece of text
here; the chat template writes those, and LocalLLM measures what the template adds
(`template_tokens`). So the caller counts a prompt's pieces without asking the model process.
"""

from __future__ import annotations

from pathlib import Path

from engine.errors import ModelError

TOKENIZER_FILE = "tokenizer.json"


class TokenCounter:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer  # a tokenizers.Tokenizer, with no truncation nor padding

    @classmethod
    def from_folder(cls, folder: str | Path) -> "TokenCounter | None":
        """The counter of a model folder; None when it has no tokenizer.json (a SentencePiece
        tokenizer.model only), which only the model's own tokenizer can count."""
        file = Path(folder) / TOKENIZER_FILE
        if not file.is_file():
            return None
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            raise ModelError(
                f"The tokenizer of the model in '{folder}' could not be read ({exc}); "
                "prepare the model again with 'offline-assistant-cli models prepare'."
            ) from exc
        # A tokenizer.json may ask to cut or pad every text; a count must see all of it.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return cls(tokenizer)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
