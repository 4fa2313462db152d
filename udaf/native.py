"""The native plan of :func:`udaf.aggregate`: exact answers from Spark's
own aggregates, no Python in the plan.

When the rows are at hand and the question is each key's estimate for
one window as of one time, a synopsis saves nothing: Spark's partial
aggregation (``count``, ``sum``, ``count(DISTINCT)``) answers exactly and
shuffles one row per key and partition.  This is the query a data
engineer would write::

    df.where(ts > now - w).groupBy(k).agg(count(*), sum(bytes), count(DISTINCT dst))

and ``aggregate(strategy="native")`` (which ``auto`` picks when every spec
has a native form, :meth:`udaf.spec.Spec.native_answer`) runs exactly that, with
the same window convention (``now - window < t <= now``), answers, bounds
and messages as the other strategies:

* ``now`` given: :func:`udaf.aggregate` reads only the rows of the
  widest window (pushed down to the source), then one aggregation, each
  spec's aggregate conditioned on its own window.
* ``now`` omitted: each key's window ends at its newest row (for a spec
  reading a column, its newest row where that column is not null), so
  the per-key newest times are aggregated first (one job, when
  :func:`udaf.aggregate` is called) and joined back (broadcast up to
  :data:`BROADCAST_KEYS` keys); rows in no
  spec's window are dropped before the aggregation, and each spec's
  aggregate is conditioned on its own window.

The plan is built as SQL text (one parse in the JVM, instead of a py4j
call per Column operation: building the Column tree took ~0.2 s per call,
a fifth of the whole query at 1,000 keys).  Bad values are raised by
Spark (``raise_error``) with the project's message (``InvalidInputError: column bytes holds -5 (key 'a'): Sum needs
non-negative integers``), which a ``SparkRuntimeException`` carries; the
native plan checks the rows it reads (those in a window), not the rest.
Every sum is :func:`checked_sum`: exact or refused past int64, by Spark's
``ARITHMETIC_OVERFLOW`` in ANSI mode, by the Python passes'
``SumOverflowError`` with the key without it (where Spark's ``sum`` wraps
around silently).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .sql_text import Frame, KeyText, checked_sum, quote, raise_bad_value, string

__all__ = ["native_answers", "native_frames", "has_native", "has_native_frames", "key_text", "time_sql", "present",
           "BROADCAST_KEYS"]

#: Up to this many keys the per-key newest times are broadcast to the rows
#: instead of shuffling the rows to them.
BROADCAST_KEYS = 2_000_000


def has_native(specs: dict, schema: T.StructType) -> bool:
    """Whether every spec has Spark's own plan for its answer per key over
    rows of ``schema`` (:meth:`~udaf.spec.Spec.native_answer`)."""
    return all(s.native_answer(schema) is not None for s in specs.values())


def has_native_frames(specs: dict, df: DataFrame) -> bool:
    """Whether every spec has Spark's own plan for its answer per row over
    the rows of ``df`` (:meth:`~udaf.spec.Spec.native_per_row`); a whole
    plan of its own (``rows``) needs distinct column names in ``df``: it
    unites the rows with events by name."""
    def native(spec) -> bool:
        plan = spec.native_per_row(df.schema)
        return plan is not None and (plan.rows is None or len(set(df.columns)) == len(df.columns))

    return all(native(spec) for spec in specs.values())


def key_text(keys: list, schema: T.StructType) -> str:
    """SQL text of the key as Python prints it in messages (``'a'``,
    ``7``, ``('a', 7)``), from the key columns."""
    parts = []
    for k in keys:
        c, dtype = quote(k), schema[k].dataType
        if isinstance(dtype, T.StringType):
            text = f"concat({string(chr(39))}, {c}, {string(chr(39))})"
        elif isinstance(dtype, T.BooleanType):
            text = f"CASE WHEN {c} THEN 'True' ELSE 'False' END"
        else:
            text = f"CAST({c} AS STRING)"
        parts.append(f"coalesce({text}, 'None')")
    if len(parts) == 1:
        return parts[0]
    return f"concat('(', concat_ws(', ', {', '.join(parts)}), ')')"


def time_sql(df: DataFrame, ts: str) -> str:
    """SQL text of the time column in int64 units (what
    :func:`udaf.two_phase.time_expression` computes as a Column)."""
    c, dtype = quote(ts), df.schema[ts].dataType
    if isinstance(dtype, T.TimestampType):
        return f"unix_micros({c})"
    if isinstance(dtype, T.TimestampNTZType):
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {c})"
    if isinstance(dtype, T.DateType):
        return f"CAST(unix_date({c}) AS BIGINT)"
    if isinstance(dtype, T.LongType):
        return c
    return f"CAST({c} AS BIGINT)"


def _ansi(df: DataFrame) -> bool:
    """Whether ``df``'s session runs in ANSI mode (integer overflow raises)."""
    return str(df.sparkSession.conf.get("spark.sql.ansi.enabled", "true")).lower() == "true"


