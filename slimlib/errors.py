"""Exceptions raised by slimlib. Every message says what was wrong, where, and what to do."""

from __future__ import annotations


class SlimError(Exception):
    """Base class of every error slimlib raises on purpose; the CLI prints it as one line."""


class DataError(SlimError, ValueError):
    """Bad input data: a missing column, a non-numeric or out-of-range value, a malformed file."""


class DataUnavailableError(DataError):
    """A table that has not been produced yet (e.g. GPU-kit tables before a campaign); the message says how."""


class UnknownNameError(SlimError, KeyError):
    """An unknown model, GPU, dataset or scenario name; the message lists the closest known names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM received while a `slim` command runs (raised by its handler, and again where an output
    would be committed when the first one was swallowed, e.g. inside a finalizer)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: the first SIGINT/SIGTERM a `slim` command received (its handler records it here before raising)
_received: list[int] = []


def note_interrupt(signum: int) -> None:
    """Record that `signum` arrived; from now on no output is committed (`check_interrupted`)."""
    if not _received:
        _received.append(int(signum))


#: True while `slimlib.io` commits an output (or registers a temporary file): the handler then records a signal
#: and lets the step finish; the next `check_interrupted` raises it
_deferring: list[bool] = [False]


def set_deferring(on: bool) -> bool:
    """Set whether a signal is only recorded (True) or also raised at once (False); returns the previous setting."""
    previous = _deferring[0]
    _deferring[0] = bool(on)
    return previous


def interrupts_deferred() -> bool:
    """True while a step no interrupt may cut short is running (`set_deferring`)."""
    return _deferring[0]


def interrupt_received() -> int | None:
    """The signal number recorded by `note_interrupt`, or None."""
    return _received[0] if _received else None


def clear_interrupt() -> None:
    """Forget a recorded signal (the `slim` entry point, at the start of each command)."""
    _received.clear()


def check_interrupted() -> None:
    """Raise `Interrupted` when a signal was recorded, even if its first exception was swallowed (a finalizer's
    ``Exception ignored in ...``): work loops call it, and every commit of an output does."""
    if _received:
        raise Interrupted(_received[0])


class FitError(SlimError, RuntimeError):
    """A calibration that cannot run (too few rows) or does not converge."""


class NotFittedError(SlimError, AttributeError):
    """A model used before `fit` (or `from_json`)."""


def close_matches_message(kind: str, name: str, known: list[str], n: int = 5) -> str:
    """Message for an unknown `name` of `kind`, listing the closest of `known`."""
    import difflib

    close = difflib.get_close_matches(str(name).lower(), [k.lower() for k in known], n=n, cutoff=0.3)
    # map back to the original spelling
    lower_to_orig = {k.lower(): k for k in known}
    close = [lower_to_orig[c] for c in close]
    hint = f"closest known: {', '.join(close)}" if close else f"known: {', '.join(sorted(known)[:20])}"
    shown = str(name) if len(str(name)) <= 80 else str(name)[:77] + "..."
    return f"unknown {kind} {shown!r}; {hint}"
