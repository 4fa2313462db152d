"""The documentation site (docs/): it builds with warnings as errors, and
every page's Python examples run as printed (the core ones as a reader
pastes them, page by page in one namespace; the Spark ones on a table of
flows with the columns they name, paths moved to a temporary directory)."""

from __future__ import annotations

import datetime as dt
import html
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def python_blocks(page: str) -> list[str]:
    path = ROOT / page if page == "README.md" else DOCS / page
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def needs_spark(block: str) -> bool:
    return "udaf" in block or "spark" in block.lower()


def test_every_page_is_in_the_table_of_contents():
    index = "\n".join(p.read_text() for p in (DOCS / "index.md", DOCS / "api" / "index.md"))
    for page in DOCS.glob("*.md"):
        if page.name != "index.md":
            assert f"\n{page.stem}\n" in index, f"{page.name} is in no toctree"


def test_the_docs_build_without_a_warning(tmp_path):
    for module in ("sphinx", "numpydoc", "pydata_sphinx_theme", "myst_parser", "pyspark"):
        pytest.importorskip(module)
    out = tmp_path / "html"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS),
                          str(out)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # the API reference has every generated Spark function, with its signature
    functions = (out / "api" / "functions.html").read_text()
    from tests.registry import ours
    from udaf import functions as U
    from udaf.spec import FAMILIES

    theirs = {f for f, classes in FAMILIES.items() if not ours(classes)}  # families of tests (test_extension.py)
    for name in U.__all__:
        if getattr(U._FUNCTIONS.get(name), "family", None) not in theirs:
            assert f'id="udaf.functions.{name}"' in functions, name
    text = html.unescape(re.sub(r"<[^>]+>", "", functions))
    assert "sliding_hll_sketch_estimate(sketch, now=None, window=None, unit='us')" in text
    assert "SQL, after register(): sliding_hll_sketch_estimate(sketch[, now[, window[, unit]]])" in text
    assert (out / "quickstart-sql.html").exists() and (out / "formats.html").exists()


CORE_PAGES = [p.name for p in sorted(DOCS.glob("*.md")) if any(not needs_spark(b) for b in python_blocks(p.name))]


@pytest.mark.parametrize("page", CORE_PAGES)
def test_core_examples_run(page, capsys):
    ns: dict = {}
    for block in python_blocks(page):
        if not needs_spark(block):
            exec(compile(block, str(DOCS / page), "exec"), ns)  # noqa: S102 - the docs' own code


def flows_frame(spark, bad: bool = False):
    """Flows with the columns the pages name: src, dst, ts, bytes, hour,
    site (4 sites); with ``bad``, the newest flow is of -5 bytes from
    10.0.0.7 (inside every window: the native plan reads only the window's
    rows)."""
    import pandas as pd

    rng = np.random.default_rng(42)
    n = 4_000
    ts = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.sort(rng.integers(0, 6 * 3600, n)), unit="s")
    pdf = pd.DataFrame({"src": [f"10.0.0.{i}" for i in rng.integers(0, 8, n)],
                        "dst": [f"10.1.0.{i}" for i in rng.zipf(1.5, n) % 200],
                        "ts": ts, "bytes": rng.integers(40, 1500, n), "site": rng.integers(0, 4, n)})
    if bad:
        pdf.loc[n - 1, ["src", "bytes"]] = ["10.0.0.7", -5]
    pdf["hour"] = pdf["ts"].dt.floor("h")
    return spark.createDataFrame(pdf)


SPARK_PAGES = ["quickstart-sql.md", "spark.md", "stored-tables.md", "aggregate.md", "per-row.md", "errors.md",
               "README.md"]


@pytest.mark.spark
def test_the_sql_statements_run(spark, capsys):
    """Every ``sql`` block statement of the docs, run through spark.sql in
    order on a view of flows (one statement per ``;``)."""
    from udaf import functions as U

    U.register(spark)
    flows_frame(spark).createOrReplaceTempView("flows")
    pages = [p.name for p in sorted(DOCS.glob("*.md")) if "```sql" in p.read_text()]
    assert pages == ["sql-reference.md"]
    text = (DOCS / "sql-reference.md").read_text()
    statements = [s.strip() for b in re.findall(r"```sql\n(.*?)```", text, flags=re.S) for s in b.split(";")]
    ran = 0
    for statement in statements:
        code = "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--"))
        if code.strip():
            spark.sql(code).show(truncate=False)
            ran += 1
    assert ran == 6
    out = capsys.readouterr().out
    assert "bytes_10_min" in out and "dsts_last_hour" in out


def test_the_spark_pages_are_all_run():
    """Every page with a Spark example is run below, or by its own test
    (streaming.md: tests/test_streaming.py starts and stops its query)."""
    with_spark = {p.name for p in DOCS.glob("*.md") if any(needs_spark(b) for b in python_blocks(p.name))}
    assert with_spark == set(SPARK_PAGES) - {"README.md"} | {"streaming.md"}
    assert any(needs_spark(b) for b in python_blocks("README.md"))


@pytest.mark.spark
@pytest.mark.parametrize("page", SPARK_PAGES)
def test_spark_examples_run(page, spark, tmp_path, capsys):
    for view in [t.name for t in spark.catalog.listTables() if t.isTemporary]:
        spark.catalog.dropTempView(view)  # a page creates the views it queries (none left by other tests)
    ns: dict = {"spark": spark, "flows": flows_frame(spark, bad=page == "errors.md"),
                "NOW": dt.datetime(2026, 1, 1, 6, 0)}
    for block in python_blocks(page):
        for path in ("/data/sketches", "/tmp/ehist-docs"):
            block = block.replace(path, str(tmp_path / path.strip("/").replace("/", "-")))
        if needs_spark(block):
            exec(compile(block, page, "exec"), ns)  # noqa: S102 - the docs' own code
    out = capsys.readouterr().out
    if page == "errors.md":  # the message the page shows
        assert "column bytes holds -5 (key '10.0.0.7'): Sum needs non-negative integers" in out
    if page == "README.md":
        assert "bytes_last_hour" in out and "sliding_count(ts, INTERVAL '01' HOUR)" in out
    if page == "quickstart-sql.md":
        assert "p99_bytes" in out and "heavy_dsts" in out and "bytes_last_5_min" in out