def _null_time(df: DataFrame, ts: str, key: str) -> str:
    """The ``CASE`` branch refusing a null time with the project's message."""
    return f"WHEN {time_sql(df, ts)} IS NULL THEN {raise_bad_value(ts, 'NULL', 'timestamps must not be null', key)} "


def _checked_time(df: DataFrame, ts: str, key: str) -> str:
    """The time in int64 units, a null refused with the project's message."""
    return f"CASE {_null_time(df, ts, key)}ELSE {time_sql(df, ts)} END"


def _inputs(spec) -> dict:
    return {role: quote(c) for role, c in spec.inputs().items()}


def present(spec) -> str:
    """SQL text: whether a row counts for ``spec`` (its inputs are not
    null).  A key's window ends at its newest such row.

    >>> from udaf import Sum
    >>> present(Sum("bytes", window=10))
    '(TRUE AND `bytes` IS NOT NULL)'
    """
    return "(" + " AND ".join(["TRUE"] + [f"{c} IS NOT NULL" for c in _inputs(spec).values()]) + ")"


def _after(t: str, end: str, window: int) -> str:
    """``end - window < t`` without overflow (true when the start is below int64)."""
    return f"coalesce({t} > try_subtract({end}, {window}L), TRUE)"


def native_answers(df: DataFrame, keys: list, ts: str, specs: dict, windows: dict, at,
                   with_bounds: list) -> DataFrame:
    """The keys and each spec's exact answer (double; bigint bounds for
    ``with_bounds``), from Spark's aggregates only."""
    # sums past int64: Spark's own error with ANSI mode, the project's without
    named = KeyText(key_text(keys, df.schema), ansi=_ansi(df))
    t = _checked_time(df, ts, named)
    plans = {name: spec.native_answer(df.schema) for name, spec in specs.items()}
    if at is not None:
        # aggregate() read only the rows of the widest window: each spec's
        # aggregate is conditioned on its own (the checked time added below,
        # where a condition names it)
        rows = df
        ends = {name: f"{at}L" for name in specs}
        keep = None
        # every row read is checked, as the Python strategies check them (docs/errors.md, "Which rows are
        # checked"): a spec of a narrower window checks the rest of the widest one's here, in one pass
        narrower = [F.expr(f"count({check})") for name, spec in specs.items() if windows[name] < max(windows.values())
                    for check in plans[name].checks_of(_inputs(spec), named)]
        if narrower:
            df.agg(*narrower).collect()
    else:
        newest = [F.expr(f"max(CASE WHEN {present(spec)} THEN {t} END) AS __now_{i}")
                  for i, spec in enumerate(specs.values())]
        # computed once, here (a small table: a row per key), so its size
        # decides the join: broadcast to the rows, or both sides shuffled
        # every row of a key is read here: its values are checked here too, as the
        # Python strategies check every row (docs/errors.md, "Which rows are checked")
        checks = [F.expr(f"count({check}) AS __check_{i}_{j}") for i, (name, spec) in enumerate(specs.items())
                  for j, check in enumerate(plans[name].checks_of(_inputs(spec), named))]
        per_key = df.groupBy(*keys).agg(F.expr(f"max({t}) AS __newest"), *newest, *checks) \
            .localCheckpoint(eager=True)
        # its size, and whether a key column holds a null, in one job
        size, *nulls = per_key.selectExpr("count(1)", *[f"count_if({quote(k)} IS NULL)" for k in keys]).first()
        if size <= BROADCAST_KEYS:
            per_key = F.broadcast(per_key)
        left, right = df.alias("__rows"), per_key.alias("__keys")
        # null keys are keys: null-safe equality, but only on a column whose
        # per-key table holds a null (without one on its side, <=> and =
        # join the same rows).  Spark joins on a <=> b through two keys
        # (coalesce(a, 0), isnull(a)): a hashed relation of rows, not the
        # one of longs a single bigint key gets; the broadcast join at 100k
        # keys took 2.37 s against 1.38 s with =, 0.64 s against 0.47 s at
        # 1k keys (10M rows, minima of 9 alternating rounds)
        on = [F.col(f"__rows.{k}").eqNullSafe(F.col(f"__keys.{k}")) if has_null
              else F.col(f"__rows.{k}") == F.col(f"__keys.{k}") for k, has_null in zip(keys, nulls)]
        rows = left.join(right, on).selectExpr(
            *[f"__rows.{quote(c)}" for c in df.columns], "__keys.__newest",
            *[f"__keys.__now_{i}" for i in range(len(specs))]).selectExpr("*", f"{t} AS __t")
        ends = {name: f"__now_{i}" for i, name in enumerate(specs)}
        keep = "__t >= __newest"  # every key keeps a row, so every key is answered
    widest = max(windows.values())
    insides = {name: f"({_after('__t', ends[name], windows[name])} AND __t <= {ends[name]} AND "
                     f"{present(spec)})" for name, spec in specs.items()}
    if at is not None and not df.schema[ts].nullable:
        # the rows aggregate() read are the widest window's: a spec of that
        # window needs only its inputs present (the hand-written query's
        # plan).  Not where the time may be null: those rows pass the range
        # to be reported, which naming the checked time does
        insides.update({name: f"({present(spec)})" for name, spec in specs.items()
                        if windows[name] == widest})
    if keep is not None:
        # only rows in some spec's window reach the aggregation
        rows = rows.where(" OR ".join([keep, *insides.values()]))
    elif any("__t" in inside for inside in insides.values()):
        rows = rows.selectExpr("*", f"{t} AS __t")
    # (else the plan is the hand-written one, down to its projections: a
    # projection more cost about 12 ms of plan building, warm)
    aggs, tops, items = [], {}, {}
    for name, spec in specs.items():
        plan = plans[name]
        if plan.items is not None:
            items[name] = plan.items(_inputs(spec), named)
            continue
        if plan.top is not None:
            tops[name] = plan.top(_inputs(spec), named)
            continue
        exact = plan.aggregate(_inputs(spec), insides[name], named)
        aggs.append(F.expr(f"CAST({exact} AS DOUBLE) AS {quote(name)}"))
        if name in with_bounds:
            aggs += [F.expr(f"CAST({exact} AS BIGINT) AS {quote(name + suffix)}") for suffix in ("_lower", "_upper")]
    if len(items) == 1 and not aggs and not tops:
        # one answer from each key's items alone: the rows outside its
        # window are each key's item null, so every key of the rows is
        # answered by the two aggregations, with no join
        (name, (item, weight, final)), = items.items()
        inside = insides[name]
        return _item_answers(rows, keys, f"CASE WHEN {inside} THEN {item} END",
                             f"CASE WHEN {inside} THEN {weight} END", final, name, named)
    if tops and not aggs and not items:  # lists only: one aggregation, no join
        lists = _top_lists(rows, keys, tops, insides, named)
        return lists.selectExpr(*[quote(k) for k in keys], *[_or_empty(name, specs[name]) for name in specs])
    out = rows.groupBy(*keys).agg(*(aggs or [F.expr("count(1) AS __rows")]))
    for name, (item, weight, final) in items.items():
        part = _item_answers(rows.where(insides[name]), keys, item, weight, final, name, named)
        part = part.select(*[F.col(k).alias(f"__items_{i}") for i, k in enumerate(keys)], name)
        on = [out[k].eqNullSafe(part[f"__items_{i}"]) for i, k in enumerate(keys)]
        out = out.join(part, on, "left").drop(*[f"__items_{i}" for i in range(len(keys))]) \
            .withColumn(name, F.coalesce(F.col(name), F.lit(0.0)))  # no row in this window
    for name, (item, weight, phi) in tops.items():
        top = _top_items(rows.where(insides[name]), keys, item, weight, phi, name, named)
        top = top.select(*[F.col(k).alias(f"__top_{i}") for i, k in enumerate(keys)], name)
        on = [out[k].eqNullSafe(top[f"__top_{i}"]) for i, k in enumerate(keys)]  # null keys are keys too
        out = out.join(top, on, "left").drop(*[f"__top_{i}" for i in range(len(keys))]) \
            .withColumn(name, F.expr(_or_empty(name, specs[name])))
    if not tops and not items:  # the aggregation's columns are the answer's, in order
        return out
    columns = [*keys, *[c for n in specs for c in (n, *(f"{n}{x}" for x in ("_lower", "_upper") if n in with_bounds))]]
    return out.select(*columns)


