"""LocalLLM: a chat model on onnxruntime-genai, streamed token by token.

onnxruntime-genai holds Python's GIL while it runs, so an interactive caller should use
`engine.llm.process.LLMClient`, which runs this class in a separate process with the same API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Generator, Iterator, Sequence
from pathlib import Path

from engine.encoders.onnx_session import physical_cores
from engine.errors import GenerationError, ModelError
from engine.llm.prompt_cache import PREFILL_CHUNK, Kept, PromptCache, prompt_cuts
from engine.models.hardware import choose_provider
from engine.types import CancelFlag, GenerationParams, GenerationResult, GenerationStats, GenerationStream

Message = dict  # {"role": "system" | "user" | "assistant", "content": str}
_PROBE = "Hello."  # the contents of the chats that measure the chat template


def prompt_pieces(generator, ids, cancel: CancelFlag | None = None, *, start: int = 0,
                  ends: Collection[int] = (), chunk: int = PREFILL_CHUNK) -> Generator[str, None, bool]:
    """Feeds the prompt's token ids from `start` (a cut: the generator holds those before it) to
    an onnxruntime-genai generator, piece by piece as prompt_cuts says, yielding "" (no text yet)
    between pieces: there the model's process gives its other generations a turn. Returns False
    when `cancel` was set before the whole prompt was in."""
    import numpy as np

    ids = np.asarray(ids, dtype=np.int32)
    bounds = [c for c in prompt_cuts(ids.tolist(), ends, chunk) if c > start] + [len(ids)]
    for index, end in enumerate(bounds):
        if index:
            yield ""
        if cancel is not None and cancel.is_set():
            return False
        generator.append_tokens(ids[start:end])
        start = end
    return True


def append_prompt(generator, ids, cancel: CancelFlag | None = None, **cuts) -> bool:
    """prompt_pieces without the pauses: the whole prompt in at once."""
    pieces = prompt_pieces(generator, ids, cancel, **cuts)
    while True:
        try:
            next(pieces)
        except StopIteration as done:
            return done.value


class LocalLLM:
    def __init__(self, model_dir: str | Path, provider: str = "auto", threads: int | None = None,
                 prompt_cache_mib: int = 0):
        """threads: onnxruntime's threads for the model (None: this machine's physical cores;
        left to itself, onnxruntime-genai ran one thread on a 2-core machine, 40% slower). A
        model folder whose genai_config.json sets intra_op_num_threads keeps its own.
        prompt_cache_mib: the KV caches of recent greedy answers kept for later prompts that
        begin the same way (engine.llm.prompt_cache), at most this many MiB; 0 keeps none (the
        window: its memory is measured; `serve` gives its processes --prompt-cache-mib)."""
        self.model_dir = Path(model_dir)
        self.requested_provider = provider
        self.threads = threads
        self.prompt_cache_mib = prompt_cache_mib
        self.prompt_cache = PromptCache(0, (), 0)
        self.provider: str | None = None
        self.context_length = 0
        self._model = None
        self._tokenizer = None
        self._chat_template: str | None = None
        self._added_tokens = 0  # special tokens the tokenizer adds to any text (a BOS)
        self.template_overhead = (0, 0)  # what the chat template adds: per chat, per message

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> "LocalLLM":
        if self._model is not None:
            return self
        import onnxruntime_genai as og

        from engine.models.genai_folder import check_genai_folder

        genai_config = check_genai_folder(self.model_dir)
        self.provider = choose_provider(self.requested_provider)
        config = og.Config(str(self.model_dir))
        config.clear_providers()
        if self.provider != "cpu":
            config.append_provider(self.provider)
        if "intra_op_num_threads" not in genai_config["model"]["decoder"].get("session_options", {}):
            config.overlay(json.dumps({"model": {"decoder": {"session_options": {
                "intra_op_num_threads": self.threads or physical_cores(), "inter_op_num_threads": 1}}}}))
        try:
            self._model = og.Model(config)
            self._tokenizer = og.Tokenizer(self._model)
        except Exception as exc:  # onnxruntime-genai raises plain RuntimeError
            raise ModelError(
                f"The model in '{self.model_dir}' could not be loaded ({exc}); "
                "prepare it again with 'offline-assistant-cli models prepare'."
            ) from exc
        self.context_length = int(genai_config["model"]["context_length"])
        self._chat_template = _read_chat_template(self.model_dir)
        self._added_tokens = len(self._tokenizer.encode(""))
        self.template_overhead = self._measure_template()
        budget = self.prompt_cache_mib * 2**20 // _kv_bytes_per_token(genai_config["model"]["decoder"])
        self.prompt_cache = PromptCache(budget, self._eos_ids(), self.context_length)
        return self

    def close(self) -> None:
        self.prompt_cache.clear()
        self._tokenizer = None
        self._model = None

    def __enter__(self) -> "LocalLLM":
        return self.load()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- text -----------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """The text's own tokens, without the special tokens the tokenizer adds to any text:
        the chat template's part is `template_tokens`."""
        return len(self._loaded_tokenizer().encode(text)) - self._added_tokens

    def template_tokens(self, messages: int) -> int:
        """What the chat template adds to a chat of that many messages (a system message
        first), so that a prompt's tokens are its contents' count_tokens plus this."""
        per_chat, per_message = self.template_overhead
        return per_chat + per_message * messages

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text for a chat, by the model's own chat template."""
        tokenizer = self._loaded_tokenizer()
        kwargs = {"add_generation_prompt": True}
        if self._chat_template:
            kwargs["template_str"] = self._chat_template
        return tokenizer.apply_chat_template(json.dumps(list(messages)), **kwargs)

    def prompt_ids(self, messages: Sequence[Message], max_new_tokens: int) -> list[int]:
        """Token ids of the prompt, as given: the caller fits it to its budget. Refuses a
        prompt that leaves the answer no room in the context (never shortens it)."""
        if not messages:
            raise GenerationError("Nothing to answer: the conversation is empty.")
        budget = self.context_length - max(1, min(max_new_tokens, self.context_length // 2))
        ids = list(self._loaded_tokenizer().encode(self.render(messages)))
        if len(ids) > budget:
            raise GenerationError(
                f"The message is too long for the model: {len(ids)} tokens, and the model "
                f"reads at most {budget} besides its answer. Shorten the question."
            )
        return ids

    def _measure_template(self) -> tuple[int, int]:
        """(per chat, per message), from two probe chats of two and four messages."""
        two = [{"role": "system", "content": _PROBE}, {"role": "user", "content": _PROBE}]
        four = [*two, {"role": "assistant", "content": _PROBE}, {"role": "user", "content": _PROBE}]
        short, long = self._added_by_template(two), self._added_by_template(four)
        per_message = max(0, -(-(long - short) // 2))  # rounded up: never too few
        return short - 2 * per_message, per_message

    def _added_by_template(self, messages: list[Message]) -> int:
        ids = self._loaded_tokenizer().encode(self.render(messages))
        return len(ids) - sum(self.count_tokens(m["content"]) for m in messages)

    # -- generation -----------------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 50,
        seed: int | None = None,
        cancel: CancelFlag | None = None,
    ) -> GenerationStream:
        params = GenerationParams(max_new_tokens, temperature, top_p, top_k, seed)
        return GenerationStream(self._run(messages, params, cancel))

    def generate(self, messages: Sequence[Message], **kwargs) -> GenerationResult:
        return self.stream(messages, **kwargs).collect()

    def _run(self, messages, params: GenerationParams, cancel) -> Iterator[str | GenerationStats]:
        import onnxruntime_genai as og

        if params.max_new_tokens < 1:
            raise GenerationError("max_new_tokens must be at least 1.")
        start = time.perf_counter()
        prompt = self.prompt_ids(messages, params.max_new_tokens)
        new_limit = min(params.max_new_tokens, self.context_length - len(prompt))
        needed = len(prompt) + new_limit
        greedy = params.temperature <= 0  # a kept generator was made greedy: only greedy share them
        kept = self.prompt_cache.take(prompt, needed) if greedy else None
        if kept is None:
            capacity = self.prompt_cache.capacity_for(needed) if greedy else needed
            kept = Kept(og.Generator(self._model, self._search_params(params, capacity)), prompt, capacity)
        generator, held = kept.generator, kept.held
        decoder = self._tokenizer.create_stream()
        first_token_at = None
        new_tokens, finish = 0, "length"
        prompt_in = yield from prompt_pieces(generator, prompt, cancel, start=held, ends=self.prompt_cache.ends)
        if not prompt_in:
            new_limit = 0
            finish = "cancelled"
        while new_tokens < new_limit:
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
                break
            generator.generate_next_token()
            token = int(generator.get_next_tokens()[0])
            if first_token_at is None:
                first_token_at = time.perf_counter()
            if token in self._eos_ids():
                finish = "stop"
                break
            new_tokens += 1
            piece = decoder.decode(token)
            if piece:
                yield piece
        if greedy and prompt_in:  # kept also when its text was cut short (a stop string, a loop)
            self.prompt_cache.keep(Kept(generator, prompt, kept.capacity))
        del generator, kept
        yield self._stats(len(prompt), new_tokens, start, first_token_at, finish, held)

    def _search_params(self, params: GenerationParams, max_length: int):
        import onnxruntime_genai as og

        search = og.GeneratorParams(self._model)
        options = {"max_length": max_length, "batch_size": 1}
        if params.temperature <= 0:
            options.update(do_sample=False)
        else:
            options.update(
                do_sample=True,
                temperature=float(params.temperature),
                top_p=float(params.top_p),
                top_k=int(params.top_k),
            )
            if params.seed is not None:
                options["random_seed"] = int(params.seed)
        search.set_search_options(**options)
        return search

    def _eos_ids(self) -> set[int]:
        return {int(t) for t in self._tokenizer.eos_token_ids}

    def _stats(self, prompt_tokens, new_tokens, start, first_token_at, finish, cached=0) -> GenerationStats:
        end = time.perf_counter()
        first = first_token_at or end
        decode_s = end - first
        rate = (new_tokens - 1) / decode_s if new_tokens > 1 and decode_s > 0 else 0.0
        return GenerationStats(
            prompt_tokens=prompt_tokens,
            new_tokens=new_tokens,
            time_to_first_token_s=round(first - start, 4),
            tokens_per_s=round(rate, 2),
            total_s=round(end - start, 4),
            finish_reason=finish,
            provider=self.provider or "cpu",
            cached_tokens=cached,
        )

    def _loaded_tokenizer(self):
        if self._tokenizer is None:
            raise GenerationError("The model is not loaded; call load() first.")
        return self._tokenizer


def _kv_bytes_per_token(decoder: dict) -> int:
    """What one token's keys and values take in the KV cache, counted as float32 (an upper
    bound for a float16 cache)."""
    heads = decoder.get("num_key_value_heads") or decoder.get("num_attention_heads") or 1
    return max(1, 2 * 4 * int(decoder.get("num_hidden_layers", 1)) * int(heads) * int(decoder.get("head_size", 1)))


def _read_chat_template(model_dir: Path) -> str | None:
    config_file = model_dir / "tokenizer_config.json"
    if not config_file.is_file():
        return None
    template = json.loads(config_file.read_text(encoding="utf-8")).get("chat_template")
    return template if isinstance(template, str) else None
