"""A clock that stands still until a test moves it: `clock.now += 61`."""


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