def _or_empty(name: str, spec) -> str:
    """SQL of column ``name`` (a list) with an empty list where a key has
    no item in the spec's window.  As SQL text: a Column cast to the
    answer's DataType made ~50 py4j calls (plan building 69 ms -> 59 ms,
    medians of 30 warm builds)."""
    return f"coalesce({quote(name)}, CAST(array() AS {spec.answer_spark_type().simpleString()})) AS {quote(name)}"


_ORDER = ("(l, r) -> CASE WHEN l.n > r.n THEN -1 WHEN l.n < r.n THEN 1 WHEN l.item < r.item THEN -1 "
          "WHEN l.item > r.item THEN 1 ELSE 0 END")


def _listed(entries: str) -> str:
    """SQL of a key's list from ``collect_list`` of ``(n, item)`` structs:
    largest first, ties by item, each as ``struct<item, estimate, lower,
    upper>`` (all three the exact sum)."""
    return (f"transform(array_sort(collect_list({entries}), {_ORDER}), "
            "s -> named_struct('item', s.item, 'estimate', CAST(s.n AS DOUBLE), 'lower', s.n, 'upper', s.n))")


def _top_lists(rows: DataFrame, keys: list, tops: dict, insides: dict, named: str) -> DataFrame:
    """Every key of ``rows`` with each top spec's list (``tops[name]``:
    item SQL, weight SQL, phi), when no other spec needs an aggregate: one
    aggregation over grouping sets gives each (key, item)'s sum and each
    key's total (the (key) set: every key of the rows, so a key with no
    item in a window still gets its empty list), the key's total reaches
    its items through a window over that small result, and one aggregation
    by key lists the items at or above ``phi`` of it.  Against the general
    plan (items, their key's total as a window, a list per key, joined to a
    per-key aggregation of the rows): one scan of the rows and no join,
    1.65 s -> 1.11 s at 4M rows and 100 keys, the hand-written exact query
    1.12 s (medians of 9 interleaved rounds).  ``named``: SQL of the key
    as messages print it (a sum past int64 is refused, :func:`checked_sum`)."""
    names = list(tops)
    items = [f"__item_{i}" for i in range(len(names))]
    chosen = [quote(k) for k in keys]
    for i, name in enumerate(names):
        item, weight, _ = tops[name]
        chosen += [f"CASE WHEN {insides[name]} THEN {item} END AS __item_{i}",
                   f"CASE WHEN {insides[name]} THEN {weight} END AS __w_{i}"]
    sets = [[*keys, it] for it in items] + [list(keys)]
    grouped = rows.selectExpr(*chosen).groupingSets(sets, *keys, *items).agg(
        *[F.expr(f"{checked_sum(f'__w_{i}', named)} AS __n_{i}") for i in range(len(names))],
        *[F.grouping(it).alias(f"__set_{i}") for i, it in enumerate(items)])
    key_row = " AND ".join(f"__set_{i} = 1" for i in range(len(names)))
    by = ", ".join(quote(k) for k in keys)
    lists = []
    for i, name in enumerate(names):
        phi = tops[name][2]
        total = f"max(CASE WHEN {key_row} THEN __n_{i} END) OVER (PARTITION BY {by})"
        grouped = grouped.selectExpr("*", f"{total} AS __total_{i}")
        heavy = f"__set_{i} = 0 AND __item_{i} IS NOT NULL AND __n_{i} > 0 AND __n_{i} >= {float(phi)!r}D * __total_{i}"
        entry = f"CASE WHEN {heavy} THEN named_struct('n', __n_{i}, 'item', __item_{i}) END"  # null: not listed
        lists.append(F.expr(f"{_listed(entry)} AS {quote(name)}"))
    return grouped.groupBy(*keys).agg(*lists)


