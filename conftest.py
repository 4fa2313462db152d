"""Options for every test run, from the repository root.

Tests marked ``slow`` (long statistical runs, the standalone-cluster run)
are skipped unless asked for: ``python -m pytest --slow`` runs everything,
``python -m pytest --slow -m slow`` only them.  CI runs the default (the
suite must stay under ten minutes on two cores).
"""

import pytest


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
