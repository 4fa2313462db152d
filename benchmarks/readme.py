"""The documentation's measured figures, written from the report's run.

The docs quote the benchmarks in two places: the "when to use what" table
(``docs/choosing.md``) and the benchmarks page's summary
(``docs/benchmarks.md``).  Both are written between markers by ``python -m
benchmarks.report`` (and ``--render``) from the same results as
benchmarks/REPORT.md, so the docs' numbers are the report's run, never
copied by hand; the prose around them names no figure.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import report

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: Each measured block and the page that holds it.
PAGES = {"when to use what": DOCS / "choosing.md", "summary": DOCS / "benchmarks.md"}
NAMES = tuple(PAGES)


def begin(name: str) -> str:
    return f"<!-- measured: {name} (written by benchmarks/readme.py) -->"


def end(name: str) -> str:
    return f"<!-- /measured: {name} -->"


def splice(text: str, name: str, body: list[str]) -> str:
    """``text`` with the lines between ``name``'s markers replaced by
    ``body``.

    >>> t = "a\\n" + begin("x") + "\\nold\\n" + end("x") + "\\nb\\n"
    >>> print(splice(t, "x", ["new", "lines"]))
    a
    <!-- measured: x (written by benchmarks/readme.py) -->
    new
    lines
    <!-- /measured: x -->
    b
    <BLANKLINE>
    >>> splice("no markers", "x", [])
    Traceback (most recent call last):
    ...
    ValueError: the page has no 'x' block: add the lines <!-- measured: x (written by benchmarks/readme.py) --> and <!-- /measured: x -->
    """
    pattern = re.compile(re.escape(begin(name)) + r"\n.*?" + re.escape(end(name)), re.S)
    found = len(pattern.findall(text))
    if found == 0:
        raise ValueError(f"the page has no {name!r} block: add the lines {begin(name)} and {end(name)}")
    if found > 1:
        raise ValueError(f"the page has {found} {name!r} blocks: keep one")
    return pattern.sub(lambda _: "\n".join([begin(name), *body, end(name)]), text)


def write(r: dict, stamp: str, pages: dict | None = None) -> None:
    """Rewrite the measured blocks (in ``pages``: name -> page, default
    :data:`PAGES`) from the results ``r`` of the run measured at ``stamp``."""
    pages = PAGES if pages is None else pages
    for name, body in blocks(r, stamp).items():
        path = pages[name]
        path.write_text(splice(path.read_text(), name, body))


def blocks(r: dict, stamp: str) -> dict:
    """Each measured block's lines, by name."""
    return {"when to use what": when_to_use(r, stamp), "summary": summary(r, stamp)}


def _x(v: float) -> str:
    """A ratio as the README prints it (NaN: not measured).

    >>> _x(0.874), _x(2.51), _x(891.3), _x(float("nan"))
    ('0.87x', '2.5x', '891x', 'n/a')
    """
    if v != v:
        return "n/a"
    return f"{v:.2f}x" if v < 2 else f"{v:.1f}x" if v < 10 else f"{v:.0f}x"


def _span(values) -> str:
    """``1.3-187x`` (or one value) from ratios, each as :func:`_x` prints it."""
    values = _known(values)  # NaN: not measured
    if not values:
        return "n/a"
    lo, hi = _x(min(values)), _x(max(values))
    return lo if lo == hi else f"{lo[:-1]}-{hi}"


def _s(r: dict, key: str) -> float:
    """Seconds of a result, NaN when the run did not measure it."""
    return r.get(key, {}).get("seconds", float("nan"))


def _known(values) -> list:
    return [v for v in values if v == v]


def _seconds(values) -> str:
    """``0.41-0.44 s`` from timings (NaN: not measured)."""
    values = _known(values)
    if not values:
        return "n/a"
    lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{lo} s" if lo == hi else f"{lo}-{hi} s"


def _kib(v: float) -> str:
    return f"{v / 1024:,.0f} KiB"