def _item_answers(rows: DataFrame, keys: list, item: str, weight: str, final: str, name: str,
                  named: str) -> DataFrame:
    """Per key of ``rows``, ``final`` (an aggregate over ``__n``, each of
    the key's items' summed ``weight``, which is null where the item is:
    the null item's ``__n`` is 0, which adds nothing to a norm) as column
    ``name``, a double (0 for a key without items): one aggregation by
    (key, item), one by key.  An item's sum past int64 is refused
    (:func:`checked_sum`; ``named``: SQL of the key in messages)."""
    per_item = rows.groupBy(*keys, F.expr(f"{item} AS __item")).agg(
        F.expr(f"{checked_sum(weight, named)} AS __n"))
    answer = f"coalesce(CAST({final} AS DOUBLE), 0D)"
    return per_item.groupBy(*keys).agg(F.expr(f"{answer} AS {quote(name)}"))


def _top_items(rows: DataFrame, keys: list, item: str, weight: str, phi: float, name: str,
               named: str) -> DataFrame:
    """Per key, the items whose summed ``weight`` reaches ``phi`` of the
    key's total over ``rows``, as ``array<struct<item, estimate, lower,
    upper>>`` (all three the exact sum), largest first, ties by item: one
    aggregation by (key, item), the key's total as a window over it, a
    filter, and one aggregation by key (the plan a data engineer writes).
    Sums past int64 are refused (:func:`checked_sum`, ``named``)."""
    per_item = rows.groupBy(*keys, F.expr(f"{item} AS __item")).agg(
        F.expr(f"{checked_sum(weight, named)} AS __n"))
    total = F.expr(checked_sum("__n", named, f" OVER (PARTITION BY {', '.join(quote(k) for k in keys)})"))
    heavy = per_item.withColumn("__total", total).where(f"__n > 0 AND __n >= {float(phi)!r}D * __total")
    entry = "named_struct('n', __n, 'item', __item)"
    return heavy.groupBy(*keys).agg(F.expr(f"{_listed(entry)} AS {quote(name)}"))


