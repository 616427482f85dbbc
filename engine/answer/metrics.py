"""Answer metrics in the Prometheus text exposition format (version 0.0.4), for a /metrics page.

    metrics = Metrics()
    assistant = Assistant(retriever, llm, metrics=metrics)
    ...
    print(metrics.render())

Thread-safe: the GUI's worker records while a server thread may render.
"""

from __future__ import annotations

import threading

# Seconds: from a 1 ms keyword search up to a long answer on a slow CPU.
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PREFIX = "offline_assistant"


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out = [f'{name}_bucket{{{labels}{sep}le="{_number(b)}"}} {c}' for b, c in zip(self.buckets, self.counts)]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.total}')
        out.append(f"{name}_sum{{{labels}}} {_number(self.sum)}" if labels else f"{name}_sum {_number(self.sum)}")
        out.append(f"{name}_count{{{labels}}} {self.total}" if labels else f"{name}_count {self.total}")
        return out


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self._stages: dict[str, _Histogram] = {}
        self._first_token = _Histogram(STAGE_BUCKETS)
        self._answers = {"true": 0, "false": 0}
        self._errors: dict[str, int] = {}
        self._tokens = {"prompt": 0, "generated": 0}

    def record_answer(self, stats) -> None:
        """Takes an engine.answer.assistant.AnswerStats."""
        with self._lock:
            for stage, seconds in stats.timings_s.items():
                self._stages.setdefault(stage, _Histogram(STAGE_BUCKETS)).observe(seconds)
            if stats.time_to_first_token_s is not None:
                self._first_token.observe(stats.time_to_first_token_s)
            self._answers["true" if stats.answerable else "false"] += 1
            self._tokens["prompt"] += stats.prompt_tokens
            self._tokens["generated"] += stats.new_tokens

    def record_error(self, kind: str) -> None:
        with self._lock:
            self._errors[kind] = self._errors.get(kind, 0) + 1

    def render(self) -> str:
        with self._lock:
            return "\n".join(self._stage_lines() + self._first_token_lines() + self._counter_lines()) + "\n"

    def _stage_lines(self) -> list[str]:
        name = f"{PREFIX}_stage_seconds"
        lines = [f"# HELP {name} Time spent in each stage of answering a question.",
                 f"# TYPE {name} histogram"]
        for stage in sorted(self._stages):
            lines += self._stages[stage].lines(name, f'stage="{_escape(stage)}"')
        return lines

    def _first_token_lines(self) -> list[str]:
        name = f"{PREFIX}_time_to_first_token_seconds"
        return [f"# HELP {name} From the question to the answer's first token, retrieval included.",
                f"# TYPE {name} histogram", *self._first_token.lines(name, "")]

    def _counter_lines(self) -> list[str]:
        answers, errors, tokens = f"{PREFIX}_answers_total", f"{PREFIX}_errors_total", f"{PREFIX}_tokens_total"
        lines = [f"# HELP {answers} Questions answered; answerable=\"false\" when the manuals did not cover it.",
                 f"# TYPE {answers} counter"]
        lines += [f'{answers}{{answerable="{k}"}} {v}' for k, v in self._answers.items()]
        lines += [f"# HELP {errors} Questions that ended in an error, by kind.", f"# TYPE {errors} counter"]
        lines += [f'{errors}{{kind="{_escape(k)}"}} {v}' for k, v in sorted(self._errors.items())]
        lines += [f"# HELP {tokens} Tokens the model read and wrote.", f"# TYPE {tokens} counter"]
        lines += [f'{tokens}{{kind="{k}"}} {v}' for k, v in self._tokens.items()]
        return lines


def _number(value: float) -> str:
    return repr(float(value))  # "0.005", "1.0": what Prometheus client libraries write


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