def when_to_use(r: dict, stamp: str) -> list[str]:
    """The "when to use what" table: each question's call here against the
    plain-Spark query a data engineer writes, as measured in the run."""
    rows = []
    ties = report.one_shot_ties(r)
    sketches = [_s(r, f"{q} | {k:,} keys | aggregate two_phase") / _s(r, f"{q} | {k:,} keys | {native}")
                for q, native in (("count + sum, as of now", "native query"),
                                  ("count + sum + distinct, as of now", "native countDistinct"))
                for k in (1_000, 100_000)]
    rows.append(("count, sum, distinct, L_2 over the last `w` as of a time, rows at hand",
                 "`where(ts > now - w).groupBy(k).agg(...)`", "`aggregate(df, k, ts, now=t, ...)`: native",
                 f"a tie: {_span([v['ratio_median'] for v in ties])} its time (medians of alternating rounds)",
                 f"keep anything: `sketches=True` builds sketches, {_span(sketches)} the query"))
    newest = [[_s(r, f"count + sum, per-key newest | {k:,} keys | {p}") for k in (1_000, 100_000)]
              for p in ("aggregate auto", "native window max", "native broadcast join")]
    rows.append(("the same, each key as of its own newest row", "`max(ts) OVER (PARTITION BY k)`, filter, `groupBy`",
                 "`aggregate(df, k, ts, ...)`: native",
                 f"{_span([a / b for a, b in zip(newest[0], newest[1])])} its time; "
                 f"**{_span([a / b for a, b in zip(newest[0], newest[2])])}** a hand-written broadcast join of "
                 "per-key maxima", ""))
    frames = sorted({v["frame"] for k, v in r.items() if k.startswith("count, sliding_over, ")})
    builtin = [_s(r, f"count, built-in frame, {f}") / _s(r, f"count, sliding_over, {f}") for f in frames]
    tie = [v for k, v in r.items() if k.startswith("tie: ")]
    counts = [report.decisive(v)[0] for v in tie if v["kind"] == "count"]
    sums = [m for m, _ in report.per_row_sum_ties(r)]
    rows.append(("per row: count or sum of the last `w`", "`count(*) OVER (... RANGE ...)`; the exact two-frame query",
                 "`sliding_over(df, k, ts, n=Count(w))`: native",
                 (f"{_x(builtin[0])} ({frames[0]:,}-row frames) to {_x(builtin[-1])} ({frames[-1]:,}) faster than the "
                  "RANGE frame; " if frames else "")
                 + f"the exact query's own plan: {_span(counts)} its speed for counts, {_span(sums)} for sums (medians "
                   "of alternating rounds, with the checks `sliding_over` makes)", ""))
    distinct = [_s(r, f"distinct, built-in frame, {f}") / _s(r, f"distinct, sliding_over, {f}") for f in frames]
    exact = report.distinct_ratios(r)
    tiny = _s(r, "many keys: distinct, built-in frame") / _s(r, "many keys: distinct, sliding_over")
    rows.append(("per row: distinct count of the last `w`",
                 "`size(collect_set(x)) OVER (... RANGE ...)`; an exact running-sum query",
                 "`sliding_over(..., d=Distinct(x, w))`: one Python pass per key",
                 f"up to {_x(max(distinct, default=float('nan')))} faster than the RANGE frame, {_span(exact)} "
                 "faster than the exact query",
                 (f"{'beat by' if tiny < 0.995 else 'no faster than'} `collect_set` on ~10-row frames over 100k "
                  f"keys ({_x(tiny)}); " if tiny < 1.05 else "")
                 + "a key must fit a Python worker"))
    decimal, bigint = report.lp_ratios(r, "exact query (decimal)"), report.lp_ratios(r, "exact query (bigint)")
    rows.append(("per row: L_1 / L_2 norm of the last `w`", "an exact query by hand (no window function does it)",
                 "`sliding_over(..., l2=LpNorm(item, w, value=v))`: native",
                 f"its time / ours: {_span(decimal)} in `DECIMAL(38, 0)` (the same range); {_span(bigint)} in "
                 "bigint, which overflows from ~3e9 per item",
                 "other p or fractional values: estimates within eps w.p. 1 - delta"))
    (dense_small, dense_fast), (sparse_small, sparse_fast) = report.stored_ratios(r, "dense"), \
        report.stored_ratios(r, "sparse")
    _, secs = report.stored_tables(r)
    rows.append(("any window up to 30 days, later, from stored data",
                 "a per-second rollup with `hll_sketch_agg`; or rescanning the rows",
                 "`sketch_table(...)`, then `eh_sketch_estimate(sketch, now, w)`",
                 f"busy keys: **{_x(dense_small)}** smaller than the rollup, a 30-day window **{_x(dense_fast)}** "
                 f"faster than a rescan; sparse keys: {_x(sparse_small)} and {_x(sparse_fast)}",
                 "windows ending before the newest element (a rollup answers past windows, on slot boundaries)"))
    sites = secs.get(("dense", "30 days", "events"), float("nan")) / secs.get(("dense", "30 days", "sites"),
                                                                               float("nan"))
    rows.append(("the same, several sites or partitions", "rollups united by `groupBy`",
                 "`eh_sketch_estimate(collect_list(sketch), now, w)`",
                 f"4 site tables: {_x(sites)} faster than a rescan (busy keys)", ""))
    # bench_scale's runs (many keys, several sites), not part of the report's run: their numbers as the report's
    # "Sketch tables at many keys" subsections give them
    rows.append(("L_p norms and join sizes of any window, later", "per-item sums per slot, rescanned",
                 "`sketch_table(..., l2=LpNorm(...))`, then `sliding_lp_sketch_estimate`",
                 "(bench_scale) 100k sparse sources (most at one site), 4 sites: 0.6-1.1x the per-destination rollup's "
                 "query for one site's table, 0.7-3.5x to answer the union, 1.2-4.1x to unite (over the day / the last "
                 "hour; sketches of at most `rows` elements keep them, exact)", "busy keys at many keys (a bucket "
                 "holds `rows_for(p, eps, delta)` doubles): their estimates are within eps with probability 1 - delta"))
    rows.append(("an item's frequency in any window, later", "a per-(key, item, minute) rollup, filtered by item",
                 "`sketch_table(..., f=Frequencies(item, w))`, then `ecm_sketch_frequency(sketch, item, now, w)`",
                 "(bench_scale) 100k sparse sources (most at one site), 4 sites: 1.2x the rollup's filtered query for one "
                 "site's table, 3.5x to answer the union, 5.1x to unite (sketches of at most `width` rows keep them, "
                 "exact); from hourly tables 1.3x, 2.2x and 2.6x",
                 "uniting sparse keys (a shuffle and two Arrow passes against a filter on the rollup); dense keys' "
                 "answers are within eps of the window's total with probability 1 - delta"))
    ours = r.get("streaming: ehist eps=0.05 (rocksdb)")
    native = r.get("streaming: native 1-minute slide (rocksdb)")
    rows.append(("answers that update as events stream in", "`groupBy(k, window(ts, w, slide))` with a watermark",
                 "`streaming.sliding_window_state(...)`",
                 f"{_x(ours['rows_per_second'] / native['rows_per_second'])} the throughput of a 1-minute slide, "
                 f"{_x(native['memory_bytes_per_key'] / ours['memory_bytes_per_key'])} less state memory (RocksDB)"
                 if ours and native else "not measured in this run", "answers as of each key's newest event, not a later time"))
    hh = "heavy hitters per key, as of now | "
    rows.append(("heavy hitters of the last `w`, as of a time", "`groupBy(k, item).count()`, the key's total, filter "
                 "at `phi`", "`aggregate(..., top=HeavyHitters(item, w, phi))`: native",
                 f"{_x(_s(r, hh + 'aggregate auto') / _s(r, hh + 'exact query (filter, groupBy k, src)'))} the "
                 "hand-written query's time", ""))
    hits = [_s(r, f"stored, any window | stored sketches, window {w}% of N")
            / _s(r, f"stored, any window | approx_top_k rollup combined, window {w}% of N") for w in (1, 10, 100)]
    hh_bytes = r.get("stored heavy hitters: bytes per key", {})
    rows.append(("heavy hitters of any window, later", "a per-slot `approx_top_k_accumulate` rollup",
                 "`sketch_table(..., top=HeavyHitters(...))`",
                 f"the rollup answers {_span(hits)} faster, from "
                 + (f"{_kib(hh_bytes['sketches'])} per key against its {_kib(hh_bytes['approx_top_k rollup'])}"
                    if hh_bytes else "bytes not measured"),
                 "windows off slot boundaries (the rollup); ours misses nothing above `phi`, with bounds"))
    own = "per-row own-item frequency | "
    rows.append(("per row: the row's own item's frequency",
                 "`count(*) OVER (PARTITION BY k, item ... RANGE ...)`; the exact two-frame query",
                 "`sliding_over(..., f=Frequencies(item, w))`: native",
                 f"{_x(_s(r, own + 'sliding_over Frequencies (auto: native)') / _s(r, own + 'exact two growing frames'))}"
                 " the exact query's time, "
                 f"{_x(_s(r, own + 'sliding_over Frequencies (auto: native)') / _s(r, own + 'RANGE frame count(*)'))}"
                 " the RANGE frame's (best of a few rounds; it runs the exact query's plan)", ""))
    q = "p99 per key, as of now | "
    auto = _s(r, q + "aggregate auto (native)")
    kll = r.get("quantile error | Spark KLL", {}).get("max_relative_error", float("nan"))
    rows.append(("p95 / p99 of the last `w`, as of a time", "`percentile_disc`; `percentile_approx`, "
                 "`kll_sketch_agg_double`", "`aggregate(..., p99=Quantile(v, w, q=0.99))`: native",
                 f"{_x(auto / _s(r, q + 'exact percentile_disc (filter, groupBy k)'))} `percentile_disc`'s time "
                 f"(exact); `percentile_approx` is {_x(auto / _s(r, q + 'percentile_approx (filter, groupBy k)'))} "
                 f"faster, KLL {_x(auto / _s(r, q + 'Spark KLL sketch (filter, groupBy k)'))} but "
                 + (f"{kll:.1%}" if kll == kll else "n/a") + " off at p99",
                 ""))
    qs = "stored p99, any window | "
    q_bytes = r.get("stored quantiles: bytes per key", {})
    ours_s = [_s(r, f"{qs}stored sketches, window {w}% of N") for w in (1, 10, 100)]
    kll_s = [_s(r, f"{qs}KLL rollup merged, window {w}% of N") for w in (1, 10, 100)]
    kll_err = [r.get(f"quantile error | KLL rollup, window {w}%", {}).get("max_relative_error", float("nan"))
               for w in (1, 10, 100)]
    rows.append(("p99 of any window, later", "a per-slot KLL rollup merged with `kll_merge_agg_double`",
                 "`sketch_table(..., p=Quantile(...))`",
                 (f"{_kib(q_bytes['sketches'])} per key against the rollup's {_kib(q_bytes['kll rollup'])}; "
                  if q_bytes else "")
                 + f"answers in {_seconds(ours_s)} against its {_seconds(kll_s)}, which err up to "
                 + (f"{max(_known(kll_err)):.0%}" if _known(kll_err) else "n/a") + " at p99",
                 "windows ending before the newest row"))
    p95 = "per-row p95 over the frame | "
    rows.append(("per row: p95 of the last `w`", "`percentile_approx(v, 0.95) OVER (... RANGE ...)`",
                 "`sliding_over(..., p=Quantile(v, w, q=0.95))`: exact, one Python pass per key",
                 f"{_x(_s(r, p95 + 'percentile_approx OVER RANGE frame') / _s(r, p95 + 'sliding_over Quantile (exact)'))}"
                 " faster", "a key must fit a Python worker"))
    return ([f"Measured in the report run of {stamp} "
             "(`benchmarks/REPORT.md`):", "",
             "| question, per key | plain Spark | call here | against plain Spark | cannot |",
             "| --- | --- | --- | --- | --- |"]
            + [f"| {' | '.join(row)} |" for row in rows])