def native_frames(df: DataFrame, keys: list, order_by: str, specs: dict, windows: dict, types: dict) -> DataFrame:
    """The rows of ``df`` with each spec's exact answer over the row's
    frame (``types[name]``: its Spark type), from Spark's window functions
    only: the native plan of :func:`udaf.sliding_over`.

    A frame ``(t - w, t]`` is the rows up to ``t`` less the rows up to
    ``t - w``: two frames that start at the key's first row and only grow,
    which Spark's window operator computes in one pass after one sort
    (where ``RANGE BETWEEN w - 1 PRECEDING AND CURRENT ROW`` re-aggregates
    every frame: rows x frame).  Spark computes ``t - w`` on the order key
    (a long) with overflow checks, so a time within the widest window of
    the int64 minimum, which only a bigint column can hold, is refused:
    ``strategy='shuffle'`` takes any int64 (ordering by a decimal instead
    doubles the plan's time).

    The time's checks (null unless the schema rules it out; without ANSI
    mode, within the widest window of the int64 minimum, for a bigint
    time) run in the answers' projection, after the window: a filter
    before it cost about 5% (interleaved runs, 1M rows), and Spark's
    window answers such rows without touching the others' answers (null
    times are counted in both frames of every row).  Under ANSI mode
    (Spark 4's default) a time at the int64 edge stops the job with
    Spark's ``ARITHMETIC_OVERFLOW`` as the window computes its frame
    start, before the projection, as the hand-written query would: the
    edge check is left out there (it could never fire, and its ``CASE``
    made the count 0.94x the exact query written as SQL text at 100k rows,
    against 0.99x without it: medians of 30 alternating rounds); without
    ANSI (where the start wraps) it refuses with the project's message.

    A spec whose answer is not a difference of two frames brings its own
    plan (:attr:`~udaf.capabilities.NativePerRow.rows`, L_p norms), run on
    the rows with the frames' answers, its input checks under its windows."""
    named = key_text(keys, df.schema)
    plans = {name: spec.native_per_row(df.schema) for name, spec in specs.items()}
    rows = {name: spec for name, spec in specs.items() if plans[name].rows is not None}
    if rows:
        # each rows plan appends its column to the rows it is given;
        # the frames' answers first (the same projection as without them)
        framed = {name: spec for name, spec in specs.items() if name not in rows}
        out = native_frames(df, keys, order_by, framed, windows, types) if framed else df
        t = _checked_time(df, order_by, named) if df.schema[order_by].nullable else time_sql(df, order_by)
        hidden = "__ehist_r"
        while any(c.startswith(hidden) for c in [*df.columns, *specs]):
            hidden = "_" + hidden
        for name, spec in rows.items():
            out = plans[name].rows(out, keys, t, name, windows[name], named, hidden)
        return out.select(*[F.col(quote(c)) for c in [*df.columns, *specs]])
    widest = max(windows.values())
    t = time_sql(df, order_by)
    checks = _null_time(df, order_by, named) if df.schema[order_by].nullable else ""
    if not _ansi(df) and (isinstance(df.schema[order_by].dataType, T.LongType) or widest >= 1 << 62):
        lowest = -(1 << 63) + widest  # the lowest time whose frame start fits int64
        need = (f"the native per-row plan takes times from {lowest} on (the int64 minimum plus the window; "
                "strategy='shuffle' takes any)")
        checks += f"WHEN {t} < {lowest}L THEN {raise_bad_value(order_by, t, need, named)} "
    checked = f"CASE {checks}ELSE " if checks else None
    key = quote(order_by) if isinstance(df.schema[order_by].dataType, T.LongType) else t
    answers, seen, prefix = [], {}, "__ehist_w"
    while any(c.startswith(prefix) for c in df.columns):  # the frames' columns name none of the rows'
        prefix = "_" + prefix
    for name, spec in specs.items():
        # a family may count within finer groups than the key (Frequencies: each row's own item)
        plan = plans[name]
        by = [quote(k) for k in keys] + list(() if plan.by is None else plan.by(_inputs(spec)))
        order = f"PARTITION BY {', '.join(by)} ORDER BY {key}"
        upto = Frame(f"({order} RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)", seen, prefix)
        before = Frame(f"({order} RANGE BETWEEN UNBOUNDED PRECEDING AND {windows[name]} PRECEDING)", seen, prefix)
        sql = plan.frame(_inputs(spec), upto, before, named, df.schema)
        sql = f"CAST({sql} AS {types[name].simpleString().upper()})"
        answers.append(f"{sql if checked is None else checked + sql + ' END'} AS {quote(name)}")
    if all(sum(a.count(column) for a in answers) == 1 for column in seen.values()):
        # each aggregate named once (counts): written in place, one
        # projection, as the hand-written query is (Spark analyzes each
        # projection as it is made: a second one cost 16 ms of plan
        # building, measured warm on 100k rows, where the query runs in
        # about 0.15 s)
        for aggregate, column in seen.items():
            answers = [a.replace(column, f"({aggregate})") for a in answers]
        return df.selectExpr("*", *answers)
    # the frames' aggregates, each once, then the answers naming them: two
    # projections, the second listing the rows' columns by name (one
    # projection through lateral column aliases and a drop of the frames'
    # columns built slower)
    windowed = df.selectExpr("*", *[f"{aggregate} AS {column}" for aggregate, column in seen.items()])
    if len(set(df.columns)) == len(df.columns):
        return windowed.selectExpr(*[quote(c) for c in df.columns], *answers)
    # (names alike are ambiguous in a projection: keep them all, drop ours)
    return windowed.selectExpr("*", *answers).drop(*[column.strip("`") for column in seen.values()])
