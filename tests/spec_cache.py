"""Each spec of specs/ loaded once per test process, at its own params, for the modules that sort the specs at
import time (which the solver refuses, which the Promela export refuses, which have loop params). Collection used
to load every spec a dozen times over, about 25 s of each test worker's start; the protocols are frozen, so one
loaded copy serves them all."""

from __future__ import annotations

import functools

from syncverify import ir
from syncverify.lang import load


@functools.cache
def loaded(path: str) -> ir.Protocol:
    return load(path)
