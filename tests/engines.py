"""The two engines of the columnar paths, for tests to run both: the
compiled loops (ehist.compiled, with numba) and numpy alone."""

from __future__ import annotations

import contextlib

import pytest

from ehist import compiled

#: pytest params: "auto" (compiled when numba is installed) and "numpy".
ENGINES = [pytest.param("auto", id="compiled", marks=pytest.mark.skipif(not compiled.AVAILABLE, reason="no numba")),
           pytest.param("numpy", id="numpy")]


@contextlib.contextmanager
def engine(name):
    """Run the block with the compiled loops (``"auto"``) or without them (``"numpy"``)."""
    before, compiled.USE = compiled.USE, name != "numpy"
    try:
        yield
    finally:
        compiled.USE = before
