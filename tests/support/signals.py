"""A stand-in for a long-running function that sends this process a stop signal and
waits for the command's handler to interrupt it (the tests of what a command answers when
stopped mid-search)."""

from __future__ import annotations

import os
import time

import pytest


def signalling_stub(sig: int, what: str):
    """A function that sends ``sig`` to this process, then sleeps until the handler raises
    (failing the test if it does not: ``what`` went on after the stop signal)."""
    def stub(*args, **kwargs):
        os.kill(os.getpid(), sig)
        time.sleep(30)                    # the handler interrupts this
        pytest.fail(f"{what} went on after the stop signal")
    return stub
