"""The README's core example runs as printed, and says what it prints
(its Spark tour runs in tests/test_docs.py, the docs pages' examples too)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def core_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [b for b in blocks if "udaf" not in b and "spark" not in b.lower()]


def test_core_blocks_run_and_say_what_they_print(capsys):
    ns: dict = {}
    blocks = core_blocks()
    assert len(blocks) >= 1
    exec(compile(blocks[0], str(README), "exec"), ns)  # noqa: S102 - the README's own code
    first = dict(ns)
    for block in blocks[1:]:
        exec(compile(block, str(README), "exec"), ns)  # noqa: S102
    ns = first
    # the figures the first block states in its comments
    assert len(ns["blob"]) == 579 and len(ns["h"]) == 1033
    # and the merge of the two partitions brackets their exact last hour
    ts = ns["ts"]
    newest = int(ts[-1])
    exact = 1500 * (int((ts > newest - 3600).sum()) + int((ts[::2] > newest - 3600).sum()))
    lower, upper = ns["merged"].bounds()
    assert lower <= exact <= upper
