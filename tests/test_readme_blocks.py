"""The docs' measured blocks (benchmarks/readme.py): written only between
their markers, present in their pages (docs/choosing.md,
docs/benchmarks.md), and from the run REPORT.md shows, so the documented
figures cannot drift from the report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

readme = pytest.importorskip("benchmarks.readme")

ROOT = Path(__file__).resolve().parent.parent


def block(text: str, name: str) -> str:
    return text.split(readme.begin(name) + "\n", 1)[1].split(readme.end(name), 1)[0]


def test_splice_rewrites_its_block_only_and_is_idempotent():
    text = "\n".join(["intro", readme.begin("a"), "old a", readme.end("a"), "middle",
                      readme.begin("b"), "old b", "more b", readme.end("b"), "end", ""])
    once = readme.splice(text, "b", ["new b"])
    assert once == text.replace("old b\nmore b", "new b")
    assert readme.splice(once, "b", ["new b"]) == once
    assert readme.splice(once, "a", []) == once.replace("old a\n", "")


def test_splice_refuses_a_missing_or_doubled_block():
    text = "\n".join([readme.begin("a"), "x", readme.end("a")])
    with pytest.raises(ValueError, match="no 'b' block"):
        readme.splice(text, "b", [])
    with pytest.raises(ValueError, match="has 2 'a' blocks"):
        readme.splice(text + "\n" + text, "a", [])


def test_the_pages_hold_every_block_once():
    for name in readme.NAMES:
        text = readme.PAGES[name].read_text()
        assert text.count(readme.begin(name)) == 1 and text.count(readme.end(name)) == 1, name
        assert text.index(readme.begin(name)) < text.index(readme.end(name))


def test_the_pages_quote_the_run_report_md_shows():
    report = (ROOT / "benchmarks" / "REPORT.md").read_text()
    stamp = re.search(r"^Measured (.+?) by `python -m benchmarks.report`", report, re.M).group(1)
    for name in readme.NAMES:
        assert f"run of {stamp} " in block(readme.PAGES[name].read_text(), name), name
    # the targets, row for row as the report computed them
    targets = report.split("## Against plain Spark: the targets", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in targets.splitlines() if line.startswith("| ")]
    assert len(rows) > 5
    summary = block(readme.PAGES["summary"].read_text(), "summary")
    assert all(row in summary for row in rows)


def test_blocks_of_a_run_that_measured_nothing_say_so():
    out = readme.blocks({}, "2026-01-01 00:00 UTC")
    table = out["when to use what"]
    assert sum(line.startswith("| ") for line in table) == 2 + 16  # header, rule, a row per question
    text = "\n".join(line for lines in out.values() for line in lines)
    assert "n/a" in text and "nan" not in text.lower().replace("n/a", "")
