"""Sphinx configuration of the ehist documentation.

Build it with ``python -m sphinx -W -b html docs docs/_build/html``
(``pip install -e ".[docs]"``); ``tests/test_docs.py`` builds it with
warnings as errors in every test run that has Sphinx, and runs the pages'
examples.
"""

from __future__ import annotations

import logging
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import ehist  # noqa: E402

project = "ehist"
author = "the ehist developers"
copyright = "2026, the ehist developers"  # noqa: A001 - Sphinx's name
release = version = ehist.__version__

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# numpydoc renders the docstrings; members are listed by autodoc's
# :members: (each package's __all__), not by numpydoc a second time
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"
# Public names re-exported by several modules are documented where the
# package exports them; the documents link to them by that name.
nitpicky = False

html_theme = "pydata_sphinx_theme"
html_title = "ehist"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}


class _SameExamplesLabel(logging.Filter):
    """Module docstrings each have an "Examples" section, which docutils
    labels "examples" on every API page that shows one: harmless (nothing
    links to it), and not a warning type Sphinx lets one suppress."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "duplicate label examples" not in record.getMessage()


def setup(app):
    logging.getLogger("sphinx.sphinx.domains.std").addFilter(_SameExamplesLabel())
