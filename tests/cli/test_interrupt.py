"""SIGINT and SIGTERM (``upsertmat.interrupt``): raised at once outside a busy frame, recorded
inside one, never raised twice, a second one exits at once where asked; real signals sent to
this process (or to a child, for the exits). Spark's start-up under signals:
tests/spark/test_interrupt_startup.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from upsertmat.interrupt import Interrupted, StopSignals, call_interruptibly, interrupted


def test_outside_a_busy_frame_a_signal_raises_at_once_and_only_once() -> None:
    # What was installed before (Python's defaults, or PySpark's SIGINT handler when a Spark test
    # ran earlier in this worker) is what the frame must put back.
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    with StopSignals("test") as signals:
        with pytest.raises(Interrupted) as raised:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # not reached: the handler raises first
        assert raised.value.exit_code == 143 and raised.value.name == "SIGTERM"
        assert isinstance(raised.value, KeyboardInterrupt)
        assert signals() and signals.exit_code == 143 and signals.name == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # the clean-up the first one started is not cut
        assert signals.received == signal.SIGTERM
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_busy_frame_records_and_the_work_stops_at_its_boundary() -> None:
    with StopSignals("outer") as outer, StopSignals("inner", busy=True) as inner:
        assert not inner()
        os.kill(os.getpid(), signal.SIGINT)
        assert inner() and inner.exit_code == 130 and outer.received == signal.SIGINT
        with pytest.raises(Interrupted):
            inner.check()
    with StopSignals() as fresh:  # the next command starts clean
        assert not fresh()
        fresh.request(signal.SIGTERM)  # e.g. a key press
        assert fresh() and fresh.exit_code == 143


def test_call_interruptibly_returns_raises_and_can_be_cut() -> None:
    assert call_interruptibly(lambda: threading.current_thread().name) == "MainThread"  # no frame
    with StopSignals():
        assert call_interruptibly(lambda: threading.current_thread().name) == "upsertmat-interruptible"
        with pytest.raises(ZeroDivisionError):
            call_interruptibly(lambda: 1 // 0)
        release = threading.Event()
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(Interrupted):
                call_interruptibly(lambda: release.wait(600))  # blocks until the signal cuts the wait
        finally:
            release.set()
            timer.join()


FORCED = """
import os, signal, sys
from upsertmat.interrupt import StopSignals
with StopSignals("upsertmat x", busy=True, notice="stopping at the next boundary", force=True) as s:
    os.kill(os.getpid(), signal.SIGINT)
    assert s()
    os.kill(os.getpid(), signal.SIGTERM)
print("not reached")
"""


def test_a_second_signal_in_a_forcing_frame_exits_at_once_with_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", FORCED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 143, done.stderr
    assert done.stdout == ""
    assert done.stderr == "upsertmat x: interrupted again (SIGTERM): exiting now\n"


def test_interrupted_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert interrupted("upsertmat run", Interrupted(signal.SIGTERM), " while X") == 143
    assert interrupted("upsertmat run", KeyboardInterrupt()) == 130
    assert capsys.readouterr().err == (
        "upsertmat run: interrupted (SIGTERM) while X\nupsertmat run: interrupted (SIGINT)\n"
    )


def test_a_stop_that_takes_long_says_what_it_waits_for(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import upsertmat.interrupt

    monkeypatch.setattr(upsertmat.interrupt, "NOTICE_DELAY_SECONDS", 0.0)  # "long" at once
    with StopSignals("upsertmat x", busy=True, notice="stopping at the next boundary") as signals:
        os.kill(os.getpid(), signal.SIGINT)
        assert signals._timer is not None
        signals._timer.join(60)
        signals.say("interrupted (SIGINT) after 3 batches")
    with StopSignals("upsertmat y", busy=True, notice="never shown") as quick:
        monkeypatch.setattr(upsertmat.interrupt, "NOTICE_DELAY_SECONDS", 600.0)
        os.kill(os.getpid(), signal.SIGTERM)
        quick.say("interrupted (SIGTERM)")  # the stop came first: no notice
    assert capfd.readouterr().err == (
        "upsertmat x: stopping at the next boundary\nupsertmat x: interrupted (SIGINT) after 3 batches\n"
        "upsertmat y: interrupted (SIGTERM)\n"
    )
