"""Options for every test run, from the repository root.

Tests marked ``slow`` (long statistical runs, the standalone-cluster run)
are skipped unless asked for: ``python -m pytest --slow`` runs everything,
``python -m pytest --slow -m slow`` only them.  CI runs the default (the
suite must stay under ten minutes on two cores).
"""

import os

import pytest

# numba's on-disk cache is not safe for processes that compile one function
# at the same moment (numba issues 4807 and 10128: a cache written by two at
# once can crash every later load); ehist.compiled compiles and loads under a
# lock per cache directory, so the pytest-xdist workers, and the Spark
# workers their sessions start, share one cache: what one worker compiled the
# other loads (each compiled every loop itself when they had one each)
if os.environ.get("PYTEST_XDIST_WORKER") and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".numba_cache", "shared")


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (skipped by default)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with python -m pytest --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