def summary(r: dict, stamp: str) -> list[str]:
    """The Benchmarks section's measured part: the issue's targets as the
    report computes them, and the core synopses against their peers."""
    out = [f"The run of {stamp} (`benchmarks/REPORT.md` has every table, plot, machine "
           "fact and load average):", ""]
    rows = report.target_rows(r)
    if rows:
        out += report.target_table(rows) + [""]
    core = []
    if "ehist" in r and "dgim" in r:
        e = r["ehist"]
        core.append(f"the exponential histogram inserts {e['per_second'] / 1e6:,.0f}M elements/s in 100k batches, "
                    f"**{_x(e['per_second'] / r['dgim']['per_second'])}** the `dgim` package (one bit at a time, its "
                    f"only mode) and {_x(e['seconds'] / r['numpy.cumsum']['seconds'])} one `numpy.cumsum` pass's time; "
                    f"{e['buckets']} buckets against a bound of {e['bucket_bound']:.0f}, "
                    f"{e['bytes'] / e['buckets']:.2f} bytes per bucket serialized")
    if "SlidingHyperLogLog (ehist)" in r and "hyperloglog.SlidingHyperLogLog" in r:
        ours, peer = r["SlidingHyperLogLog (ehist)"], r["hyperloglog.SlidingHyperLogLog"]
        errors = r.get("distinct-error-memory", {}).get("rows", [])  # (p, ours bytes, |err|, peer bytes, |err|)
        worse = [p for p, b, e, pb, pe in errors if e * b ** 0.5 > pe * pb ** 0.5]
        core.append(f"the sliding HyperLogLog {_x(ours['per_second'] / peer['per_second'])} the `hyperloglog` "
                    f"package's throughput, in {ours['bytes']:,} bytes against its {peer['bytes']:,} (pickle) at "
                    "precision 12"
                    + ("" if not errors else ", with no worse error per byte (|err| x sqrt(bytes)) at any precision"
                       if not worse else f", with more error per byte at precision {', '.join(f'{p:g}' for p in worse)}"))
    for p in (1, 2):
        if f"SlidingLpNorm p={p} query" in r and f"exact numpy p={p} query" in r:
            core.append(f"the L_{p} norm sketch answers in "
                        f"{r[f'SlidingLpNorm p={p} query']['seconds'] * 1e3:.3f} ms, "
                        f"{_x(r[f'exact numpy p={p} query']['seconds'] / r[f'SlidingLpNorm p={p} query']['seconds'])} "
                        "faster than recomputing the window exactly with numpy")
    sizes = r.get("lp-size", {}).get("rows", [])  # (window, p, buckets, bytes, exact bytes)
    if sizes:
        smaller = {p: min((w for w, q, _, b, e in sizes if q == p and b < e), default=None)
                   for p in sorted({q for _, q, *_ in sizes})}
        core.append("the L_p sketches' bytes (every update touches every row: they buy memory, not speed) "
                    + ", ".join(f"{b:,} at p = {q:g}" for w, q, _, b, e in sizes if w == max(x[0] for x in sizes))
                    + f" for a window of {max(x[0] for x in sizes):,} elements, against "
                    f"{max(x[4] for x in sizes):,} to keep them; smaller than the elements from windows of "
                    + " and ".join(f"{w:,} on (p = {' and '.join(f'{p:g}' for p, v in smaller.items() if v == w)})"
                                   for w in sorted({v for v in smaller.values() if v})))
    if core:
        out += ["Core synopses, no Spark: " + "; ".join(core) + ".", ""]
    secondary = []
    large = {k[len("large: "):]: v["seconds"] for k, v in r.items() if k.startswith("large: ")}
    udfs = (("distinct, pandas UDF .over (nunique)", "distinct, sliding_over", "`nunique`"),
            ("count, pandas UDF .over (sliding_count, eps 0.01)", "count, sliding_over",
             "the package's own `sliding_count`, a histogram per row"),
            ("count, pandas UDF .over (len)", "count, sliding_over", "`len`, the cheapest body"))
    cells = [f"{large[udf]:.0f} s for {name} ({_x(large[udf] / large[ours])} `sliding_over`'s time)"
             for udf, ours, name in udfs if udf in large and ours in large]
    if cells:
        secondary.append("at 1M rows and 10k-row frames the per-row pandas UDFs `.over` the frame took "
                         + ", ".join(cells))
    ours, hdfs = r.get("streaming: ehist eps=0.05 (rocksdb)"), r.get("streaming: native 1-minute slide (hdfs, default)")
    if ours and hdfs:
        secondary.append(f"on Spark's default state store the native 1-minute slide held "
                         f"{hdfs['memory_bytes_per_key']:,.0f} bytes per key in memory, "
                         f"{_x(hdfs['memory_bytes_per_key'] / ours['value_bytes_per_key'])} the "
                         f"{ours['value_bytes_per_key']:,.0f} bytes per key `sliding_window_state` stores")
    if secondary:
        out += ["Secondary rows: " + "; ".join(secondary) + "."]
    return out
