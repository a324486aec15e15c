"""An interrupt that lands inside SQLAlchemy (the MLflow store's flush) is raised once the main
thread is back in code that unwinds cleanly, never inside the store's session."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator

import pytest

from paraeval.pipeline.cli import main as cli
from paraeval.pipeline.errors import Interrupted, RunContext

# the command's run context and its handler (each test leaves it as it found it)
CONTEXT = RunContext()
ON_SIGNAL = cli.signal_handler(CONTEXT)

# a function whose frames look like SQLAlchemy's to the handler
_STORE_CODE = """
def flush(seconds, on_signal, signum):
    on_signal(signum, sys._getframe())
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # the store keeps working; no exception may surface here
        pass
    return "flushed"
"""


@pytest.fixture
def handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    yield
    CONTEXT.taken()
    for s, h in saved.items():
        signal.signal(s, h)


def _store_flush() -> object:
    scope: dict[str, object] = {"__name__": "sqlalchemy.orm.session", "sys": sys, "time": time}
    exec(_STORE_CODE, scope)
    return scope["flush"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_inside_the_store_is_raised_after_it(handlers: None, signum: int) -> None:
    flush = _store_flush()
    results = []
    with pytest.raises(Interrupted) as caught:
        results.append(flush(0.3, ON_SIGNAL, signum))  # type: ignore[operator]
        time.sleep(2)  # back in plain code: the pending interrupt arrives within the retry period
    assert results == ["flushed"]  # the store's work ran to its end first
    assert caught.value.signum == signum
    assert caught.value.status == 128 + signum
    # later signals are ignored while the cleanup runs
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_signal_in_plain_code_is_raised_at_once(handlers: None) -> None:
    caught: Interrupted | None = None
    try:
        ON_SIGNAL(signal.SIGTERM, sys._getframe())
    except Interrupted as exc:
        caught = exc
        # kept, with the retry timer running, until the code that acts on it takes it
        kept, timer = list(CONTEXT.raised_signals), signal.getitimer(signal.ITIMER_REAL)[0]
        CONTEXT.taken()  # what the command's handler does first
    assert caught is not None and caught.name == "SIGTERM"
    assert not CONTEXT.deferred_signals
    assert kept == [signal.SIGTERM]
    assert timer > 0
    assert not CONTEXT.raised_signals
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_raised_signal_is_not_raised_again_while_it_unwinds(handlers: None) -> None:
    """The retry timer leaves alone an interrupt that is on its way out: in the ``finally``
    blocks it runs through (the cleanup that marks MLflow runs KILLED) nothing is raised again."""
    cleaned = []
    caught = []
    try:
        try:
            ON_SIGNAL(signal.SIGINT, sys._getframe())
        finally:
            end = time.monotonic() + 0.3  # many retry periods of cleanup
            while time.monotonic() < end:
                pass
            cleaned.append(True)
    except Interrupted as exc:
        caught.append(exc.name)
        CONTEXT.taken()
    assert cleaned == [True]
    assert caught == ["SIGINT"]


# a run's process whose os.fork runs a callback (as logging registers one) that the signal lands
# in: Python prints the exception raised there as "ignored" and goes on
_SWALLOWED = """
import os, signal, sys, time
from paraeval.pipeline.cli import main as cli
from paraeval.pipeline.errors import RunContext
from paraeval.pipeline.errors import Interrupted

context = RunContext()
def after_fork_in_parent():
    os.kill(os.getpid(), signal.SIGINT)
    end = time.monotonic() + 0.05
    while time.monotonic() < end:  # the signal is handled in this callback's frame
        pass

signal.signal(signal.SIGINT, cli.signal_handler(context))
os.register_at_fork(after_in_parent=after_fork_in_parent)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(3)
    print("finished as if not interrupted")
except Interrupted as exc:
    context.taken()
    print("interrupted", exc.name)
"""


def test_a_signal_swallowed_where_it_landed_is_raised_again() -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", _SWALLOWED], capture_output=True, text=True, timeout=60
    )
    assert "Exception ignored" in proc.stderr  # it did land where Python swallows it
    assert proc.stdout.strip() == "interrupted SIGINT", proc.stderr


def test_real_signal_during_store_work_is_deferred(handlers: None) -> None:
    import os

    signal.signal(signal.SIGTERM, ON_SIGNAL)
    scope: dict[str, object] = {"__name__": "sqlalchemy.engine.base", "time": time, "os": os}
    exec(
        "def execute(pid, signum):\n"
        "    os.kill(pid, signum)\n"
        "    end = time.monotonic() + 0.3\n"
        "    while time.monotonic() < end:\n"
        "        pass\n"
        "    return 'committed'\n",
        scope,
    )
    start = time.monotonic()
    results = []
    with pytest.raises(Interrupted):
        results.append(scope["execute"](os.getpid(), signal.SIGTERM))  # type: ignore[operator]
        time.sleep(2)
    assert results == ["committed"]
    assert time.monotonic() - start < 1.5


def test_a_deferred_signal_is_raised_at_the_next_checkpoint_once(handlers: None) -> None:
    """The tracker's checkpoints between store calls raise a deferred interrupt even where the
    retry timer only ever fires inside the store; once: the timer is stopped with it."""
    flush = _store_flush()
    assert flush(0.0, ON_SIGNAL, signal.SIGTERM) == "flushed"  # type: ignore[operator]
    assert CONTEXT.deferred_signals == [signal.SIGTERM]
    with pytest.raises(Interrupted) as caught:
        CONTEXT.raise_deferred()
    assert caught.value.signum == signal.SIGTERM
    assert not CONTEXT.deferred_signals
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    CONTEXT.raise_deferred()  # nothing left to raise
    cli._raise_pending(
        CONTEXT, signal.SIGALRM, sys._getframe()
    )  # a late alarm raises nothing either


@pytest.mark.parametrize("where", ["weakref", "__del__"])
def test_a_signal_where_an_exception_would_be_ignored_is_deferred(
    handlers: None, where: str
) -> None:
    """Python prints an exception raised in a weakref callback (WeakValueDictionary's, run by
    the collector) or a ``__del__`` as "ignored" and goes on: raised there, the interrupt would
    be lost and the run would end with status 0. It is deferred to the next checkpoint."""
    if where == "weakref":
        scope: dict[str, object] = {
            "__name__": "weakref",
            "sys": sys,
            "on_signal": ON_SIGNAL,
            "signal": signal,
        }
        exec("def remove(wr):\n    on_signal(signal.SIGINT, sys._getframe())\n", scope)
        scope["remove"](None)  # type: ignore[operator]
    else:

        class Held:
            def __del__(self) -> None:
                ON_SIGNAL(signal.SIGINT, sys._getframe())

        held = Held()
        del held
    assert CONTEXT.deferred_signals == [signal.SIGINT]  # deferred, not raised into the void
    with pytest.raises(Interrupted):
        CONTEXT.raise_deferred()
