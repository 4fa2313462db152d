"""Compiled loops for many keys' histograms (numba, optional): their
union, their decoding and the checksums of stored sketches.

The greedy compression of a merged histogram (:func:`ehist.compress.compress`)
is sequential within a histogram: each pair decision depends on the ones
before it.  :func:`ehist.columnar_union.union_column` runs it for every group
of a column at once, in numpy, step by step in lockstep; that costs a few
numpy passes per step, so a key with many buckets (a sum's histogram holds
~``l log2(total / l)``: 1,700 buckets for four sites' 25 flows) costs
milliseconds.  Here the same decisions run as one compiled loop over the
groups, a few nanoseconds per bucket and cut.  Decoding is the other cost
every answer pays: the vectorized decoder of :mod:`ehist.columnar` makes
a dozen numpy passes over every byte (~15 us per stored count histogram);
:func:`decode_histograms` reads each blob once (~2 us), with the same
checks, and :func:`crc_matches` checks the CRCs without a Python call per
blob.

numba is the tool for this loop: the algorithm is scalar, data-dependent
control flow that numpy can only express in lockstep, and numba compiles the
Python below (no build step at install, wheels for every platform pandas
and Spark support).  It is optional: ``pip install "ehist[fast]"`` (the
``spark`` extra includes it); without it :data:`AVAILABLE` is False and the
numpy lockstep runs.  Both give the bytes of
:meth:`ExponentialHistogram.merge_all` (``tests/test_union_table.py``
checks the union against it, and the decoders against
``ExponentialHistogram.from_bytes`` on mutated bytes).  Compiled code is cached beside the module (or in
numba's user cache) after the first call in an environment.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zlib

import numpy as np

from . import run_compress
from .compress import MARGIN
from .validation import INT64_MIN

__all__ = ["AVAILABLE", "USE", "active", "jit", "kernel", "read_varint", "read_row_times", "row_times", "read_row_values", "row_values", "gcd", "read_only", "spans", "compress_groups", "union_groups",
           "keyed_union", "union_payloads", "encode_histograms", "keyed_payloads", "seal", "write_varint", "read_keyed",
           "read_keyed_bounds", "build_histograms", "bucket_bounds", "decode_histograms", "crc_matches", "crc_by_zlib",
           "encode_varints", "gather", "search_segments", "first_at_least"]

try:  # optional: ehist[fast]
    if os.environ.get("EHIST_NO_NUMBA"):
        raise ImportError("EHIST_NO_NUMBA is set")
    import numba
except ImportError:  # pragma: no cover - depends on the environment
    numba = None

#: Whether numba is importable (and not disabled by the ``EHIST_NO_NUMBA``
#: environment variable).
AVAILABLE = numba is not None

#: Set False to run the numpy paths although numba is installed (the tests
#: check both against the one-at-a-time reference).
USE = True


def active() -> bool:
    """Whether the compiled loops run: numba installed and :data:`USE`."""
    return AVAILABLE and USE

#: Groups whose total is this large or more are left to the exact Python
#: compression (the compiled loop's int64 sums of sizes stay below 2**63).
TOTAL_LIMIT = 2**61


def jit(fn):
    """``fn`` compiled (numba's ``njit``, cached on disk, without the GIL):
    how every compiled loop of the project is built, the other families'
    too (:mod:`distinct.compiled`).  Every compilation of it, and every
    load from the on-disk cache (numba does both in ``Dispatcher.compile``,
    for each new signature), holds :func:`_compile_lock`: two processes
    that compile one function at once can write a cache that crashes every
    later load of it (numba issues 4807 and 10128), and Spark starts
    several Python workers per executor, each compiling on its first
    batch.  Calls of a compiled signature take no lock."""
    if numba is None:
        raise RuntimeError("the compiled loops need numba: pip install \"ehist[fast]\"")
    dispatcher = numba.njit(cache=True, nogil=True)(fn)
    unlocked = dispatcher.compile
    name = f"{fn.__module__}.{fn.__qualname__}"

    def compile(sig):
        with _numba_lock(), _compile_lock(name):  # numba's lock first: one order for every thread
            return unlocked(sig)

    dispatcher.compile = compile
    _typed_by_kind(dispatcher)
    return dispatcher


def _typed_by_kind(dispatcher) -> None:
    """Calls of ``dispatcher`` from compiled code typed by kind, not value.

    numba types a constant argument as a literal (``Literal[int](0)``,
    ``Literal[bool](True)``) and compiles the callee once per literal
    signature: the unions' callers compiled ``_encode_one`` seven times and
    ``_ordered_read`` six.  Here the arguments of such a call lose their
    literal types (``numba.types.unliteral``) before the callee is compiled
    or looked up: one specialization per kind of argument.  A sketch table
    of counts, sums, distinct counts and p99 and its union, on first use in
    a fresh environment: 93 specializations compiled in 74 s, now 57 in 48 s
    (the unions run 0-3% slower in one process, within the noise of this
    machine).  Calls from Python are typed by their values' types already.
    Where numba has no ``get_call_template``, calls keep numba's typing."""
    typed = getattr(dispatcher, "get_call_template", None)
    unliteral = getattr(getattr(numba, "types", None), "unliteral", None)
    if typed is None or unliteral is None:  # pragma: no cover - another numba
        return

    def get_call_template(args, kws):
        return typed(tuple(unliteral(a) for a in args), {k: unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template


def kernel(fn):
    """:func:`jit` of a loop called from Python (not from other compiled
    code): the same dispatcher (every compilation of every compiled
    function holds the lock)."""
    return jit(fn)


def _numba_lock():
    """numba's own compiler lock (re-entrant, process-wide), taken before
    :func:`_compile_lock` so that two threads never take the two in
    opposite orders."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
    except ImportError:  # pragma: no cover - numba moved it
        return contextlib.nullcontext()
    return global_compiler_lock


_LOCK_DEPTH: dict = {}  # each lock's nesting in this process (a loop's compilation compiles the loops it calls)


@contextlib.contextmanager
def _compile_lock(name: str = ""):
    """An exclusive lock on a file in the temporary directory, one per
    numba cache directory and compiled function ``name``, shared by every
    process of the machine that uses that cache (the test workers share
    one; Spark's Python workers share their session's): two processes
    never compile or load one function at once, and compile different ones
    side by side.  A function's compilation compiles the functions it
    calls, each under its own lock, so locks nest along the call graph
    (acyclic: no two processes can wait for each other).  Re-entrant
    within a process (taken under numba's compiler lock: one thread at a
    time); none where ``fcntl`` is missing or the file cannot be opened."""
    cache = str(getattr(getattr(numba, "config", None), "CACHE_DIR", "") or "")
    tag = f"{zlib.crc32(f'{cache}|{name}'.encode()):08x}"
    if _LOCK_DEPTH.get(tag):
        _LOCK_DEPTH[tag] += 1
        try:
            yield
        finally:
            _LOCK_DEPTH[tag] -= 1
        return
    try:
        import fcntl

        folder = os.path.join(tempfile.gettempdir(), "ehist-numba-locks")
        os.makedirs(folder, exist_ok=True)
        f = open(os.path.join(folder, f"{tag}.lock"), "a")
    except (ImportError, OSError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        _LOCK_DEPTH[tag] = 1
        try:
            yield
        finally:
            _LOCK_DEPTH[tag] = 0
            fcntl.flock(f, fcntl.LOCK_UN)


def read_only(buf) -> np.ndarray:
    """``buf`` (bytes or an array) as contiguous uint8, read-only: the
    form every compiled reader takes its buffer in.  numba compiles a loop
    once per signature, and a read-only array (bytes, Arrow's buffers) and
    a writable one are two: a view of a writable array that cannot be
    written keeps the readers at one.

    >>> read_only(np.zeros(3, dtype=np.uint8)).flags.writeable
    False
    """
    buf = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else \
        np.ascontiguousarray(buf, dtype=np.uint8)
    if buf.flags.writeable:
        buf = buf.view()
        buf.flags.writeable = False
    return buf


def spans(buf, starts, ends, **per_blob) -> tuple:
    """``buf`` as uint8 and ``starts``, ``ends`` as int64, checked before a
    compiled loop reads ``buf[starts[i]:ends[i]]`` (compiled code does not
    check its indices): one span per blob, each inside ``buf``, and every
    array of ``per_blob`` (name -> array) one value per blob.

    >>> spans(b"abc", [0, 5], [3, 6])
    Traceback (most recent call last):
    ...
    ValueError: spans must lie in the buffer of 3 bytes with starts <= ends, got starts [0, 5], ends [3, 6]
    """
    buf = read_only(buf)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if starts.ndim != 1 or ends.shape != starts.shape:
        raise ValueError(f"starts and ends must be one-dimensional and of one length, got {starts.shape} and "
                         f"{ends.shape}")
    if starts.size and (starts.min() < 0 or ends.max() > buf.size or np.any(starts > ends)):
        raise ValueError(f"spans must lie in the buffer of {buf.size} bytes with starts <= ends, got starts "
                         f"{starts.tolist()[:8]}, ends {ends.tolist()[:8]}")
    for name, values in per_blob.items():
        if np.shape(values) != starts.shape:
            raise ValueError(f"{name} must have one value per blob ({starts.size}), got shape {np.shape(values)}")
    return buf, starts, ends


def compress_groups(exps, hi, lo, group_starts, cutoff, k: int, order: bool = False):
    """:func:`ehist.compress.compress` of every group, compiled.

    Parameters
    ----------
    exps, hi, lo : numpy.ndarray
        Every group's merged buckets, newest first within a group (int64);
        with ``order``, each group's histograms one after the other, to be
        put in ``merge_all``'s order first (newest first; ties: larger lo,
        then the later histogram first).
    group_starts : numpy.ndarray
        Group ``g`` is buckets ``group_starts[g]:group_starts[g + 1]``
        (``groups + 1`` entries).
    cutoff : numpy.ndarray
        Each group's smallest legal cutoff.
    k : int
        ``ceil(1 / eps)``.
    order : bool
        Order each group's buckets first (see above).

    Returns
    -------
    (exps, hi, lo, counts): the surviving buckets of every group in order,
    and how many each group kept.  Every group's total must be below
    :data:`TOTAL_LIMIT`.

    Raises
    ------
    ValueError
        Arrays of different lengths, group starts that do not run from 0
        to the number of buckets without decreasing, a cutoff per group
        missing, ``k < 1``, or an exponent outside [0, 62].

    Examples
    --------
    >>> _ = __import__("pytest").importorskip("numba")
    >>> import numpy as np
    >>> hi = np.array([9, 9, 5, 4, 3, 2, 1, 1])      # two groups' buckets, newest first
    >>> exps, hi_out, lo_out, counts = compress_groups(np.zeros(8), hi, hi, [0, 4, 8], [0, 0], k=2)
    >>> counts.tolist(), exps.tolist()               # merged where the error budget allows
    ([2, 3], [1, 1, 0, 0, 1])
    >>> from ehist.compress import compress          # what the Python reference decides, group by group
    >>> [compress(np.zeros(4, dtype=np.int8), hi[a:a + 4], hi[a:a + 4], 2, 0)[0].tolist() for a in (0, 4)]
    [[1, 1], [0, 0, 1]]
    """
    exps, hi, lo = (np.ascontiguousarray(a, dtype=np.int64) for a in (exps, hi, lo))
    starts = np.ascontiguousarray(group_starts, dtype=np.int64)
    cutoff = np.ascontiguousarray(cutoff, dtype=np.int64)
    if not (exps.ndim == hi.ndim == lo.ndim == 1 and exps.size == hi.size == lo.size):
        raise ValueError(f"exps, hi and lo must be one-dimensional and of one length, got {exps.shape}, "
                         f"{hi.shape}, {lo.shape}")
    if starts.ndim != 1 or starts.size < 1 or starts[0] != 0 or starts[-1] != exps.size or np.any(np.diff(starts) < 0):
        raise ValueError(f"group_starts must run from 0 to {exps.size} without decreasing, got {starts.tolist()[:8]}")
    if cutoff.shape != (starts.size - 1,):
        raise ValueError(f"cutoff must have one value per group ({starts.size - 1}), got shape {cutoff.shape}")
    if int(k) < 1 or (exps.size and (exps.min() < 0 or exps.max() > 62)):
        raise ValueError(f"k must be at least 1 and exponents in [0, 62], got k={k}")
    return _kernel("compress")(exps, hi, lo, starts, cutoff, int(k), 2.0 * (1.0 - MARGIN), bool(order))


def union_groups(exps, hi, lo, offsets, newest, has_newest, merged, group_starts, window: int, k: int):
    """Every group's :meth:`ExponentialHistogram.merge_all`, compiled: the
    live prefixes, the copies and the compressed unions of
    :func:`ehist.columnar_union.union_column` in one pass over the groups
    (no numpy pass over every bucket between them).

    Parameters
    ----------
    exps, hi, lo : numpy.ndarray
        The buckets of every histogram, newest first within each
        (:class:`~ehist.columnar.HistogramColumn`'s arrays).
    offsets : numpy.ndarray
        Histogram ``i`` is buckets ``offsets[i]:offsets[i + 1]``.
    newest, has_newest, merged : numpy.ndarray
        Per histogram.
    group_starts : numpy.ndarray
        Group ``g`` is histograms ``group_starts[g]:group_starts[g + 1]``
        (``groups + 1`` entries, none empty).
    window, k : int
        The histograms' window and ``ceil(1 / eps)``.

    Returns
    -------
    (ok, exps, hi, lo, counts, newest, has_newest, merged): per group its
    bucket count, newest timestamp and flags, the buckets in group order.
    ``ok`` is False, and nothing else is computed, when a group's total
    reaches ``TOTAL_LIMIT / 2``: those are left to the exact Python paths.
    """
    if np.asarray(exps).size and (np.min(exps) < 0 or np.max(exps) > 62):
        raise ValueError(f"exponents must lie in [0, 62], got {np.min(exps)} to {np.max(exps)}")
    exps = np.ascontiguousarray(exps, dtype=np.int8)  # the column's own dtype: no copy
    hi, lo, offsets, newest, group_starts = (np.ascontiguousarray(a, dtype=np.int64) for a in (
        hi, lo, offsets, newest, group_starts))
    has_newest, merged = (np.ascontiguousarray(a, dtype=np.bool_) for a in (has_newest, merged))
    hists = offsets.size - 1
    if not (exps.ndim == hi.ndim == lo.ndim == 1 and exps.size == hi.size == lo.size == offsets[-1]
            and offsets[0] == 0 and np.all(np.diff(offsets) >= 0)):
        raise ValueError(f"exps, hi and lo must hold offsets[-1] buckets with offsets from 0 up, got {exps.shape}, "
                         f"{hi.shape}, {lo.shape} and offsets {offsets.tolist()[:8]}")
    if newest.shape != (hists,) or has_newest.shape != (hists,) or merged.shape != (hists,):
        raise ValueError(f"newest, has_newest and merged must have one value per histogram ({hists})")
    if (group_starts.ndim != 1 or group_starts.size < 1 or group_starts[0] != 0 or group_starts[-1] != hists
            or np.any(np.diff(group_starts) <= 0)):
        raise ValueError(f"group_starts must run from 0 to {hists}, strictly increasing, got "
                         f"{group_starts.tolist()[:8]}")
    if int(window) < 1 or int(k) < 1:
        raise ValueError(f"window and k must be at least 1, got {window} and {k}")
    _kernel("compress")
    return _kernel("union")(exps, hi, lo, offsets, newest, has_newest, merged, group_starts, np.int64(window),
                            np.int64(k), 2.0 * (1.0 - MARGIN), float(TOTAL_LIMIT / 2))


def union_payloads(buf, starts, ends, flags, version_2, newest, group_starts, window: int, l: int, k: int):
    """:func:`decode_histograms`, :func:`union_groups` and
    :func:`encode_histograms` in one pass, group by group: each group's
    histograms (payloads ``buf[starts[i]:ends[i]]`` whose heads, checksums
    and parameters the caller checked, in merge order) united in scratch
    the size of one group and written as one payload: ordered histograms
    read as runs of equal buckets and merged by stretches
    (:func:`_unite_by_runs`: a sum's 1,700 buckets at four sites are ~200
    runs), others decoded bucket by bucket.  No column of every bucket is
    built (a day's sums at 100k sources and 4 sites hold 171 million
    buckets: 2.9 GB, most of a union's time spent writing them).

    Returns
    -------
    (ok, payload, byte_starts, byte_ends, flags, newest): the groups'
    payloads and flags (each group's newest timestamp its histograms'
    latest).  ``ok`` is False, and the rest meaningless, where a histogram
    needs ``from_bytes`` to decide it or a group's total reaches
    ``TOTAL_LIMIT / 2``: the caller then takes the general path.
    """
    buf, starts, ends = spans(buf, starts, ends, flags=flags, version_2=version_2, newest=newest)
    group_starts = np.ascontiguousarray(group_starts, dtype=np.int64)
    if (group_starts.ndim != 1 or group_starts.size < 1 or group_starts[0] != 0 or group_starts[-1] != starts.size
            or np.any(np.diff(group_starts) <= 0)):
        raise ValueError(f"group_starts must run from 0 to {starts.size}, strictly increasing, got "
                         f"{group_starts.tolist()[:8]}")
    if int(window) < 1 or int(l) < 1 or int(k) < 1:
        raise ValueError(f"window, l and k must be at least 1, got {window}, {l} and {k}")
    _kernel("decode")
    _kernel("compress")
    _kernel("encode")
    return _kernel("union_payloads")(
        buf, starts, ends, np.ascontiguousarray(flags, dtype=np.uint8), np.ascontiguousarray(version_2, dtype=np.bool_),
        np.ascontiguousarray(newest, dtype=np.int64), group_starts, np.int64(window), np.int64(l), np.int64(k),
        2.0 * (1.0 - MARGIN), float(TOTAL_LIMIT / 2))


def keyed_union(keys, offsets, exps, hi, lo, merged, counter_starts, sketch_starts, newest, window: int, k: int):
    """The unions of many keyed-histogram sketches' counters, compiled
    (:func:`ehist.counters.merge_keyed_groups`): sketch ``s`` holds
    counters ``counter_starts[s]:counter_starts[s + 1]`` (keys ascending,
    each a histogram of buckets ``offsets[c]:offsets[c + 1]``, newest
    first), group ``g`` sketches ``sketch_starts[g]:sketch_starts[g + 1]``
    in merge order, settled at ``newest[g]``.  Each key of a group: its
    counters' live buckets, one counter's kept as they are (and its merged
    flag), several's ordered and compressed as
    :meth:`ExponentialHistogram.merge_all` does (:func:`union_groups`'s
    steps), with no numpy pass over every counter between them.

    Returns
    -------
    (ok, group, keys, counts, merged, exps, hi, lo): per united counter
    holding units (by group, then key) its group, key, bucket count and
    merged flag; the buckets.  ``ok`` False, nothing else computed, when a
    counter's total reaches ``TOTAL_LIMIT / 2`` (the exact paths decide).

    Examples
    --------
    Two quantile sketches in one group, as of time 4: their five bins
    share one key, so the union holds four, the shared one of two units:

    >>> _ = __import__("pytest").importorskip("numba")
    >>> from ehist.keyed_counters import KeyedCounters
    >>> from ehist.validation import k_of_eps
    >>> from quantiles import SlidingQuantiles
    >>> a = SlidingQuantiles(100).update([1, 2, 3], [5.0, 50.0, 500.0])
    >>> b = SlidingQuantiles(100).update([2, 4], [50.0, 7.0])
    >>> kc = KeyedCounters.of_sketches([a, b]); c = kc.col
    >>> ok, group, keys, counts, merged, exps, hi, lo = keyed_union(
    ...     kc.keys, c.offsets, c.exps, c.hi, c.lo, c.merged, kc.offsets, [0, 2], [4], 100, k_of_eps(c.eps))
    >>> ok, group.tolist(), keys.tolist() == sorted(set(kc.keys.tolist())), int((1 << exps.astype(int)).sum())
    (True, [0, 0, 0, 0], True, 5)
    """
    exps = np.ascontiguousarray(exps, dtype=np.int8)
    keys, offsets, hi, lo, counter_starts, sketch_starts, newest = (np.ascontiguousarray(a, dtype=np.int64) for a in (
        keys, offsets, hi, lo, counter_starts, sketch_starts, newest))
    merged = np.ascontiguousarray(merged, dtype=np.bool_)
    counters = keys.size
    if not (offsets.size == counters + 1 and offsets[0] == 0 and offsets[-1] == exps.size == hi.size == lo.size
            and np.all(np.diff(offsets) >= 0) and merged.size == counters):
        raise ValueError("keys, offsets, exps, hi, lo and merged must describe one keyed column")
    if not (counter_starts.size >= 1 and counter_starts[0] == 0 and counter_starts[-1] == counters
            and np.all(np.diff(counter_starts) >= 0) and sketch_starts.size == newest.size + 1
            and sketch_starts[0] == 0 and sketch_starts[-1] == counter_starts.size - 1
            and np.all(np.diff(sketch_starts) >= 0)):
        raise ValueError("counter_starts and sketch_starts must cut the counters into sketches and groups")
    if exps.size and (np.min(exps) < 0 or np.max(exps) > 62):
        raise ValueError(f"exponents must lie in [0, 62], got {np.min(exps)} to {np.max(exps)}")
    if int(window) < 1 or int(k) < 1:
        raise ValueError(f"window and k must be at least 1, got {window} and {k}")
    _kernel("compress")
    return _kernel("keyed_union")(keys, offsets, exps, hi, lo, merged, counter_starts, sketch_starts, newest,
                                  np.int64(window), np.int64(k), 2.0 * (1.0 - MARGIN), float(TOTAL_LIMIT / 2))


def encode_histograms(exps, hi, lo, offsets, newest, has_newest, merged, compact: bool = False):
    """The payloads of :meth:`ExponentialHistogram.to_bytes` (the varints
    after the head and newest; layout in :mod:`ehist.eh_layout`) of many
    histograms in one compiled pass: ``(payload, byte_starts, byte_ends,
    flags)``, histogram ``i``'s payload at ``payload[byte_starts[i]:
    byte_ends[i]]`` and its flags (has newest, merged, shared timestamps,
    tick).  The arrays are a :class:`~ehist.columnar.HistogramColumn`'s,
    whose invariants they must hold (exponents in [0, 62], a newest
    timestamp with every bucket).  With ``compact`` each payload follows
    a byte holding its flags, and ``byte_starts[i]`` is that byte's
    position (the compact counters of :mod:`ehist.counters`, back to back)."""
    exps = np.ascontiguousarray(exps, dtype=np.int8)
    hi, lo, offsets, newest = (np.ascontiguousarray(a, dtype=np.int64) for a in (hi, lo, offsets, newest))
    has_newest, merged = (np.ascontiguousarray(a, dtype=np.bool_) for a in (has_newest, merged))
    hists = offsets.size - 1
    if not (exps.size == hi.size == lo.size == offsets[-1] and offsets[0] == 0 and np.all(np.diff(offsets) >= 0)
            and newest.shape == has_newest.shape == merged.shape == (hists,)):
        raise ValueError("exps, hi, lo, offsets, newest, has_newest and merged must describe one column of "
                         f"histograms, got {exps.shape}, {hi.shape}, {lo.shape}, {offsets.shape}, {newest.shape}")
    _kernel("decode")  # the compiled gcd
    return _kernel("encode")(exps, hi, lo, offsets, newest, has_newest, merged, bool(compact))


def keyed_payloads(prefix, prefix_offsets, keys, offsets, exps, hi, lo, bucket_offsets, newest, has_newest, merged,
                   regions):
    """Payloads of many keyed-counter sketches in one compiled pass: sketch
    ``s``'s varints ``prefix[prefix_offsets[s]:prefix_offsets[s + 1]]``
    (a family's own fields, e.g. the quantile bins' keys), then, where
    ``regions[s]``, its counter region as
    :meth:`ehist.keyed_counters.KeyedCounters.write` writes it: ``varint
    n``, the key gaps, the byte lengths, each counter's compact histogram
    (flags byte and payload, :func:`encode_histograms` with ``compact``).
    Sketch ``s`` holds counters ``offsets[s]:offsets[s + 1]`` (keys
    ascending), counter ``c`` buckets ``bucket_offsets[c]:bucket_offsets[c
    + 1]`` with its ``newest``, ``has_newest`` and ``merged``.

    Returns
    -------
    (payload, byte_starts, byte_ends): sketch ``s``'s bytes at
    ``payload[byte_starts[s]:byte_ends[s]]``, one after the other (read
    back in :func:`read_keyed`'s example).
    """
    exps = np.ascontiguousarray(exps, dtype=np.int8)
    prefix = np.ascontiguousarray(prefix, dtype=np.uint64)
    prefix_offsets, keys, offsets, hi, lo, bucket_offsets, newest = (np.ascontiguousarray(a, dtype=np.int64) for a in (
        prefix_offsets, keys, offsets, hi, lo, bucket_offsets, newest))
    has_newest, merged, regions = (np.ascontiguousarray(a, dtype=np.bool_) for a in (has_newest, merged, regions))
    sketches, counters = regions.size, keys.size
    if not (prefix_offsets.size == offsets.size == sketches + 1 and prefix_offsets[0] == offsets[0] == 0
            and prefix_offsets[-1] == prefix.size and offsets[-1] == counters and np.all(np.diff(prefix_offsets) >= 0)
            and np.all(np.diff(offsets) >= 0) and bucket_offsets.size == counters + 1 and bucket_offsets[0] == 0
            and bucket_offsets[-1] == exps.size == hi.size == lo.size and np.all(np.diff(bucket_offsets) >= 0)
            and newest.size == has_newest.size == merged.size == counters):
        raise ValueError("prefix, keys and the histograms must be cut into one run per sketch")
    if exps.size and (np.min(exps) < 0 or np.max(exps) > 62):
        raise ValueError(f"exponents must lie in [0, 62], got {np.min(exps)} to {np.max(exps)}")
    _kernel("decode")  # the compiled gcd
    _kernel("encode")
    return _kernel("keyed_payloads")(prefix, prefix_offsets, keys, offsets, exps, hi, lo, bucket_offsets, newest,
                                     has_newest, merged, regions)


def seal(head, flags, newest, has_newest, payload, byte_starts, byte_ends, flags_at: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole blobs, one after the other: ``(buf, offsets)``, blob ``i`` at
    ``buf[offsets[i]:offsets[i + 1]]``: ``head`` (the preamble and
    parameters, its two-byte flags field at ``flags_at`` set to
    ``flags[i]``), the little-endian
    ``newest[i]`` where ``has_newest[i]``, the payload span, and the
    CRC-32 of all of it (:mod:`ehist.serialization`'s framing), in one
    compiled pass.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> import zlib
    >>> buf, offsets = seal(b"EH\\x01\\x02\\x00\\x00", [1], [7], [True], np.array([3], dtype=np.uint8), [0], [1], 4)
    >>> blob = buf.tobytes()
    >>> blob[:-4] == b"EH\\x01\\x02\\x01\\x00" + (7).to_bytes(8, "little") + b"\\x03"
    True
    >>> int.from_bytes(blob[-4:], "little") == zlib.crc32(blob[:-4]), offsets.tolist()
    (True, [0, 19])
    """
    head = np.frombuffer(bytes(head), dtype=np.uint8)
    payload = np.ascontiguousarray(payload, dtype=np.uint8)
    flags = np.ascontiguousarray(flags, dtype=np.uint16)
    newest, byte_starts, byte_ends = (np.ascontiguousarray(a, dtype=np.int64) for a in (newest, byte_starts,
                                                                                        byte_ends))
    has_newest = np.ascontiguousarray(has_newest, dtype=np.bool_)
    if not (flags.shape == newest.shape == has_newest.shape == byte_starts.shape == byte_ends.shape
            and flags.ndim == 1):
        raise ValueError("flags, newest, has_newest and the byte spans must have one value per blob")
    spans(payload, byte_starts, byte_ends)
    if not 0 <= flags_at <= head.size - 2:
        raise ValueError(f"the head must hold the two flag bytes at {flags_at}, got {head.size} bytes")
    return _kernel("seal")(head, int(flags_at), flags, newest, has_newest, payload, byte_starts, byte_ends, _CRC_TABLE)


def read_keyed(buf, starts, ends, size, least: int, newest, window: int, l: int):
    """Keyed counter regions read and their compact histograms decoded in
    one compiled pass: each region's ``varint n``, gaps and lengths
    (:func:`ehist.counters.write_counters`) and :func:`decode_histograms`
    of every counter together, with the checks
    :meth:`ehist.keyed_counters.KeyedCounters.read` makes between them
    (gaps and keys below ``size[i]``, lengths of at least ``least`` bytes
    adding up to the region, a flags byte marking a newest time, every
    counter decoded and holding units).  Region ``i`` holds counters of a
    sketch ending at ``newest[i]``; ``window`` and ``l`` are valid.

    Returns
    -------
    (ok, n, keys, counts, merged, exps, hi, lo): per region whether it was
    accepted and its counter count (0 when not); per counter of the
    accepted regions, in order, its key, bucket count and merged flag; the
    buckets.  A rejected region leaves nothing behind (the caller's slow
    path decides it).

    Examples
    --------
    Two quantile sketches' counters written by :func:`keyed_payloads` and
    read back (keys below ``2**40``; compact histograms of 3 bytes or more):

    >>> _ = __import__("pytest").importorskip("numba")
    >>> from ehist.keyed_counters import KeyedCounters
    >>> from quantiles import SlidingQuantiles
    >>> a = SlidingQuantiles(100).update([1, 2, 3], [5.0, 50.0, 500.0])
    >>> b = SlidingQuantiles(100).update([2, 4], [50.0, 7.0])
    >>> kc = KeyedCounters.of_sketches([a, b]); c = kc.col
    >>> buf, starts, ends = keyed_payloads(np.zeros(0, np.uint64), [0, 0, 0], kc.keys, kc.offsets, c.exps, c.hi,
    ...                                    c.lo, c.offsets, c.newest, c.has_newest, c.merged, [True, True])
    >>> ok, n, keys, counts, merged, exps, hi, lo = read_keyed(buf, starts, ends, 2**40, 3, [3, 4], 100, c._l)
    >>> ok.tolist(), n.tolist(), keys.tolist() == kc.keys.tolist(), hi.tolist() == c.hi.tolist()
    ([True, True], [3, 2], True, True)
    """
    buf, starts, ends = spans(buf, starts, ends, newest=newest)
    size = np.ascontiguousarray(np.broadcast_to(np.asarray(size, dtype=np.int64), starts.shape))
    if int(window) < 1 or int(l) < 1:
        raise ValueError(f"window and l must be at least 1, got {window} and {l}")
    _kernel("decode")
    return _kernel("read_keyed")(buf, starts, ends, size, np.int64(least), np.ascontiguousarray(newest, dtype=np.int64),
                                 np.int64(window), np.int64(l))


def read_keyed_bounds(buf, starts, ends, size, least: int, newest, window: int, l: int, cutoffs):
    """:func:`read_keyed` with each counter bounded for the units after its
    region's ``cutoffs[i]`` as it is decoded (:func:`decode_bounds`'s
    bounds), no column built: ``(ok, n, keys, lower, upper, units)``, per
    counter of the accepted regions its key, bounds and total."""
    buf, starts, ends = spans(buf, starts, ends, newest=newest, cutoffs=cutoffs)
    size = np.ascontiguousarray(np.broadcast_to(np.asarray(size, dtype=np.int64), starts.shape))
    if int(window) < 1 or int(l) < 1:
        raise ValueError(f"window and l must be at least 1, got {window} and {l}")
    _kernel("decode")
    _kernel("build")
    return _kernel("read_keyed_bounds")(buf, starts, ends, size, np.int64(least),
                                        np.ascontiguousarray(newest, dtype=np.int64), np.int64(window), np.int64(l),
                                        np.ascontiguousarray(cutoffs, dtype=np.int64))


def build_histograms(ts, starts, values, window: int, l: int, exact: bool, exact_ok, cutoff):
    """The payloads of :func:`ehist.columnar.histogram_bytes` (runs sorted
    by time, values checked, totals within int64), each run's histogram
    built in one compiled pass as :meth:`~ehist.columnar.HistogramColumn.build`
    builds it, or with ``exact`` its exact form where that encodes shorter
    (:func:`ehist.columnar.exact_forms`; ``exact_ok`` marks the runs whose
    total leaves it exact), with the bounds at each run's ``cutoff``.

    Returns
    -------
    (payload, byte_starts, byte_ends, flags, newest, has_newest, lower,
    upper), one entry per run.
    """
    ts = np.ascontiguousarray(ts, dtype=np.int64)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ones = values is None
    v = np.ones(1, dtype=np.int64) if ones else np.ascontiguousarray(values, dtype=np.int64)
    exact_ok = np.ascontiguousarray(exact_ok, dtype=np.bool_)
    cutoff = np.ascontiguousarray(cutoff, dtype=np.int64)
    if not ones and v.shape != ts.shape:
        raise ValueError(f"values must have one entry per timestamp, got {v.shape} and {ts.shape}")
    if exact_ok.shape != starts.shape or cutoff.shape != starts.shape:
        raise ValueError("exact_ok and cutoff must have one entry per run")
    _kernel("encode")
    _kernel("decode")
    return _kernel("build")(ts, starts, v, bool(ones), np.int64(window), np.int64(l), bool(exact), exact_ok, cutoff)


def bucket_bounds(exps, hi, lo, offsets, cutoffs) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of every histogram of a column (histogram ``i``:
    buckets ``offsets[i]:offsets[i + 1]``) for the units after
    ``cutoffs[i]``: a bucket counts whole when its oldest unit is after
    the cutoff, by its newest unit alone when it straddles it
    (:meth:`ehist.columnar.HistogramColumn.bounds`), in one compiled pass."""
    exps = np.ascontiguousarray(exps, dtype=np.int8)
    hi, lo, offsets, cutoffs = (np.ascontiguousarray(a, dtype=np.int64) for a in (hi, lo, offsets, cutoffs))
    if not (exps.size == hi.size == lo.size == offsets[-1] and cutoffs.shape == (offsets.size - 1,)):
        raise ValueError("exps, hi, lo, offsets and cutoffs must describe one column of histograms")
    _kernel("build")
    return _kernel("bounds")(exps, hi, lo, offsets, cutoffs)


def decode_histograms(buf, starts, ends, flags, version_2, newest, window: int, l: int):
    """Decode the payloads ``buf[starts[i]:ends[i]]`` of exponential
    histograms (the bytes after the head fields, before the CRC; layout in
    :mod:`ehist.eh_layout`), whose head, checksum, window and eps were
    checked (:func:`ehist.columnar._decode_fast`), with their flags,
    versions and newest timestamps.

    A blob is accepted only when every check of
    ``ExponentialHistogram.from_bytes`` passes on it with the same result;
    the rest, and rare cases this loop leaves out (timestamps within 2**61
    of int64's edges, totals of 2**62 or more), are rejected for the caller
    to hand to ``from_bytes``.

    Returns
    -------
    (accepted mask, bucket counts, exps, hi, lo) of the accepted blobs in
    order.
    """
    buf, starts, ends = spans(buf, starts, ends, flags=flags, version_2=version_2, newest=newest)
    if int(window) < 1 or int(l) < 1:
        raise ValueError(f"window and l must be at least 1, got {window} and {l}")
    ok, counts, exps, hi, lo = _kernel("decode")(
        buf, starts, ends, np.ascontiguousarray(flags, dtype=np.uint8),
        np.ascontiguousarray(version_2, dtype=np.bool_), np.ascontiguousarray(newest, dtype=np.int64),
        int(window), int(l))
    return ok, counts[ok], exps, hi, lo


def decode_bounds(buf, starts, ends, flags, version_2, newest, window: int, l: int, cutoffs):
    """:func:`decode_histograms` and :func:`bucket_bounds` in one pass,
    without building the column: ``(accepted mask, lower, upper, bucket
    counts, units)``, each accepted blob's bounds for the units after
    ``cutoffs[i]``, its number of buckets and its total (the rejected ones'
    are 0: the caller decodes them the slow way)."""
    buf, starts, ends = spans(buf, starts, ends, flags=flags, version_2=version_2, newest=newest, cutoffs=cutoffs)
    if int(window) < 1 or int(l) < 1:
        raise ValueError(f"window and l must be at least 1, got {window} and {l}")
    _kernel("decode")
    _kernel("build")
    return _kernel("decode_bounds")(
        buf, starts, ends, np.ascontiguousarray(flags, dtype=np.uint8), np.ascontiguousarray(version_2, dtype=np.bool_),
        np.ascontiguousarray(newest, dtype=np.int64), int(window), int(l), np.ascontiguousarray(cutoffs, dtype=np.int64))


def crc_matches(buf, starts, lengths) -> np.ndarray:
    """Whether each blob ``buf[starts[i]:starts[i] + lengths[i]]`` (at
    least 4 bytes) ends with the little-endian CRC-32 (zlib's) of the bytes
    before it: the check of :func:`ehist.serialization.open_sealed`, for
    many blobs in one compiled pass.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> import zlib
    >>> blob = b"sketch" + zlib.crc32(b"sketch").to_bytes(4, "little")
    >>> crc_matches(blob + blob[:-1] + b"x", [0, 10], [10, 10]).tolist()
    [True, False]
    """
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    buf, starts, _ = spans(buf, starts, np.asarray(starts, dtype=np.int64) + lengths)
    if lengths.size and lengths.min() < 4:
        raise ValueError(f"every blob needs its 4 checksum bytes, got a length of {int(lengths.min())}")
    return _kernel("crc")(buf, starts, lengths, _CRC_TABLE)


def crc_by_zlib() -> bool:
    """Whether the compiled checksums run zlib's own ``crc32`` (as fast per
    byte as :func:`zlib.crc32`, so blobs of any size are checked in one
    compiled pass), not the table loop (slower per byte than zlib: large
    blobs are better checked by :func:`zlib.crc32`, one call each)."""
    return active() and _zlib_crc32() is not None


def gather(src, starts, ends) -> np.ndarray:
    """``src[starts[i]:ends[i]]`` of every ``i``, concatenated, in one
    compiled copy (:func:`ehist.segments.gather`; no index per element).

    >>> _ = __import__("pytest").importorskip("numba")
    >>> gather(np.arange(10, dtype=np.uint8), [5, 0, 9], [7, 0, 10]).tolist()
    [5, 6, 9]
    """
    src = np.ascontiguousarray(src)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if starts.shape != ends.shape or starts.ndim != 1 or src.ndim != 1:
        raise ValueError("src must be one-dimensional, starts and ends one-dimensional and of one length")
    if starts.size and (starts.min() < 0 or ends.max() > src.size or np.any(ends < starts)):
        raise ValueError(f"every span must lie inside the {src.size} elements, start before end")
    return _kernel("gather")(src, starts, ends)


def _gather(src, starts, ends):
    total = 0
    for i in range(starts.size):
        total += ends[i] - starts[i]
    out = np.empty(total, dtype=src.dtype)
    at = 0
    for i in range(starts.size):
        n = ends[i] - starts[i]
        if n >= _LONG_SPAN:  # one slice copy
            out[at:at + n] = src[starts[i]:ends[i]]
            at += n
            continue
        for j in range(starts[i], ends[i]):  # element by element: most spans are a few elements (no views)
            out[at] = src[j]
            at += 1
    return out


#: Spans of this many elements or more are copied by one slice assignment in
#: the compiled gathers, the shorter ones element by element.
_LONG_SPAN = 64


def search_segments(values, lo, hi, needles) -> np.ndarray:
    """Where each column of ``needles`` (``rows x n``) would go in its
    segment ``values[lo[c]:hi[c]]`` of sorted int64 ``values``
    (``np.searchsorted``'s left side, as positions in ``values``): a binary
    search of a few cached entries, not of the whole array
    (:func:`ehist.segments.search_segments`).

    >>> _ = __import__("pytest").importorskip("numba")
    >>> search_segments(np.array([1, 5, 9, 2, 4]), [0, 3], [3, 5], np.array([[5, 3], [10, 4]])).tolist()
    [[1, 4], [3, 4]]
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    lo, hi = (np.ascontiguousarray(a, dtype=np.int64) for a in (lo, hi))
    needles = np.ascontiguousarray(np.atleast_2d(needles), dtype=np.int64)
    if not (lo.shape == hi.shape == needles.shape[1:] and lo.ndim == 1 and needles.ndim == 2):
        raise ValueError(f"lo and hi need one bound per needle column, got {lo.shape}, {hi.shape}, {needles.shape}")
    if lo.size and (lo.min() < 0 or hi.max() > values.size or np.any(hi < lo)):
        raise ValueError(f"every segment must lie inside the {values.size} values")
    return _kernel("search")(values, lo, hi, needles)


def _search_segments(values, lo, hi, needles):
    rows, n = needles.shape
    out = np.empty((rows, n), dtype=np.int64)
    for c in range(n):
        segment = values[lo[c]:hi[c]]
        for r in range(rows):
            out[r, c] = lo[c] + _bisect_left(segment, needles[r, c])
    return out


def encode_varints(values) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes as uint8, each value's byte length)``: uint64 ``values`` as
    minimal LEB128 varints, one after the other
    (:func:`ehist.serialization.encode_varints`, in one compiled pass).

    >>> _ = __import__("pytest").importorskip("numba")
    >>> out, lengths = encode_varints(np.array([1, 300], dtype=np.uint64))
    >>> out.tolist(), lengths.tolist()
    ([1, 172, 2], [1, 2])
    """
    return _kernel("varints")(np.ascontiguousarray(values, dtype=np.uint64))


def _encode_varints(values):
    n = values.size
    lengths = np.empty(n, dtype=np.int64)
    total = 0
    for i in range(n):
        v = values[i]
        k = 1
        while v >= np.uint64(0x80):
            v >>= np.uint64(7)
            k += 1
        lengths[i] = k
        total += k
    out = np.empty(total, dtype=np.uint8)
    at = 0
    for i in range(n):
        v = values[i]
        while v >= np.uint64(0x80):
            out[at] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
            v >>= np.uint64(7)
            at += 1
        out[at] = np.uint8(v)
        at += 1
    return out, lengths


def write_varint(out, at, value):
    """Write ``value`` (uint64) as a minimal LEB128 varint at ``out[at]``
    and return the next position: :func:`read_varint`'s inverse, for
    compiled encoders to :func:`jit`."""
    v = np.uint64(value)
    while v >= np.uint64(0x80):
        out[at] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        at += 1
    out[at] = np.uint8(v)
    return at + 1


def _encode_one(exps, hi, lo, a, z, newest, has_newest, merged, out, at):
    """One histogram's payload (buckets ``a:z`` of the arrays) written at
    ``out[at]``: ``(next position, flags)``."""
    n = z - a
    f = (1 if has_newest else 0) | (2 if merged else 0)
    if n == 0:
        out[at] = 0
        return at + 1, f
    n_runs = 1
    n_same = 0
    for b in range(a + 1, z):
        if exps[b] != exps[b - 1]:
            n_runs += 1
        if hi[b] == hi[b - 1]:
            n_same += 1
    maps = (n + _BITS - 1) // _BITS
    bitmap = n_same > maps
    # the tick: the gcd of the deltas and widths
    g = np.uint64(0)
    prev = newest
    for b in range(a, z):
        if bitmap and b > a and hi[b] == hi[b - 1]:
            continue
        g = _gcd(g, np.uint64(prev) - np.uint64(hi[b]))
        prev = hi[b]
    if merged:
        for b in range(a, z):
            g = _gcd(g, np.uint64(hi[b]) - np.uint64(lo[b]))
    else:
        g = _gcd(g, np.uint64(hi[z - 1]) - np.uint64(lo[z - 1]))
    ticked = g >= np.uint64(2)
    tick = g if ticked else np.uint64(1)
    if bitmap:
        f |= _FLAG_SHARED
    if ticked:
        f |= _FLAG_TICK
    at = _wvarint(out, at, np.uint64(n))
    at = _wvarint(out, at, np.uint64(n_runs))
    run = a
    for b in range(a + 1, z + 1):
        if b == z or exps[b] != exps[b - 1]:
            at = _wvarint(out, at, np.uint64(exps[run]))
            at = _wvarint(out, at, np.uint64(b - run))
            run = b
    if ticked:
        at = _wvarint(out, at, tick)
    if bitmap:
        for m in range(maps):
            out[at + m] = 0
        for j in range(1, n):
            if hi[a + j] == hi[a + j - 1]:
                out[at + j // _BITS] |= np.uint8(1 << (j % _BITS))
        at += maps
    prev = newest
    for b in range(a, z):
        if bitmap and b > a and hi[b] == hi[b - 1]:
            continue
        at = _wvarint(out, at, (np.uint64(prev) - np.uint64(hi[b])) // tick)
        prev = hi[b]
    if merged:
        for b in range(a, z):
            at = _wvarint(out, at, (np.uint64(hi[b]) - np.uint64(lo[b])) // tick)
    else:
        at = _wvarint(out, at, (np.uint64(hi[z - 1]) - np.uint64(lo[z - 1])) // tick)
    return at, f


def _encode_all(exps, hi, lo, offsets, newest, has_newest, merged, compact):
    hists = offsets.size - 1
    # a histogram takes at most 2 x 10 bytes of counts and tick, and per bucket 2 run varints (<= 2 bytes: an
    # exponent below 63, a length below 2**14 here or 10 bytes), a bitmap bit, a delta and a width (10 bytes each);
    # compact: and its flags byte
    out = np.empty(33 * hists + 42 * exps.size + 16, dtype=np.uint8)
    byte_starts = np.empty(hists, dtype=np.int64)
    byte_ends = np.empty(hists, dtype=np.int64)
    flags = np.empty(hists, dtype=np.uint8)
    at = 0
    for i in range(hists):
        byte_starts[i] = at
        if compact:
            at += 1
        at, f = _enc1(exps, hi, lo, offsets[i], offsets[i + 1], newest[i], has_newest[i], merged[i], out, at)
        if compact:
            out[byte_starts[i]] = f
        byte_ends[i] = at
        flags[i] = f
    return out[:at], byte_starts, byte_ends, flags


def _keyed_payloads_all(prefix, prefix_offsets, keys, offsets, exps, hi, lo, bucket_offsets, newest, has_newest,
                        merged, regions):
    sketches = regions.size
    # a varint takes at most 10 bytes; a compact histogram its flags byte and what _encode_all allows it
    most = 0
    for s in range(sketches):
        size = 0
        for c in range(offsets[s], offsets[s + 1]):
            size += 33 + 42 * (bucket_offsets[c + 1] - bucket_offsets[c])
        most = max(most, size)
    out = np.empty(10 * (prefix.size + sketches + 2 * keys.size) + 33 * keys.size + 42 * exps.size + 1, dtype=np.uint8)
    scratch = np.empty(most + 1, dtype=np.uint8)
    lengths = np.empty(keys.size, dtype=np.int64)
    byte_starts = np.empty(sketches, dtype=np.int64)
    byte_ends = np.empty(sketches, dtype=np.int64)
    at = 0
    for s in range(sketches):
        byte_starts[s] = at
        for i in range(prefix_offsets[s], prefix_offsets[s + 1]):
            at = _wvarint(out, at, prefix[i])
        if regions[s]:
            a, z = offsets[s], offsets[s + 1]
            used = 0
            for c in range(a, z):
                start = used
                used, f = _enc1(exps, hi, lo, bucket_offsets[c], bucket_offsets[c + 1], newest[c], has_newest[c],
                                merged[c], scratch, used + 1)
                scratch[start] = f
                lengths[c] = used - start
            at = _wvarint(out, at, np.uint64(z - a))
            for c in range(a, z):
                at = _wvarint(out, at, np.uint64(keys[c] - (keys[c - 1] if c > a else -1) - 1))
            for c in range(a, z):
                at = _wvarint(out, at, np.uint64(lengths[c]))
            for j in range(used):
                out[at + j] = scratch[j]
            at += used
        byte_ends[s] = at
    return out[:at], byte_starts, byte_ends


def _canonical_payload_at_least(total, l, n):
    """A lower bound on the payload bytes of the l-canonical histogram of
    ``total > 0`` units in ``n`` buckets, from its sizes alone (as
    :func:`ehist.columnar._canonical_bytes_at_least`): the bucket and run
    counts, every size run, the shared-timestamps bitmap or a delta per
    bucket (at least one delta), and the oldest width."""
    j, m, low = _levels(total, l)
    runs = j + (1 if m > 0 else 0)
    per_run = 0
    for level in range(j):
        per_run += 1 + _vsize(l + np.int64((low >> np.uint64(level)) & np.uint64(1)))
    if m > 0:
        per_run += 1 + _vsize(m)
    return _vsize(n) + _vsize(runs) + per_run + min((n + 6) // 7 + 1, n) + 1


def _varint_size(x):
    """Bytes of the LEB128 varint of ``x >= 0``."""
    size = 1
    while x >= 128:
        x >>= 7
        size += 1
    return size


def _canonical_levels(total, l):
    """``(j, m, low)`` of the l-canonical representation of ``total > 0``
    (:func:`ehist.canonical.canonical_counts`): ``l + bit i of low``
    buckets of size ``2**i`` for ``i < j``, then ``m`` of size ``2**j``."""
    q = np.uint64(total) // np.uint64(l) + np.uint64(1)
    j = 0
    while j < 62 and (np.uint64(1) << np.uint64(j + 1)) <= q:
        j += 1
    rest = np.uint64(total) - np.uint64(l) * ((np.uint64(1) << np.uint64(j)) - np.uint64(1))
    m = rest >> np.uint64(j)
    low = rest & ((np.uint64(1) << np.uint64(j)) - np.uint64(1))
    return j, np.int64(m), low


def _bucket_bounds_one(exps, hi, lo, n, cut):
    lower = np.int64(0)
    upper = np.int64(0)
    for b in range(n):
        size = np.int64(1) << np.int64(exps[b])
        if hi[b] > cut:
            upper += size
            if lo[b] > cut:
                lower += size
            else:
                lower += 1
    return lower, upper


def _bounds_all(exps, hi, lo, offsets, cutoffs):
    count = offsets.size - 1
    lower = np.zeros(count, dtype=np.int64)
    upper = np.zeros(count, dtype=np.int64)
    for i in range(count):
        a, z = offsets[i], offsets[i + 1]
        lower[i], upper[i] = _bounds1(exps[a:z], hi[a:z], lo[a:z], z - a, cutoffs[i])
    return lower, upper


def _build_all(ts, starts, v, ones, window, l, exact, exact_ok, cutoff):
    runs = starts.size
    rows = ts.size
    first = np.empty(runs, dtype=np.int64)
    total = np.zeros(runs, dtype=np.int64)
    n_c = np.zeros(runs, dtype=np.int64)
    most_c = 1
    most_rows = 1
    room = 64 * runs + 16
    for r in range(runs):
        a = starts[r]
        z = starts[r + 1] if r + 1 < runs else rows
        f = a
        if z > a:
            newest = ts[z - 1]
            while f < z and np.uint64(newest) - np.uint64(ts[f]) >= np.uint64(window):
                f += 1
        first[r] = f
        t = np.int64(0)
        if ones:
            t = z - f
        else:
            for i in range(f, z):
                t += v[i]
        total[r] = t
        if t > 0:
            j, m, low = _levels(t, l)
            c = m
            for level in range(j):
                c += l + np.int64((low >> np.uint64(level)) & np.uint64(1))
            n_c[r] = c
        most_c = max(most_c, n_c[r])
        most_rows = max(most_rows, z - f)
        room += 42 * (n_c[r] + 63 * (z - f))
    out = np.empty(room, dtype=np.uint8)
    ce = np.empty(most_c, dtype=np.int64)
    ch = np.empty(most_c, dtype=np.int64)
    cl = np.empty(most_c, dtype=np.int64)
    cw = np.empty(most_c, dtype=np.int64)
    ee = np.empty(63 * most_rows, dtype=np.int64)
    eh = np.empty(63 * most_rows, dtype=np.int64)
    byte_starts = np.empty(runs, dtype=np.int64)
    byte_ends = np.empty(runs, dtype=np.int64)
    flags = np.empty(runs, dtype=np.uint8)
    newest_out = np.zeros(runs, dtype=np.int64)
    has_out = np.zeros(runs, dtype=np.bool_)
    lower = np.zeros(runs, dtype=np.int64)
    upper = np.zeros(runs, dtype=np.int64)
    at = 0
    for r in range(runs):
        a = starts[r]
        z = starts[r + 1] if r + 1 < runs else rows
        byte_starts[r] = at
        if z == a:  # never updated: no newest
            out[at] = 0
            at += 1
            byte_ends[r] = at
            flags[r] = 0
            continue
        newest = ts[z - 1]
        newest_out[r] = newest
        has_out[r] = True
        f = first[r]
        t = total[r]
        n = n_c[r]
        ke = 0
        if exact and exact_ok[r] and n:
            # each timestamp's positive sum, newest first, split into its powers of two, largest first
            i = z - 1
            while i >= f:
                stamp = ts[i]
                sub = np.int64(0)
                while i >= f and ts[i] == stamp:
                    sub += 1 if ones else v[i]
                    i -= 1
                if sub > 0:
                    top = 0  # the highest set bit (sub < 2**61: exact_ok)
                    while (sub >> (top + 1)) > 0:
                        top += 1
                    for e in range(top, -1, -1):
                        if (sub >> e) & 1:
                            ee[ke] = e
                            eh[ke] = stamp
                            ke += 1
            if ke >= n:
                ke = 0  # the canonical form has fewer buckets: it is the shorter
        e_len = 0
        if 0 < ke:
            # the exact form, where it is surely shorter than the canonical one (the canonical never built)
            e_end, e_flags = _enc1(ee, eh, eh, 0, ke, newest, True, True, out, at)
            e_len = e_end - at  # its length wherever it is written: compared with the canonical one's below
            if e_len < _least1(t, l, n):
                at = e_end
                byte_ends[r] = at
                flags[r] = e_flags
                lower[r], upper[r] = _bounds1(ee, eh, eh, ke, cutoff[r])
                continue
        if n:
            j, m, low = _levels(t, l)
            k = 0
            for level in range(j):
                for _ in range(l + np.int64((low >> np.uint64(level)) & np.uint64(1))):
                    ce[k] = level
                    k += 1
            for _ in range(m):
                ce[k] = j
                k += 1
            # each bucket's newest unit, counted from the oldest kept unit, found among the rows oldest first
            w = np.int64(0)
            for b in range(n):
                size = np.int64(1) << ce[b]
                w += size
                cw[b] = t - w + size
            i = f
            cum = np.int64(1) if ones else v[f]
            for b in range(n - 1, -1, -1):
                while cum < cw[b]:
                    i += 1
                    cum += 1 if ones else v[i]
                ch[b] = ts[i]
            i = f
            if not ones:
                while v[i] == 0:
                    i += 1
            for b in range(n - 1):
                cl[b] = ch[b + 1]
            cl[n - 1] = ts[i]
            for b in range(n):
                if ce[b] == 0:
                    cl[b] = ch[b]
        c_end, c_flags = _enc1(ce, ch, cl, 0, n, newest, True, False, out, at)
        lo_b, up_b = _bounds1(ce, ch, cl, n, cutoff[r])
        end, fl = c_end, c_flags
        if 0 < ke and e_len < c_end - at:  # the exact form is the shorter after all: written again in place
            end, fl = _enc1(ee, eh, eh, 0, ke, newest, True, True, out, at)
            lo_b, up_b = _bounds1(ee, eh, eh, ke, cutoff[r])
        at = end
        byte_ends[r] = at
        flags[r] = fl
        lower[r] = lo_b
        upper[r] = up_b
    return out[:at], byte_starts, byte_ends, flags, newest_out, has_out, lower, upper


def _seal_all(head, flags_at, flags, newest, has_newest, payload, starts, ends, table):
    count = starts.size
    offsets = np.empty(count + 1, dtype=np.int64)
    offsets[0] = 0
    for i in range(count):
        offsets[i + 1] = offsets[i] + head.size + (8 if has_newest[i] else 0) + (ends[i] - starts[i]) + 4
    out = np.empty(offsets[count], dtype=np.uint8)
    for i in range(count):
        at = offsets[i]
        for j in range(head.size):
            out[at + j] = head[j]
        out[at + flags_at] = np.uint8(flags[i] & 0xFF)
        out[at + flags_at + 1] = np.uint8(flags[i] >> 8)
        at += head.size
        if has_newest[i]:
            v = np.uint64(newest[i])
            for j in range(8):
                out[at + j] = np.uint8((v >> np.uint64(8 * j)) & np.uint64(0xFF))
            at += 8
        n = ends[i] - starts[i]
        if n >= _LONG_SPAN:
            out[at:at + n] = payload[starts[i]:ends[i]]
            at += n
        else:
            for j in range(starts[i], ends[i]):
                out[at] = payload[j]
                at += 1
        c = _crc1(out, offsets[i], at, table)
        for j in range(4):
            out[at + j] = np.uint8((c >> np.uint32(8 * j)) & np.uint32(0xFF))
    return out, offsets


def _keyed_layout(buf, starts, ends, size, least):
    """The first pass of :func:`_read_keyed_all` and
    :func:`_read_keyed_bounds_all`: each region's header read and checked,
    each counter's start, length, key and declared bucket count (its flags
    byte and count checked).  Returns (ok, n, first, c_start, c_len, keys,
    c_decl, buckets, most): per region whether it passed and its counters
    (``first[i]`` on), per counter its fields, the buckets the passing
    regions declare and the most one counter declares."""
    count = starts.size
    ok = np.zeros(count, dtype=np.bool_)
    n = np.zeros(count, dtype=np.int64)
    # pass 1: each region's header and counters (start, length, key), checked; the buckets they declare
    c_cap = 0
    for i in range(count):
        if ends[i] > starts[i]:
            c_cap += (ends[i] - starts[i]) // (2 + least)
    c_start = np.empty(c_cap, dtype=np.int64)
    c_len = np.empty(c_cap, dtype=np.int64)
    keys = np.empty(c_cap, dtype=np.int64)
    c_decl = np.empty(c_cap, dtype=np.int64)
    first = np.zeros(count + 1, dtype=np.int64)
    big = np.uint64(1) << np.uint64(40)
    c = 0
    cap = 0
    most = 0
    for i in range(count):
        first[i] = c
        if ends[i] <= starts[i]:
            continue
        value, pos, good = _varint(buf, starts[i], ends[i])
        if not good:
            continue
        remaining = ends[i] - pos
        if value > np.uint64(min(size[i], remaining // (2 + least))):
            continue
        m = np.int64(value)
        if m == 0:
            if remaining == 0:
                ok[i] = True
            continue
        bound = np.uint64(size[i])
        good_all = True
        key = np.int64(-1)
        for k in range(m):
            value, pos, good = _varint(buf, pos, ends[i])
            if not good or value >= bound:
                good_all = False
                break
            key = key + np.int64(value) + 1
            if key >= size[i]:
                good_all = False
                break
            keys[c + k] = key
        if not good_all:
            continue
        total = np.int64(0)
        for k in range(m):
            value, pos, good = _varint(buf, pos, ends[i])
            if not good or value < np.uint64(least) or value > np.uint64(ends[i]):
                good_all = False
                break
            c_len[c + k] = np.int64(value)
            total += np.int64(value)
        if not good_all or total != ends[i] - pos:
            continue
        region_decl = 0
        for k in range(m):
            a = pos
            z = a + c_len[c + k]
            pos = z
            f = buf[a]
            if (f & ~np.uint8(_FLAG_SHARED | _FLAG_TICK | _FLAG_MERGED)) != 1:  # has newest, known bits
                good_all = False
                break
            d, p2, good = _varint(buf, a + 1, z)
            room = (z - p2) * (_BITS if f & _FLAG_SHARED else 1)
            if not good or d >= big or np.int64(d) > room or d == np.uint64(0):
                good_all = False
                break
            c_start[c + k] = a
            c_decl[c + k] = np.int64(d)
            region_decl += np.int64(d)
            most = max(most, np.int64(d))
        if not good_all:
            continue
        ok[i] = True
        n[i] = m
        c += m
        cap += region_decl
    first[count] = c
    return ok, n, first, c_start, c_len, keys, c_decl, cap, most


def _read_keyed_all(buf, starts, ends, size, least, newest, window, l):
    ok, n, first, c_start, c_len, keys, c_decl, cap, most = _layout(buf, starts, ends, size, least)
    count = starts.size
    c = first[count]
    # pass 2: every counter of the regions still accepted decoded, a region dropped whole at its first refusal
    exps, hi, lo, _, _, _ = _bufs(cap)
    _, _, _, deltas, shared, widths = _bufs(most)
    run_e = np.empty(most, dtype=np.int64)
    run_n = np.empty(most, dtype=np.int64)
    out_keys = np.empty(c, dtype=np.int64)
    counts = np.empty(c, dtype=np.int64)
    merged = np.empty(c, dtype=np.bool_)
    at = 0
    o = 0
    for i in range(count):
        if n[i] == 0:
            continue
        at0, o0 = at, o
        for k in range(first[i], first[i] + n[i]):
            a = c_start[k]
            f = buf[a]
            d = c_decl[k]
            one = False
            if d == 1:  # most counters: one bucket, read without the general decoder's call
                one, exps[at], hi[at], lo[at] = _unit(buf, a + 1, a + c_len[k], f, newest[i], window)
            if d > 1:  # an ordered histogram: by its size runs and timestamps
                one = _odecode(buf, a + 1, a + c_len[k], f, True, newest[i], d, window, l, exps, hi, lo, at, run_e,
                               run_n)
            if not one and not _dec1(buf, a + 1, a + c_len[k], f, True, newest[i], d, window, l, exps, hi, lo, deltas,
                                     shared, widths, at, run_e, run_n):
                ok[i] = False
                break
            out_keys[o] = keys[k]
            counts[o] = d
            merged[o] = (f & _FLAG_MERGED) != 0
            at += d
            o += 1
        if not ok[i]:
            at, o = at0, o0
            n[i] = 0
    return ok, n, out_keys[:o], counts[:o], merged[:o], exps[:at], hi[:at], lo[:at]


def _read_keyed_bounds_all(buf, starts, ends, size, least, newest, window, l, cutoffs):
    ok, n, first, c_start, c_len, keys, c_decl, _, most = _layout(buf, starts, ends, size, least)
    count = starts.size
    exps, hi, lo, deltas, shared, widths = _bufs(most)
    run_e = np.empty(most, dtype=np.int64)
    run_n = np.empty(most, dtype=np.int64)
    c = first[count]
    out_keys = np.empty(c, dtype=np.int64)
    lower = np.empty(c, dtype=np.int64)
    upper = np.empty(c, dtype=np.int64)
    units = np.empty(c, dtype=np.int64)
    o = 0
    for i in range(count):
        if n[i] == 0:
            continue
        o0 = o
        for k in range(first[i], first[i] + n[i]):
            a = c_start[k]
            d = c_decl[k]
            one = False
            fast = False
            if d == 1:  # as in _read_keyed_all, and bounded here: no call passing arrays
                one, e1, h1, l1 = _unit(buf, a + 1, a + c_len[k], buf[a], newest[i], window)
            elif (buf[a] & _FLAG_MERGED) == 0:  # an ordered histogram: from its size runs and timestamps
                fast, lower[o], upper[o], units[o] = _obounds(buf, a + 1, a + c_len[k], buf[a], True, newest[i], d,
                                                              window, l, cutoffs[i], run_e, run_n, hi)
            else:  # a union's: bucket by bucket from its bytes
                fast, lower[o], upper[o], units[o] = _mbounds(buf, a + 1, a + c_len[k], buf[a], True, newest[i], d,
                                                              window, cutoffs[i], run_e, run_n, hi)
            if fast:
                pass
            elif one:
                cut = cutoffs[i]
                units[o] = np.int64(1) << e1
                upper[o] = units[o] if h1 > cut else 0
                lower[o] = 0 if h1 <= cut else (units[o] if l1 > cut else 1)  # _bucket_bounds_one's rule
            elif _dec1(buf, a + 1, a + c_len[k], buf[a], True, newest[i], d, window, l, exps, hi, lo, deltas, shared,
                       widths, 0, run_e, run_n):
                lower[o], upper[o] = _bounds1(exps, hi, lo, d, cutoffs[i])
                total = np.int64(0)  # below 2**62: _decode_one refuses more
                for j in range(d):
                    total += np.int64(1) << np.int64(exps[j])
                units[o] = total
            else:
                ok[i] = False
                break
            out_keys[o] = keys[k]
            o += 1
        if not ok[i]:
            o = o0
            n[i] = 0
    return ok, n, out_keys[:o], lower[:o], upper[:o], units[:o]


def _crc_table() -> np.ndarray:
    """CRC-32 (zlib's polynomial, reflected) by slicing-by-8: row 0 the
    byte-at-a-time table, row ``k`` the remainder of a byte followed by
    ``k`` zero bytes, so eight bytes are folded per step."""
    table = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[0, i] = c
    for k in range(1, 8):
        table[k] = (table[k - 1] >> 8) ^ table[0, table[k - 1] & 0xFF]
    return table


_CRC_TABLE = _crc_table()


def _crc_span(buf, a, end, table):
    """The CRC-32 of ``buf[a:end]``, eight bytes per step."""
    c = np.uint32(0xFFFFFFFF)
    i = a
    m = np.uint32(0xFF)
    while i + 8 <= end:
        one = c ^ (np.uint32(buf[i]) | (np.uint32(buf[i + 1]) << np.uint32(8))
                   | (np.uint32(buf[i + 2]) << np.uint32(16)) | (np.uint32(buf[i + 3]) << np.uint32(24)))
        c = (table[7, one & m] ^ table[6, (one >> np.uint32(8)) & m] ^ table[5, (one >> np.uint32(16)) & m]
             ^ table[4, one >> np.uint32(24)] ^ table[3, buf[i + 4]] ^ table[2, buf[i + 5]]
             ^ table[1, buf[i + 6]] ^ table[0, buf[i + 7]])
        i += 8
    while i < end:
        c = table[0, (c ^ buf[i]) & m] ^ (c >> np.uint32(8))
        i += 1
    return c ^ np.uint32(0xFFFFFFFF)


#: zlib's ``crc32`` as an external function compiled loops call
#: (:func:`_zlib_crc32`), once found; None before, False where it is not.
_ZLIB_CRC32 = None


def _zlib_crc32():
    """zlib's C ``crc32(crc, bytes, length)``, the function Python's
    :func:`zlib.crc32` wraps, for compiled loops to call by its symbol
    (its library loaded into the process, so numba's cached code finds it
    again): ~4 GB/s here against ~0.8 GB/s for :func:`_crc_span`'s table
    loop, with no Python call per blob.  None where the library is not
    found (or its ``uLong`` is not 64 bits, as on Windows): the table loop
    runs, with the same checksums."""
    global _ZLIB_CRC32
    if _ZLIB_CRC32 is None:
        _ZLIB_CRC32 = False
        try:
            import ctypes
            import ctypes.util

            import llvmlite.binding as llvm

            path = ctypes.util.find_library("z")
            if path is not None and ctypes.sizeof(ctypes.c_ulong) == 8:
                llvm.load_library_permanently(path)
                t = numba.types
                _ZLIB_CRC32 = t.ExternalFunction("crc32", t.uint64(t.uint64, t.voidptr, t.uint32))
        except (ImportError, OSError, RuntimeError):  # pragma: no cover - depends on the platform
            _ZLIB_CRC32 = False
    return _ZLIB_CRC32 or None


def _crc_span_zlib(buf, a, end, table):
    """:func:`_crc_span` by zlib's ``crc32`` (:data:`_ZLIB_CRC32`), a GiB
    at a time (its length is 32 bits); ``table`` unused."""
    c = np.uint64(0)
    i = a
    while i < end:
        n = min(end - i, 1 << 30)
        c = _ZLIB_CRC32(c, buf[i:].ctypes.data, np.uint32(n))
        i += n
    return np.uint32(c)


def _crc_all(buf, starts, lengths, table):
    out = np.zeros(starts.size, dtype=np.bool_)
    for b in range(starts.size):
        a, n = starts[b], lengths[b]
        c = _crc1(buf, a, a + n - 4, table)
        stored = (np.uint32(buf[a + n - 4]) | (np.uint32(buf[a + n - 3]) << np.uint32(8))
                  | (np.uint32(buf[a + n - 2]) << np.uint32(16)) | (np.uint32(buf[a + n - 1]) << np.uint32(24)))
        out[b] = c == stored
    return out


_COMPILED: dict = {}
_one = None  # the compiled _compress_one, which the compiled _compress_all calls
_desc = None  # the compiled _desc_order, which _compress_all and _merge_runs call
_runs_order = None  # the compiled _merge_runs, which _union_all calls
_unite1 = None  # the compiled _unite_ids, which _union_all and _keyed_union_all call
_ubruns = None  # the compiled _unite_by_runs and _push_run, which _union_payloads_all calls
_prun = None
_runs1 = None  # the compiled run_compress.compress_runs, which _unite_ids calls
_key_runs = None  # the compiled _merge_key_runs, which _keyed_union_all calls
_merge2 = None  # the compiled _merge_two, which _desc_order and _merge_runs call
_rest = None  # the compiled _copy_rest, which _merge_two and _merge_key_runs call
_bisect_left = None  # the compiled _first_at_least, which _compress_one calls
_INT64_MAX = np.int64(2**63 - 1)
_WS_ROWS = max(16, run_compress.RUN_ROWS)  # the scratch rows _compress_one and compress_runs use
_SC_ROWS = 9  # the scratch rows _unite_ids uses
_FEW = 16  # unions of at most this many buckets are ordered by insertion (no allocation)
_RUN_LENGTH = 2  # unions whose runs of equal buckets are at least this long on average are compressed by runs
_varint = None  # the compiled read_varint and gcd, which _decode_all calls
_wvarint = None  # the compiled write_varint, which _encode_all calls
_enc1 = None  # the compiled _encode_one
_unit = None  # the compiled _one_bucket, which the keyed readers call
_tick = None  # the compiled read_tick, which _decode_one and _one_bucket call
_NO_BUCKET = (False, np.int64(0), np.int64(0), np.int64(0))  # _one_bucket's refusal
_NO_BOUNDS = _NO_BUCKET  # _ordered_bounds' refusal
_NO_READ = (False, 0, 0, np.int64(0), 0)  # _ordered_read's
_NO_HEAD = (False, 0, np.int64(0), np.uint64(0), np.uint64(1), -1, np.int64(0))  # _histogram_head's
_hhead = None  # the compiled _histogram_head and _read_delta, which _ordered_read and _merged_bounds call
_delta = None
_limits = None
_oread = None  # the compiled _ordered_read and _ordered_decode
_odecode = None
_POP7 = np.array([bin(x).count("1") for x in range(1 << 7)], dtype=np.int64)  # set bits of a bitmap word
_LOW7 = np.array([(x & -x).bit_length() - 1 for x in range(1 << 7)], dtype=np.int64)  # its lowest set bit
_obounds = None  # the compiled _ordered_bounds and _merged_bounds, which the bounded readers call
_mbounds = None
_levels = None  # the compiled _canonical_levels and _bucket_bounds_one, which _build_all calls
_bounds1 = None
_gcd = None
_dec1 = None  # the compiled _decode_one and _declared, which _decode_all and _decode_bounds_all call
_canon = None  # the compiled _canonical_runs, which _decode_one and _ordered_read call
_decl = None
_bufs = None  # the compiled _bucket_arrays
_vsize = None  # the compiled _varint_size and _canonical_payload_at_least, which _build_all calls
_least1 = None
_crc1 = None  # the compiled _crc_span_zlib (or _crc_span), which _crc_all and _seal_all call
_layout = None  # the compiled _keyed_layout, which _read_keyed_all and _read_keyed_bounds_all call


def _kernel(name: str = "compress"):
    global _one, _desc, _runs_order, _merge2, _bisect_left, _varint, _gcd, _wvarint, _enc1, _levels, _bounds1, _unite1
    global _runs1, _key_runs, _ubruns, _prun, _rest
    global _dec1, _decl, _unit, _tick, _obounds, _mbounds, _oread, _odecode, _canon, _hhead, _delta, _limits
    global _vsize, _least1, _bufs, _crc1, _layout
    if name not in _COMPILED:
        if name in ("crc", "seal") and _crc1 is None:
            _crc1 = jit(_crc_span_zlib if _zlib_crc32() is not None else _crc_span)
        if name == "compress":
            _rest = jit(_copy_rest)
            _merge2 = jit(_merge_two)
            _desc, _bisect_left = jit(_desc_order), jit(_first_at_least)
            _runs_order = jit(_merge_runs)
            _key_runs = jit(_merge_key_runs)
            _one = jit(_compress_one)
            _runs1 = run_compress.compiled(jit)
            _unite1 = jit(_unite_ids)
            _COMPILED[name] = kernel(_compress_all)
        elif name == "union":
            _COMPILED[name] = kernel(_union_all)
        elif name == "keyed_union":
            _COMPILED[name] = kernel(_keyed_union_all)
        elif name == "union_payloads":  # after "decode", "compress" and "encode"
            _prun = jit(_push_run)
            _ubruns = jit(_unite_by_runs)
            _COMPILED[name] = kernel(_union_payloads_all)
        elif name == "crc":
            _COMPILED[name] = kernel(_crc_all)
        elif name == "gather":
            _COMPILED[name] = kernel(_gather)
        elif name == "search":
            if _bisect_left is None:
                _bisect_left = jit(_first_at_least)
            _COMPILED[name] = kernel(_search_segments)
        elif name in ("read_keyed", "read_keyed_bounds"):  # after "decode" (and "build": the bounds)
            if _layout is None:
                _layout = jit(_keyed_layout)
            _COMPILED[name] = kernel(_read_keyed_all if name == "read_keyed" else _read_keyed_bounds_all)
        elif name == "build":
            _levels, _bounds1 = jit(_canonical_levels), jit(_bucket_bounds_one)
            _vsize = jit(_varint_size)
            _least1 = jit(_canonical_payload_at_least)
            _COMPILED[name] = kernel(_build_all)
        elif name == "bounds":
            _COMPILED[name] = kernel(_bounds_all)
        elif name == "decode_bounds":
            _COMPILED[name] = kernel(_decode_bounds_all)
        elif name == "encode":
            _wvarint = jit(write_varint)
            _enc1 = jit(_encode_one)
            _COMPILED[name] = kernel(_encode_all)
        elif name == "seal":
            _COMPILED[name] = kernel(_seal_all)
        elif name == "keyed_payloads":  # after "encode"
            _COMPILED[name] = kernel(_keyed_payloads_all)
        elif name == "varints":
            _COMPILED[name] = kernel(_encode_varints)
        else:
            _varint, _gcd = jit(read_varint), jit(gcd)
            if _levels is None:
                _levels = jit(_canonical_levels)
            _canon = jit(_canonical_runs)
            _tick = jit(read_tick)
            _unit = jit(_one_bucket)
            _hhead, _delta, _limits = jit(_histogram_head), jit(_read_delta), jit(_time_limits)
            _oread = jit(_ordered_read)
            _obounds, _odecode = jit(_ordered_bounds), jit(_ordered_decode)
            _mbounds = jit(_merged_bounds)
            _dec1, _decl, _bufs = jit(_decode_one), jit(_declared), jit(_bucket_arrays)
            _COMPILED[name] = kernel(_decode_all)
    return _COMPILED[name]


def _compress_one(exps, hi, lo, cutoff, k, factor, out_e, out_hi, out_lo, at, ws):
    """One group's compression (the steps of ehist.compress.compress, on
    arrays: a linked list for the deletions); writes the survivors at
    ``at`` of the outputs and returns how many.  ``ws``: int64 scratch
    of :data:`_WS_ROWS` rows and at least ``2 * n + 2`` columns (the
    caller's, reused by every group: no allocation per group)."""
    n = exps.size
    if n < 2:
        for i in range(n):
            out_e[at + i], out_hi[at + i], out_lo[at + i] = exps[i], hi[i], lo[i]
        return n
    top = hi[0]
    # the cuts: distinct lo, hi and the cutoff in [cutoff, top), ascending.  hi is non-increasing: its
    # distinct values read backwards; a lo below its bucket's hi (few: most buckets hold one timestamp)
    # sorted apart; the three merged
    wide = ws[0]
    w = 0
    for i in range(n):
        if lo[i] != hi[i] and lo[i] >= cutoff:
            wide[w] = lo[i]
            w += 1
    wide[:w].sort()
    cuts = ws[1]
    m = 0
    q = n - 1
    p = 0
    took_cutoff = False
    while q >= 0 or p < w or not took_cutoff:
        c_hi = hi[q] if q >= 0 else _INT64_MAX
        c_w = wide[p] if p < w else _INT64_MAX
        c = min(c_hi, c_w)
        if not took_cutoff and cutoff <= c:
            c = cutoff
            took_cutoff = True
        elif q >= 0 and (p >= w or c_hi <= c_w):
            q -= 1
        else:
            p += 1
        if c >= cutoff and c < top and (m == 0 or cuts[m - 1] != c):
            cuts[m] = c
            m += 1
    cuts = cuts[:m]
    # L and D at every cut from each bucket's cut range: cuts below lo add its size to L, cuts in [lo, hi)
    # add 1 to L and size - 1 to D (difference arrays, then prefix sums)
    size = ws[2]
    below_lo = ws[3]  # each bucket's cuts below its lo (kept as buckets merge)
    below_hi = ws[4]  # and below its hi: a pair's cut range without a search
    dl = ws[5]
    dw = ws[6]
    dl[:m + 1] = 0
    dw[:m + 1] = 0
    z = 0  # cuts below hi[i]: hi non-increasing, walked from the oldest
    for i in range(n - 1, -1, -1):
        s = np.int64(1) << exps[i]
        size[i] = s
        while z < m and cuts[z] < hi[i]:
            z += 1
        a = z if lo[i] == hi[i] else _bisect_left(cuts, lo[i])
        below_lo[i] = a
        below_hi[i] = z
        dl[0] += s
        dl[a] += 1 - s
        dl[z] -= 1
        dw[a] += s - 1
        dw[z] -= s - 1
    lower = ws[7]
    width = ws[8]
    run_l = np.int64(0)
    run_w = np.int64(0)
    for t in range(m):
        run_l += dl[t]
        run_w += dw[t]
        lower[t] = run_l
        width[t] = run_w
    # the greedy passes, oldest pair first, until nothing merges
    e = ws[9]
    blo = ws[10]
    e[:n] = exps
    blo[:n] = lo
    nxt = ws[11]
    prv = ws[12]
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    nxt[n - 1] = -1
    changed_in = ws[13]
    changed_in[:n] = 0
    new_l = ws[14]
    new_w = ws[15]
    oldest = n - 1
    changed = True
    sweep = 0
    while changed:
        changed = False
        sweep += 1
        x = prv[oldest]
        while x >= 0:
            y = nxt[x]
            if e[x] == e[y] and (changed_in[x] >= sweep - 1 or changed_in[y] >= sweep - 1):
                s = np.int64(1) << e[x]
                lo_x, hi_x, lo_y, hi_y = blo[x], hi[x], blo[y], hi[y]
                lo_z = lo_x if lo_x < lo_y else lo_y
                # the cuts in [lo_z, hi_x), which the merged bucket straddles (none for one timestamp: accepted)
                a = below_lo[x] if below_lo[x] < below_lo[y] else below_lo[y]
                b = below_hi[x]
                accept = True
                for t in range(a, b):  # lo_z <= c < hi_x: the merged bucket straddles
                    c = cuts[t]
                    dl = 1
                    dw = 2 * s - 1
                    if c < lo_x:
                        dl -= s
                    elif c < hi_x:
                        dl -= 1
                        dw -= s - 1
                    if c < lo_y:
                        dl -= s
                    elif c < hi_y:
                        dl -= 1
                        dw -= s - 1
                    new_l[t] = lower[t] + dl
                    new_w[t] = width[t] + dw
                    if k * float(new_w[t]) > factor * float(new_l[t]):
                        accept = False
                        break
                if accept:
                    for t in range(a, b):
                        lower[t] = new_l[t]
                        width[t] = new_w[t]
                    e[x] += 1
                    blo[x] = lo_z
                    below_lo[x] = a
                    changed_in[x] = sweep
                    after = nxt[y]
                    nxt[x] = after
                    if after >= 0:
                        prv[after] = x
                    else:
                        oldest = x
                    changed = True
            x = prv[x]
    count = 0
    i = 0
    while i >= 0:
        out_e[at + count], out_hi[at + count], out_lo[at + count] = e[i], hi[i], blo[i]
        count += 1
        i = nxt[i]
    return count


def _first_at_least(a, v):
    """The first position of sorted ``a`` holding ``v`` or more
    (``np.searchsorted(a, v)``), as a plain loop for the compiled code."""
    lo, hi = 0, a.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: :func:`_first_at_least` for compiled code of other packages to jit.
first_at_least = _first_at_least


def run_merge_order():
    """The compiled :func:`_desc_order` (positions by ``hi`` descending,
    then ``lo``, then position; the natural runs of the input merged), for
    other packages' compiled loops to call: a key that arrives as a few
    sorted runs is ordered in a few merge passes, not sorted.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> key = np.array([-1, -4, -9, -2, -3])        # two runs of a negated ascending key
    >>> run_merge_order()(key, key).tolist()          # key descending: 1, 2, 3, 4, 9
    [0, 3, 4, 1, 2]
    """
    _kernel("compress")
    return _desc


def _compress_all(exps, hi, lo, starts, cutoff, k, factor, order):
    groups = starts.size - 1
    out_e = np.empty(exps.size, dtype=np.int64)
    out_hi = np.empty(exps.size, dtype=np.int64)
    out_lo = np.empty(exps.size, dtype=np.int64)
    counts = np.empty(groups, dtype=np.int64)
    at = np.int64(0)  # not the literal 0: one type at every call of _one (one compilation of it)
    ws = np.empty((_WS_ROWS, 64), dtype=np.int64)
    for g in range(groups):
        a, b = starts[g], starts[g + 1]
        if 2 * (b - a) + 2 > ws.shape[1]:
            ws = np.empty((_WS_ROWS, 4 * (b - a) + 4), dtype=np.int64)
        if order:  # merge_all's order: newest first; ties: larger lo, then the later bucket
            idx = _desc(hi[a:b], lo[a:b])
            kept = _one(exps[a:b][idx], hi[a:b][idx], lo[a:b][idx], cutoff[g], k, factor, out_e, out_hi, out_lo, at,
                        ws)
        else:
            # copies: the arrays _one takes in both branches are of one type (one compilation of it)
            kept = _one(exps[a:b].copy(), hi[a:b].copy(), lo[a:b].copy(), cutoff[g], k, factor, out_e, out_hi,
                        out_lo, at, ws)
        counts[g] = kept
        at += kept
    return out_e[:at], out_hi[:at], out_lo[:at], counts


def _unite_ids(ids, count, offsets, exps, hi, lo, merged, all_alive, cutoff, k, factor, heavy, out_e, out_hi, out_lo,
               at, sc, ws):
    """One union of :func:`_union_all` and :func:`_keyed_union_all`: the
    histograms ``ids[:count]`` (in merge order) cut to their live prefixes
    (``hi`` above ``cutoff``, all of them with ``all_alive``); one part's
    copied as it is, several ordered as ``merge_all`` orders them and
    compressed (by runs of equal buckets, :mod:`ehist.run_compress`, where
    they average :data:`_RUN_LENGTH` or more: a sum's), written at ``at`` of
    the outputs.  ``sc`` (:data:`_SC_ROWS` rows) and
    ``ws`` are the caller's scratch, at least the histograms' buckets (and
    ``count + 1``) and twice that plus 2 columns wide.  Returns ``(status,
    buckets written, merged flag)``: status -1 when the live total reaches
    ``heavy`` (nothing written), 0 when nothing is live, 1 otherwise."""
    te, th, tl, part_at, live = sc[0], sc[1], sc[2], sc[3], sc[4]
    parts = 0
    part = -1
    total = 0
    rough = 0.0
    for t in range(count):
        h = ids[t]
        m = 0
        for b in range(offsets[h], offsets[h + 1]):  # hi is non-increasing: a live prefix
            if not all_alive and hi[b] <= cutoff:
                break
            m += 1
            rough += np.float64(np.int64(1) << exps[b])
        live[t] = m
        if m:
            parts += 1
            part = h
            total += m
    if rough >= heavy:
        return -1, 0, False
    if parts == 0:
        return 0, 0, False
    if parts == 1:
        b0 = offsets[part]
        for b in range(b0, b0 + total):
            out_e[at], out_hi[at], out_lo[at] = exps[b], hi[b], lo[b]
            at += 1
        return 1, total, merged[part]
    j = 0
    p = 0
    for t in range(count):
        if live[t] == 0:
            continue
        part_at[p] = j  # where each live prefix starts
        p += 1
        b0 = offsets[ids[t]]
        for b in range(b0, b0 + live[t]):
            te[j], th[j], tl[j] = exps[b], hi[b], lo[b]
            j += 1
    part_at[p] = j
    if j <= _FEW:  # a few buckets (a bin's or a key's handful): sorted in place, nothing allocated
        idx = sc[5]
        for q in range(j):
            t = q
            while t > 0 and (th[q] > th[idx[t - 1]] or (th[q] == th[idx[t - 1]] and tl[q] >= tl[idx[t - 1]])):
                idx[t] = idx[t - 1]  # q is the later position: first on a tie of (hi, lo)
                t -= 1
            idx[t] = q
    else:
        idx = _runs_order(th[:j], tl[:j], part_at[:p + 1])
    oe, oh, ol = sc[6], sc[7], sc[8]
    runs = 0  # runs of equal buckets (a sum's: each row's value is l buckets of each size at one time)
    for q in range(j):
        y = idx[q]
        oe[q], oh[q], ol[q] = te[y], th[y], tl[y]
        if q == 0 or oe[q] != oe[q - 1] or oh[q] != oh[q - 1] or ol[q] != ol[q - 1]:
            runs += 1
    if _RUN_LENGTH * runs > j:
        return 1, _one(oe[:j], oh[:j], ol[:j], cutoff, k, factor, out_e, out_hi, out_lo, at, ws), True
    rc = sc[3]  # the runs, in place: the same decisions, a pass costing runs, not buckets
    r = -1
    for q in range(j):
        if q == 0 or oe[q] != oe[r] or oh[q] != oh[r] or ol[q] != ol[r]:
            r += 1
            oe[r], oh[r], ol[r] = oe[q], oh[q], ol[q]
            rc[r] = 0
        rc[r] += 1
    return 1, _runs1(oe, oh, ol, rc, runs, cutoff, k, factor, out_e, out_hi, out_lo, at, ws), True


def _union_all(exps, hi, lo, offsets, newest, has_newest, merged, gstarts, window, k, factor, heavy):
    groups = gstarts.size - 1
    n = exps.size
    out_e = np.empty(n, dtype=np.int64)
    out_hi = np.empty(n, dtype=np.int64)
    out_lo = np.empty(n, dtype=np.int64)
    counts = np.zeros(groups, dtype=np.int64)
    out_newest = np.empty(groups, dtype=np.int64)
    out_has = np.ones(groups, dtype=np.bool_)
    out_merged = np.zeros(groups, dtype=np.bool_)
    int64_min = np.int64(-(2**63))
    at = np.int64(0)
    ids = np.empty(16, dtype=np.int64)
    sc = np.empty((_SC_ROWS, 64), dtype=np.int64)
    ws = np.empty((_WS_ROWS, 130), dtype=np.int64)
    for g in range(groups):
        a, z = gstarts[g], gstarts[g + 1]
        others = False
        for h in range(a + 1, z):
            if has_newest[h]:
                others = True
        if not others:  # merge_all leaves the first as it is
            b0, b1 = offsets[a], offsets[a + 1]
            for b in range(b0, b1):
                out_e[at], out_hi[at], out_lo[at] = exps[b], hi[b], lo[b]
                at += 1
            counts[g] = b1 - b0
            out_newest[g], out_has[g], out_merged[g] = newest[a], has_newest[a], merged[a]
            continue
        nw = int64_min
        for h in range(a, z):
            if has_newest[h] and newest[h] > nw:
                nw = newest[h]
        out_newest[g] = nw
        all_alive = nw < int64_min + window
        cutoff = int64_min if all_alive else nw - window
        if z - a > ids.size:
            ids = np.empty(2 * (z - a), dtype=np.int64)
        for h in range(a, z):
            ids[h - a] = h
        width = max(offsets[z] - offsets[a], z - a + 1)
        if width > sc.shape[1]:
            sc = np.empty((_SC_ROWS, 2 * width), dtype=np.int64)
            ws = np.empty((_WS_ROWS, 4 * width + 2), dtype=np.int64)
        status, kept, m = _unite1(ids, z - a, offsets, exps, hi, lo, merged, all_alive, cutoff, k, factor, heavy,
                                     out_e, out_hi, out_lo, at, sc, ws)
        if status < 0:
            return False, out_e, out_hi, out_lo, counts, out_newest, out_has, out_merged
        counts[g] = kept
        at += kept
        out_merged[g] = m
    return True, out_e[:at], out_hi[:at], out_lo[:at], counts, out_newest, out_has, out_merged


def _push_run(r_e, r_h, r_l, r_c, nr, first, e, hi, lo, cnt):
    """Append ``cnt`` buckets ``(e, hi, lo)`` to a run list ``nr`` long,
    joining its last run (at ``first`` or after) when equal; the new length."""
    if nr > first and r_e[nr - 1] == e and r_h[nr - 1] == hi and r_l[nr - 1] == lo:
        r_c[nr - 1] += cnt
        return nr
    r_e[nr], r_h[nr], r_l[nr], r_c[nr] = e, hi, lo, cnt
    return nr + 1


def _unite_by_runs(buf, starts, ends, flags, version_2, newest, declared, a, z, window, l, all_alive, cutoff, k,
                   factor, heavy, out_e, out_hi, out_lo, stamps, run_e, run_n, rr, part_at, cur, sc, ws):
    """:func:`_unite_ids` of the ordered histograms ``a:z`` read as runs of
    equal buckets, never a bucket at a time before the compression.

    Each histogram is read by :func:`_ordered_read` (its size runs and a
    timestamp per group of buckets sharing one) into runs of equal
    ``(size, hi, lo)`` (a timestamp's buckets lie at that time, but for
    the last, which reaches to the next timestamp), cut to its live prefix;
    the runs of all are put in ``merge_all``'s order by stretches of equal
    ``(hi, lo)`` (larger first, the later histogram first on a tie, each
    stretch's buckets reversed: the order :func:`_merge_runs` gives the
    buckets), joining equal neighbours, and compressed as
    :func:`_unite_ids` compresses them.  ``(status, buckets written,
    merged)`` as there, with status -2 where the bucket path must decide:
    a merged histogram, one this read refuses, or a total within a factor
    2 of ``heavy`` (the bucket path's exact screen then decides)."""
    r_e, r_h, r_l, r_c = rr[0], rr[1], rr[2], rr[3]  # each histogram's live runs, one after the other
    m_e, m_h, m_l, m_c = rr[4], rr[5], rr[6], rr[7]  # all of them in merge order
    count = z - a
    nr = 0
    parts = 0
    part = -1
    rough = 0.0
    for b in range(a, z):
        part_at[b - a] = nr
        if (flags[b] & _FLAG_MERGED) != 0:
            return -2, 0, False
        n = declared[b]
        ok, _, runs, oldest_lo, mark = _oread(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window,
                                              l, INT64_MIN, run_e, run_n, stamps, 0)
        if not ok:
            return -2, 0, False
        first = nr
        j = 0  # the size run, and what is left of it
        left = run_n[0]
        i = 0
        while i < n:  # a group of buckets sharing a timestamp: [i, q)
            t = stamps[i]
            if not all_alive and t <= cutoff:
                break
            q = i + 1
            if mark >= 0:  # the next bucket the bitmap leaves clear
                while q < n:
                    w = q // _BITS
                    free = (~np.int64(buf[mark + w]) & ((np.int64(1) << min(n - _BITS * w, _BITS)) - 1)) >> (q % _BITS)
                    if free != 0:
                        q += _LOW7[free]
                        break
                    q = _BITS * (w + 1)
                q = min(q, n)
            body = q - 1 - i  # every bucket but the last lies at t
            while body > 0:
                take = min(body, left)
                nr = _prun(r_e, r_h, r_l, r_c, nr, first, run_e[j], t, t, take)
                rough += take * np.float64(np.int64(1) << run_e[j])
                body -= take
                left -= take
                if left == 0:
                    j += 1
                    left = run_n[j] if j < runs else 0
            e = run_e[j]
            nr = _prun(r_e, r_h, r_l, r_c, nr, first, e, t, (stamps[q] if q < n else oldest_lo) if e != 0 else t, 1)
            rough += np.float64(np.int64(1) << e)
            left -= 1
            if left == 0:
                j += 1
                left = run_n[j] if j < runs else 0
            i = q
        if nr > first:
            parts += 1
            part = b - a
    part_at[count] = nr
    if rough >= 0.5 * heavy:
        return -2, 0, False
    if parts == 0:
        return 0, 0, False
    if parts == 1:  # one live prefix: as it is
        o = 0
        for c in range(part_at[part], part_at[part + 1]):
            for _ in range(r_c[c]):
                out_e[o], out_hi[o], out_lo[o] = r_e[c], r_h[c], r_l[c]
                o += 1
        return 1, o, False
    for t in range(count):
        cur[t] = part_at[t]
    nm = 0
    j = 0
    bh = np.int64(0)
    bl = np.int64(0)
    while True:  # the stretch of largest (hi, lo), the later histogram first on a tie
        best = -1
        for t in range(count - 1, -1, -1):
            c = cur[t]
            if c < part_at[t + 1] and (best < 0 or r_h[c] > bh or (r_h[c] == bh and r_l[c] > bl)):
                best, bh, bl = t, r_h[c], r_l[c]
        if best < 0:
            break
        c0 = cur[best]
        c1 = c0 + 1
        while c1 < part_at[best + 1] and r_h[c1] == bh and r_l[c1] == bl:
            c1 += 1
        for c in range(c1 - 1, c0 - 1, -1):  # its buckets reversed
            nm = _prun(m_e, m_h, m_l, m_c, nm, 0, r_e[c], bh, bl, r_c[c])
            j += r_c[c]
        cur[best] = c1
    if _RUN_LENGTH * nm > j:  # short runs: the bucket compression, as _unite_ids chooses
        oe, oh, ol = sc[6], sc[7], sc[8]
        o = 0
        for c in range(nm):
            for _ in range(m_c[c]):
                oe[o], oh[o], ol[o] = m_e[c], m_h[c], m_l[c]
                o += 1
        return 1, _one(oe[:j], oh[:j], ol[:j], cutoff, k, factor, out_e, out_hi, out_lo, 0, ws), True
    return 1, _runs1(m_e, m_h, m_l, m_c, nm, cutoff, k, factor, out_e, out_hi, out_lo, 0, ws), True


def _union_payloads_all(buf, starts, ends, flags, version_2, newest, gstarts, window, l, k, factor, heavy):
    """:func:`union_payloads`: per group, its ordered histograms read as
    runs and united (:func:`_unite_by_runs`), or, where that declines, its
    blobs decoded at once into scratch (the ordered ones by
    :func:`_ordered_decode`) and united by :func:`_unite_ids`; each union
    written by :func:`_encode_one`."""
    groups = gstarts.size - 1
    declared = _decl(buf, starts, ends, flags)
    widest = 1  # the most buckets, and blobs, of a group
    most = 1
    for g in range(groups):
        m = 0
        for b in range(gstarts[g], gstarts[g + 1]):
            m += declared[b]
        widest = max(widest, m, gstarts[g + 1] - gstarts[g] + 1)
    for b in range(starts.size):
        most = max(most, declared[b])
    exps, hi, lo, _, _, _ = _bufs(widest)
    _, _, _, deltas, shared, widths = _bufs(most)
    run_e = np.empty(most, dtype=np.int64)
    run_n = np.empty(most, dtype=np.int64)
    stamps = np.empty(most, dtype=np.int64)
    rr = np.empty((8, widest), dtype=np.int64)
    offsets = np.empty(widest + 1, dtype=np.int64)
    cur = np.empty(widest + 1, dtype=np.int64)
    merged = np.empty(widest, dtype=np.bool_)
    ids = np.arange(widest)
    out_e = np.empty(widest, dtype=np.int64)
    out_hi = np.empty(widest, dtype=np.int64)
    out_lo = np.empty(widest, dtype=np.int64)
    sc = np.empty((_SC_ROWS, 2 * widest), dtype=np.int64)
    ws = np.empty((_WS_ROWS, 4 * widest + 2), dtype=np.int64)
    payload = np.empty(64 * groups + 16, dtype=np.uint8)
    byte_starts = np.zeros(groups, dtype=np.int64)
    byte_ends = np.zeros(groups, dtype=np.int64)
    out_flags = np.zeros(groups, dtype=np.uint8)
    out_newest = np.zeros(groups, dtype=np.int64)
    int64_min = np.int64(-(2**63))
    pos = 0
    for g in range(groups):
        a, z = gstarts[g], gstarts[g + 1]
        nw = int64_min
        for b in range(a, z):  # every histogram has a newest (the caller's heads say so)
            nw = max(nw, newest[b])
        all_alive = nw < int64_min + window
        cutoff = int64_min if all_alive else nw - window
        if z - a == 1 and version_2[a]:  # merge_all leaves it as it is: a current blob's bytes are what its
            n = declared[a]  # buckets encode to, once the decoder's checks take it (no bucket written)
            if not (_oread(buf, starts[a], ends[a], flags[a], True, newest[a], n, window, l, INT64_MIN, run_e, run_n,
                           stamps, 0)[0]
                    or _mbounds(buf, starts[a], ends[a], flags[a], True, newest[a], n, window, INT64_MIN, run_e, run_n,
                                stamps)[0]
                    or _dec1(buf, starts[a], ends[a], flags[a], True, newest[a], n, window, l, exps, hi, lo, deltas,
                             shared, widths, 0, run_e, run_n)):
                return False, payload, byte_starts, byte_ends, out_flags, out_newest
            need = pos + ends[a] - starts[a]
            if need > payload.size:
                grown = np.empty(max(2 * payload.size, need), dtype=np.uint8)
                grown[:pos] = payload[:pos]
                payload = grown
            byte_starts[g] = pos
            for i in range(starts[a], ends[a]):
                payload[pos] = buf[i]
                pos += 1
            byte_ends[g] = pos
            out_flags[g] = flags[a]
            out_newest[g] = nw
            continue
        status = -2
        if z - a > 1:
            status, kept, m = _ubruns(buf, starts, ends, flags, version_2, newest, declared, a, z, window, l,
                                      all_alive, cutoff, k, factor, heavy, out_e, out_hi, out_lo, stamps, run_e,
                                      run_n, rr, offsets, cur, sc, ws)
        if status == -2:  # every bucket decoded
            at = 0
            for b in range(a, z):
                n = declared[b]
                offsets[b - a] = at
                if not (_odecode(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window, l, exps, hi,
                                 lo, at, run_e, run_n)
                        or _dec1(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window, l, exps, hi,
                                 lo, deltas, shared, widths, at, run_e, run_n)):
                    return False, payload, byte_starts, byte_ends, out_flags, out_newest
                merged[b - a] = (flags[b] & _FLAG_MERGED) != 0
                at += n
            offsets[z - a] = at
            if z - a == 1:  # merge_all leaves the first as it is (an older version's: written anew)
                kept, m = at, merged[0]
                for i in range(at):
                    out_e[i], out_hi[i], out_lo[i] = exps[i], hi[i], lo[i]
            else:
                status, kept, m = _unite1(ids, z - a, offsets, exps, hi, lo, merged, all_alive, cutoff, k, factor,
                                          heavy, out_e, out_hi, out_lo, 0, sc, ws)
        if status == -1:
            return False, payload, byte_starts, byte_ends, out_flags, out_newest
        need = pos + 33 + 42 * kept
        if need > payload.size:
            grown = np.empty(max(2 * payload.size, need), dtype=np.uint8)
            grown[:pos] = payload[:pos]
            payload = grown
        byte_starts[g] = pos
        pos, f = _enc1(out_e, out_hi, out_lo, 0, kept, nw, True, m, payload, pos)
        byte_ends[g] = pos
        out_flags[g] = f
        out_newest[g] = nw
    return True, payload[:pos], byte_starts, byte_ends, out_flags, out_newest


def _merge_key_runs(keys, c0, bounds, runs, order, tmp):
    """Positions ``0..n`` of ``keys[c0:c0 + n]`` (``n = bounds[runs]``) by
    key ascending, ties in position order (a stable sort), for keys that
    arrive as ``runs`` ascending runs (a group's sketches, each listing its
    counters by key: ``bounds[r]`` to ``bounds[r + 1]``): bottom-up merges
    of the runs into ``order`` and ``tmp`` (scratch of ``n`` or more), no
    sort and nothing allocated.  Returns the array holding the order, or
    None where a run is not ascending (the caller sorts).  ``bounds`` is
    overwritten."""
    n = bounds[runs]
    for r in range(runs):
        for i in range(bounds[r] + 1, bounds[r + 1]):
            if keys[c0 + i] < keys[c0 + i - 1]:
                return None
    for i in range(n):
        order[i] = i
    src, dst = order, tmp
    while runs > 1:
        out = 0
        for r in range(0, runs, 2):
            a, m, z = bounds[r], bounds[min(r + 1, runs)], bounds[min(r + 2, runs)]
            p, q, o = a, m, a
            while p < m and q < z:
                if keys[c0 + src[q]] < keys[c0 + src[p]]:  # the left run first on a tie: stable
                    dst[o] = src[q]
                    q += 1
                else:
                    dst[o] = src[p]
                    p += 1
                o += 1
            _rest(src, dst, p, m, q, z, o)
            bounds[out] = a
            out += 1
        bounds[out] = n
        runs = out
        src, dst = dst, src
    return src


def _keyed_union_all(keys, offsets, exps, hi, lo, merged, counter_starts, sketch_starts, newest, window, k, factor,
                     heavy):
    groups = sketch_starts.size - 1
    n = exps.size
    out_e = np.empty(n, dtype=np.int64)
    out_hi = np.empty(n, dtype=np.int64)
    out_lo = np.empty(n, dtype=np.int64)
    c_max = 0
    for g in range(groups):
        c_max = max(c_max, counter_starts[sketch_starts[g + 1]] - counter_starts[sketch_starts[g]])
    out_group = np.empty(keys.size, dtype=np.int64)
    out_key = np.empty(out_group.size, dtype=np.int64)
    out_count = np.empty(out_group.size, dtype=np.int64)
    out_merged = np.empty(out_group.size, dtype=np.bool_)
    ids = np.empty(c_max + 1, dtype=np.int64)
    sc = np.empty((_SC_ROWS, max(64, c_max + 1)), dtype=np.int64)
    ws = np.empty((_WS_ROWS, 2 * sc.shape[1] + 2), dtype=np.int64)
    s_max = 0
    for g in range(groups):
        s_max = max(s_max, sketch_starts[g + 1] - sketch_starts[g])
    bounds = np.empty(s_max + 1, dtype=np.int64)
    order_a = np.empty(c_max, dtype=np.int64)
    order_b = np.empty(c_max, dtype=np.int64)
    int64_min = np.int64(-(2**63))
    at = np.int64(0)
    o = 0
    for g in range(groups):
        c0, c1 = counter_starts[sketch_starts[g]], counter_starts[sketch_starts[g + 1]]
        if c1 == c0:
            continue
        nw = newest[g]
        all_alive = nw < int64_min + window
        cutoff = int64_min if all_alive else nw - window
        # by key; each key's counters in merge order: the sketches' key runs merged (a stable sort of the keys)
        s0, s1 = sketch_starts[g], sketch_starts[g + 1]
        for s in range(s0, s1 + 1):
            bounds[s - s0] = counter_starts[s] - c0
        order = _key_runs(keys, c0, bounds, s1 - s0, order_a, order_b)
        if order is None:
            order = np.argsort(keys[c0:c1], kind="mergesort")
        r = 0
        while r < c1 - c0:
            key = keys[c0 + order[r]]
            e = r
            width = 0
            while e < c1 - c0 and keys[c0 + order[e]] == key:
                c = c0 + order[e]
                ids[e - r] = c
                width += offsets[c + 1] - offsets[c]
                e += 1
            if e - r == 1:  # the key of one sketch (most keys): its live prefix as it is, no call
                c = ids[0]
                kept = 0
                rough = 0.0
                for b in range(offsets[c], offsets[c + 1]):
                    if not all_alive and hi[b] <= cutoff:
                        break
                    rough += np.float64(np.int64(1) << exps[b])
                    out_e[at + kept], out_hi[at + kept], out_lo[at + kept] = exps[b], hi[b], lo[b]
                    kept += 1
                status = -1 if rough >= heavy else (1 if kept else 0)
                m = merged[c]
            else:
                if width > sc.shape[1]:
                    sc = np.empty((_SC_ROWS, 2 * width), dtype=np.int64)
                    ws = np.empty((_WS_ROWS, 4 * width + 2), dtype=np.int64)
                status, kept, m = _unite1(ids, e - r, offsets, exps, hi, lo, merged, all_alive, cutoff, k, factor,
                                          heavy, out_e, out_hi, out_lo, at, sc, ws)
            if status < 0:
                return False, out_group, out_key, out_count, out_merged, out_e, out_hi, out_lo
            if status > 0:
                out_group[o] = g
                out_key[o] = key
                out_count[o] = kept
                out_merged[o] = m
                at += kept
                o += 1
            r = e
    return (True, out_group[:o], out_key[:o], out_count[:o], out_merged[:o], out_e[:at], out_hi[:at], out_lo[:at])


def _copy_rest(src, dst, p, m, q, z, o):
    """The end of a two-way merge into ``dst`` from ``o``: what is left of
    ``src[p:m]``, then of ``src[q:z]`` (one of them is empty)."""
    while p < m:
        dst[o] = src[p]
        p += 1
        o += 1
    while q < z:
        dst[o] = src[q]
        q += 1
        o += 1


def _merge_two(src, dst, a, m, z, key_hi, key_lo, key_tie, by_position):
    """One merge step of the orders below: ``src[a:m]`` and ``src[m:z]``
    (ids, each range in order) into ``dst[a:z]``, larger keys first: the
    key of id ``x`` is ``(key_hi[x], key_lo[x], key_tie[x])``, or ``x``
    itself last with ``by_position``."""
    p, q, o = a, m, a
    while p < m and q < z:
        x, y = src[p], src[q]
        tx = x if by_position else key_tie[x]
        ty = y if by_position else key_tie[y]
        if key_hi[x] > key_hi[y] or (key_hi[x] == key_hi[y] and (key_lo[x] > key_lo[y] or (key_lo[x] == key_lo[y]
                                                                                            and tx > ty))):
            dst[o] = x
            p += 1
        else:
            dst[o] = y
            q += 1
        o += 1
    _rest(src, dst, p, m, q, z, o)


def _merge_runs(hi, lo, starts):
    """:func:`_desc_order` of buckets that arrive as runs (``starts``: each
    histogram's first position, then the end), each run newest first (hi,
    then lo, never rising), by whole stretches: a stretch of equal (hi,
    lo) within a run is taken at once, its positions reversed, and the
    stretches of all runs are merged by (hi, lo, then the later run
    first), as :func:`_desc_order` orders their buckets.  A sum's
    histogram holds a few stretches per row (its buckets inside one row
    share one timestamp), so the merge compares stretches, not buckets.
    A run that rises somewhere: :func:`_desc_order` of the whole."""
    n = hi.size
    runs = starts.size - 1
    u = 0  # the stretches, counted first (nothing allocated for what the plain merge takes)
    for r in range(runs):
        for i in range(starts[r], starts[r + 1]):
            if i == starts[r] or hi[i] != hi[i - 1] or lo[i] != lo[i - 1]:
                if i > starts[r] and (hi[i] > hi[i - 1] or (hi[i] == hi[i - 1] and lo[i] > lo[i - 1])):
                    return _desc(hi, lo)
                u += 1
    if 2 * u > n:  # stretches of one bucket mostly (counts at distinct times): the plain merge is the cheaper
        return _desc(hi, lo)
    first = np.empty(u + 1, dtype=np.int64)  # each stretch's first position
    run_of = np.empty(u, dtype=np.int64)  # each stretch's run
    bounds = np.empty(runs + 1, dtype=np.int64)  # each run's first stretch
    u = 0
    for r in range(runs):
        bounds[r] = u
        for i in range(starts[r], starts[r + 1]):
            if i == starts[r] or hi[i] != hi[i - 1] or lo[i] != lo[i - 1]:
                first[u] = i
                run_of[u] = r
                u += 1
    bounds[runs] = u
    first[u] = n
    # bottom-up merges of the runs' stretch lists (empty runs are empty ranges)
    s_hi = hi[first[:u]]  # each stretch's key: (hi, lo, then the later run)
    s_lo = lo[first[:u]]
    src = np.arange(u)
    dst = np.empty(u, dtype=np.int64)
    width = 1
    while width < runs:
        for r in range(0, runs, 2 * width):
            _merge2(src, dst, bounds[r], bounds[min(r + width, runs)], bounds[min(r + 2 * width, runs)], s_hi, s_lo,
                    run_of, False)
        src, dst = dst, src
        width *= 2
    idx = np.empty(n, dtype=np.int64)
    o = 0
    for t in range(u):
        x = src[t]
        for i in range(first[x + 1] - 1, first[x] - 1, -1):
            idx[o] = i
            o += 1
    return idx


def _desc_order(hi, lo):
    """Positions of the buckets sorted by hi descending, then lo
    descending, then position descending (merge_all's order): a merge of
    the natural runs (histograms arrive as such runs)."""
    n = hi.size
    idx = np.empty(n, dtype=np.int64)
    # each natural run (the key never rises), its equal keys reversed: then every run is in the order
    bounds = np.empty(n + 1, dtype=np.int64)
    runs = 0
    i = 0
    while i < n:
        bounds[runs] = i
        runs += 1
        j = i + 1
        while j < n and (hi[j] < hi[j - 1] or (hi[j] == hi[j - 1] and lo[j] <= lo[j - 1])):
            j += 1
        # write i..j-1 with equal-key stretches reversed
        a = i
        while a < j:
            b = a + 1
            while b < j and hi[b] == hi[a] and lo[b] == lo[a]:
                b += 1
            for q in range(b - a):
                idx[a + q] = b - 1 - q
            a = b
        i = j
    bounds[runs] = n
    if runs == 1:
        return idx
    tmp = np.empty(n, dtype=np.int64)
    src, dst = idx, tmp
    while runs > 1:
        r = 0
        out_runs = 0
        while r < runs:
            a, m = bounds[r], bounds[min(r + 1, runs)]
            z = bounds[min(r + 2, runs)]
            _merge2(src, dst, a, m, z, hi, lo, hi, True)  # (hi, then lo, then position)
            bounds[out_runs] = a
            out_runs += 1
            r += 2
        bounds[out_runs] = n
        runs = out_runs
        src, dst = dst, src
    return src


_FLAG_MERGED, _FLAG_SHARED, _FLAG_TICK = 2, 4, 8  # ehist.eh_layout's flags (bits of the flags field)
_BITS = 7


def read_varint(buf, pos, end):
    """(value, next position, ok): one minimal LEB128 varint of at most 10
    bytes below 2**64 at ``buf[pos]``, not running past ``end`` (the rules
    of :mod:`ehist.serialization`), for compiled decoders to :func:`jit`."""
    value = np.uint64(0)
    shift = 0
    i = pos
    while True:
        if i >= end or i - pos >= 10:
            return np.uint64(0), i, False
        byte = buf[i]
        i += 1
        if i - pos == 10 and byte > 1:
            return np.uint64(0), i, False
        value |= np.uint64(byte & 0x7F) << np.uint64(shift)
        shift += 7
        if byte < 0x80:
            if i - pos > 1 and byte == 0:
                return np.uint64(0), i, False
            return value, i, True


def read_row_times(buf, pos, end, h_at, k, newest, window, ts, hs, at):
    """``(ok, next position)``: ``k`` rows' times and 8-byte hashes of the
    rows layout (:mod:`ehist.flat_rows`: ``newest`` less the first varint
    gap, then each later gap added, each hash at ``buf[h_at + 8 j]``),
    written to ``ts[at + j]`` and ``hs[at + j]``, with every check of the
    families' readers: the first row inside ``window`` and above int64's
    floor, the later gaps summing to at most the first, rows strictly
    increasing by (time, hash).  Compiled readers call
    :func:`row_times`'s."""
    g0 = np.uint64(0)
    run = np.uint64(0)
    prev_t = np.int64(0)
    prev_h = np.uint64(0)
    for j in range(k):
        g, pos, good = _rt_varint(buf, pos, end)
        if not good:
            return False, pos
        if j == 0:
            # inside the window, the time above int64's floor: newest - g0 > INT64_MIN
            if g >= window or g >= np.uint64(newest) + np.uint64(2**63):
                return False, pos
            g0 = g
        else:
            if g > g0 - run:  # the later gaps sum to at most the first
                return False, pos
            run += g
        h = np.uint64(0)
        for b in range(8):
            h |= np.uint64(buf[h_at + 8 * j + b]) << np.uint64(8 * b)
        t = newest - np.int64(g0) + np.int64(run)
        if j > 0 and not (t > prev_t or (t == prev_t and h > prev_h)):
            return False, pos
        ts[at + j] = t
        hs[at + j] = h
        prev_t, prev_h = t, h
    return True, pos


def read_row_values(buf, pos, end, k, vs, at):
    """``(ok, next position)``: ``k`` row values of the rows layout (the
    rows form's values flag set: varints, each >= 1, their total within
    int64, not all 1), written to ``vs[at + j]``.  Compiled readers call
    :func:`row_values`'s (``ehist.eh_rows``, ``frequencies.compiled``)."""
    total = np.uint64(0)
    ones = True
    for j in range(k):
        v, pos, good = _rt_varint(buf, pos, end)
        if not good or v < np.uint64(1) or v > np.uint64(0x7FFFFFFFFFFFFFFF) - total:
            return False, pos
        total += v
        ones = ones and v == np.uint64(1)
        vs[at + j] = np.int64(v)
    return not ones, pos


_rt_varint = None  # the compiled read_varint, which read_row_times and read_row_values call
_ROW_READERS: dict = {}


def _row_reader(fn):
    """``fn`` (a loop of the rows layout) compiled once, with the varint
    reader it calls."""
    global _rt_varint
    if fn.__name__ not in _ROW_READERS:
        if _rt_varint is None:
            _rt_varint = jit(read_varint)
        _ROW_READERS[fn.__name__] = jit(fn)
    return _ROW_READERS[fn.__name__]


def row_times():
    """:func:`read_row_times` compiled (for the families' compiled readers
    to call: ``frequencies.compiled``, ``lp_norms.compiled``)."""
    return _row_reader(read_row_times)


def row_values():
    """:func:`read_row_values` compiled (for the families' compiled
    readers to call: ``ehist.eh_rows``, ``frequencies.compiled``)."""
    return _row_reader(read_row_values)


def gcd(a, b):
    """The gcd of two uint64 (0 with 0: the other), for compiled loops."""
    if a == np.uint64(1):  # a running gcd stays at 1: no division
        return a
    while b != np.uint64(0):
        a, b = b, a % b
    return a


def _decode_one(buf, start, end, f, v2, newest, n, window, l, exps, hi, lo, deltas, shared, widths, at, run_e, run_n):
    """One blob of :func:`_decode_all`: its ``n`` buckets (the count it
    declares) written at ``at`` of ``exps``, ``hi`` and ``lo``
    (``deltas``, ``shared``, ``widths``, ``run_e`` and ``run_n``: scratch
    from 0, at least ``n`` long, reused by every blob: no allocation per
    blob, and none the column's size); False when ``from_bytes`` must
    decide the blob."""
    big = np.uint64(1) << np.uint64(40)
    u64_max = np.uint64(0xFFFFFFFFFFFFFFFF)
    top_bit = np.uint64(1) << np.uint64(63)
    is_shared = (f & _FLAG_SHARED) != 0
    is_tick = (f & _FLAG_TICK) != 0
    merged = (f & _FLAG_MERGED) != 0
    if newest == INT64_MIN:  # check_newest's rule: from_bytes names it
        return False
    n_u, pos, good = _varint(buf, start, end)
    if not good:
        return False
    if np.int64(n_u) != n or (n == 0 and n_u != np.uint64(0)):
        return False
    if n == 0:
        if pos == end and not is_shared and not is_tick and not merged:
            return True
        return False
    r_u, pos, good = _varint(buf, pos, end)
    if not good or r_u < np.uint64(1) or r_u > np.uint64(n):
        return False
    runs = np.int64(r_u)
    # size runs: (exponent, length), adjacent exponents differing, lengths summing to n
    filled = 0
    prev_e = -1
    fine = True
    for j in range(runs):
        e, pos, good = _varint(buf, pos, end)
        ln, pos, good2 = _varint(buf, pos, end)
        if not good or not good2 or e > np.uint64(62) or ln < np.uint64(1) or ln > big:
            fine = False
            break
        ei = np.int64(e)
        li = np.int64(ln)
        if ei == prev_e or filled + li > n:
            fine = False
            break
        for i in range(li):
            exps[at + filled + i] = ei
        run_e[j] = ei
        run_n[j] = li
        filled += li
        prev_e = ei
    if not fine or filled != n:
        return False
    tick, pos, good = _tick(buf, pos, end, is_tick)
    if not good:
        return False
    # the shared-timestamps bitmap: one-byte words, 7 bits each, padding and bit 0 clear
    n_shared = 0
    for i in range(n):
        shared[i] = False
    if is_shared:
        words = (n + _BITS - 1) // _BITS
        for w in range(words):
            word, pos, good = _varint(buf, pos, end)
            used = min(n - _BITS * w, _BITS)
            if not good or word >= np.uint64(1 << _BITS) or (word >> np.uint64(used)) != np.uint64(0):
                fine = False
                break
            for k in range(used):
                if (word >> np.uint64(k)) & np.uint64(1):
                    shared[_BITS * w + k] = True
                    n_shared += 1
        if not fine or shared[0] or n_shared <= words:
            return False
    # timestamp deltas (scaled below), then widths: every bucket's (merged) or the oldest's
    g = np.uint64(0)
    zeros = 0
    for i in range(n):
        deltas[i] = np.uint64(0)
        widths[i] = np.uint64(0)
        if shared[i]:
            continue
        d, pos, good = _varint(buf, pos, end)
        if not good:
            fine = False
            break
        if i > 0 and d == np.uint64(0):
            if is_shared:
                fine = False
                break
            zeros += 1
        g = _gcd(g, d)
        deltas[i] = d
    if not fine:
        return False
    if v2 and not is_shared and zeros > (n + _BITS - 1) // _BITS:
        return False  # the bitmap would have been shorter
    for i in range(n - 1 if not merged else 0, n):
        wv, pos, good = _varint(buf, pos, end)
        if not good:
            fine = False
            break
        widths[i] = wv
        g = _gcd(g, wv)
    if not fine or pos != end:
        return False
    if v2 and ((tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2))):
        return False
    limit = u64_max // tick
    # the total, below 2**62 (from_bytes decides those near int64's edge)
    total = np.uint64(0)
    for j in range(runs):
        if run_e[j] >= 61 or run_n[j] >= (np.int64(1) << (61 - run_e[j])):
            fine = False
            break
        total += np.uint64(run_n[j]) << np.uint64(run_e[j])
        if total >= np.uint64(1) << np.uint64(62):
            fine = False
            break
    if not fine:
        return False
    # hi = newest - cumulative deltas (times tick), kept within 2**61 of newest
    cum = np.uint64(0)
    room = np.uint64(newest) ^ top_bit  # newest - INT64_MIN
    edge = np.uint64(1) << np.uint64(61)
    for i in range(n):
        d = deltas[i]
        if d > limit or d * tick >= edge:
            fine = False
            break
        cum += d * tick
        if cum >= edge or cum > room:
            fine = False
            break
        hi[at + i] = newest - np.int64(cum)
    if not fine:
        return False
    # every bucket inside the window
    if np.uint64(newest) - np.uint64(hi[at + n - 1]) >= np.uint64(window):
        return False
    for i in range(n):  # lo = hi - width >= INT64_MIN
        wv = widths[i]
        if wv > limit or wv * tick > (np.uint64(hi[at + i]) ^ top_bit):
            fine = False
            break
        widths[i] = wv * tick
    if not fine:
        return False
    if merged:
        for i in range(n):
            lo[at + i] = np.int64(np.uint64(hi[at + i]) - widths[i])
    else:
        if exps[at + n - 1] == 0 and widths[n - 1] != np.uint64(0):
            return False  # an oldest bucket of size 1 has width 0
        for i in range(n - 1):
            lo[at + i] = hi[at + i + 1]
        lo[at + n - 1] = np.int64(np.uint64(hi[at + n - 1]) - widths[n - 1])
        for i in range(n):
            if exps[at + i] == 0:
                lo[at + i] = hi[at + i]
        if not _canon(np.int64(total), l, run_e, run_n, runs):
            return False
    return True


def _canonical_runs(total, l, run_e, run_n, runs):
    """Whether the size runs ``(run_e, run_n)[:runs]`` (exponent, count)
    are the l-canonical sizes of ``total`` (:func:`_canonical_levels`):
    ``l + bit i of low`` of size ``2**i`` for every ``i < j``, then ``m``
    of size ``2**j`` where ``m > 0``."""
    j, m, low = _levels(total, l)
    if j + (1 if m > 0 else 0) != runs:
        return False
    for i in range(j):
        if run_e[i] != i or run_n[i] != l + np.int64((low >> np.uint64(i)) & np.uint64(1)):
            return False
    return not (m > 0 and (run_e[j] != j or run_n[j] != m))


def read_tick(buf, pos, end, ticked):
    """(tick, next position, ok): a histogram's tick, the varint at
    ``buf[pos]`` (2 or more) when its flags say ``ticked``, else 1 read from
    nothing; for the compiled decoders.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> _ = _kernel("decode")                       # the compiled varint reader it calls
    >>> buf = np.array([0x83, 0x01, 7], dtype=np.uint8)    # the varint 131, then a byte
    >>> [(int(t), p, bool(ok)) for t, p, ok in (read_tick(buf, 0, 3, True), read_tick(buf, 0, 3, False))]
    [(131, 2, True), (1, 0, True)]
    >>> bool(read_tick(np.array([1], dtype=np.uint8), 0, 1, True)[2])     # a tick of 1 is refused
    False
    """
    if not ticked:
        return np.uint64(1), pos, True
    tick, pos, good = _varint(buf, pos, end)
    return tick, pos, good and tick >= np.uint64(2)


def _one_bucket(buf, start, end, f, newest, window):
    """:func:`_decode_one` of a compact histogram (format version 2) with
    flags ``f`` declaring one bucket, as most counters of a keyed sketch
    do, without its loops or scratch: ``(True, exponent, hi, lo)`` only
    where every check of the general path passes (the same varints, the
    tick and gcd rules, int64 room, the window; unmerged, the canonical
    form of one unit, a bucket of size 1, for every ``l``); ``(False, 0,
    0, 0)`` leaves the blob to the general path, which decides it.
    Values, not writes: the caller's arrays are not passed (a call passing
    arrays costs more than this whole read)."""
    tick_flag, merged = (f & _FLAG_TICK) != 0, (f & _FLAG_MERGED) != 0
    if (f & _FLAG_SHARED) != 0 or newest == INT64_MIN:
        return _NO_BUCKET
    n_u, pos, good = _varint(buf, start, end)
    if not good or n_u != np.uint64(1):
        return _NO_BUCKET
    r_u, pos, good = _varint(buf, pos, end)
    e, pos, good2 = _varint(buf, pos, end)
    ln, pos, good3 = _varint(buf, pos, end)
    if not (good and good2 and good3) or r_u != np.uint64(1) or ln != np.uint64(1) or e > np.uint64(60):
        return _NO_BUCKET
    tick, pos, good = _tick(buf, pos, end, tick_flag)
    if not good:
        return _NO_BUCKET
    d, pos, good = _varint(buf, pos, end)
    w, pos, good2 = _varint(buf, pos, end)
    if not (good and good2) or pos != end:
        return _NO_BUCKET
    g = _gcd(d, w)
    if (tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2)):
        return _NO_BUCKET
    if not merged and (e != np.uint64(0) or w != np.uint64(0)):  # canonical: one unit, size 1 (for every l)
        return _NO_BUCKET
    edge = np.uint64(1) << np.uint64(61)
    limit = np.uint64(0xFFFFFFFFFFFFFFFF) // tick
    top_bit = np.uint64(1) << np.uint64(63)
    if d > limit or w > limit:
        return _NO_BUCKET
    cum = d * tick
    if cum >= edge or cum > (np.uint64(newest) ^ top_bit) or cum >= np.uint64(window):
        return _NO_BUCKET
    h = newest - np.int64(cum)
    if w * tick > (np.uint64(h) ^ top_bit):
        return _NO_BUCKET
    return True, np.int64(e), h, np.int64(np.uint64(h) - w * tick)


def _histogram_head(buf, start, end, f, n, run_e, run_n):
    """What :func:`_ordered_read` and :func:`_merged_bounds` read first,
    with :func:`_decode_one`'s checks: the bucket count (``n``, at least
    1), the size runs (into ``run_e`` and ``run_n``: adjacent exponents
    differing, lengths summing to ``n``, the total below 2**62), the tick
    and the shared-timestamps bitmap (one-byte words, 7 bits each, padding
    and bit 0 clear, more set bits than words).  ``(True, position after
    them, runs, total, tick, where the bitmap starts or -1, its set
    bits)``, or :data:`_NO_HEAD`."""
    n_u, pos, good = _varint(buf, start, end)
    if not good or np.int64(n_u) != n:
        return _NO_HEAD
    r_u, pos, good = _varint(buf, pos, end)
    if not good or r_u < np.uint64(1) or r_u > np.uint64(n):
        return _NO_HEAD
    runs = np.int64(r_u)
    big = np.uint64(1) << np.uint64(40)
    filled = 0
    prev_e = -1
    total = np.uint64(0)
    for j in range(runs):
        e, pos, good = _varint(buf, pos, end)
        ln, pos, good2 = _varint(buf, pos, end)
        if not good or not good2 or e > np.uint64(62) or ln < np.uint64(1) or ln > big:
            return _NO_HEAD
        ei = np.int64(e)
        li = np.int64(ln)
        if ei == prev_e or filled + li > n or ei >= 61 or li >= (np.int64(1) << (61 - ei)):
            return _NO_HEAD
        total += np.uint64(li) << np.uint64(ei)
        if total >= np.uint64(1) << np.uint64(62):
            return _NO_HEAD
        run_e[j] = ei
        run_n[j] = li
        filled += li
        prev_e = ei
    if filled != n:
        return _NO_HEAD
    tick, pos, good = _tick(buf, pos, end, (f & _FLAG_TICK) != 0)
    if not good:
        return _NO_HEAD
    mark = -1
    n_shared = 0
    if (f & _FLAG_SHARED) != 0:  # one-byte words: a varint below 128 is its byte
        words = (n + _BITS - 1) // _BITS
        mark = pos
        pos += words
        if pos > end:
            return _NO_HEAD
        for w in range(words):
            word = np.int64(buf[mark + w])
            if word >= (1 << _BITS) or (word >> min(n - _BITS * w, _BITS)) != 0:
                return _NO_HEAD
            n_shared += _POP7[word]
        if (buf[mark] & 1) != 0 or n_shared <= words:
            return _NO_HEAD
    return True, pos, runs, total, tick, mark, n_shared


def _time_limits(tick, newest):
    """``(limit, top bit, edge, room)`` of :func:`_read_delta`'s checks for
    a histogram of ``tick`` ending at ``newest``: the largest value a tick
    scales without overflow, bit 63, 2**61 and ``newest - INT64_MIN``."""
    top_bit = np.uint64(1) << np.uint64(63)
    return np.uint64(0xFFFFFFFFFFFFFFFF) // tick, top_bit, np.uint64(1) << np.uint64(61), np.uint64(newest) ^ top_bit


def _read_delta(buf, pos, end, i, shared, g, zeros, cum, tick, limit, edge, room):
    """One timestamp delta of :func:`_ordered_read` and
    :func:`_merged_bounds`, bucket ``i``'s, with :func:`_decode_one`'s
    checks (a zero after the first only without a bitmap, counted; the
    scaled delta and the running sum within 2**61 and the room below the
    newest time): ``(ok, next position, gcd so far, zeros, running sum)``."""
    d, pos, good = _varint(buf, pos, end)
    if not good:
        return False, pos, g, zeros, cum
    if i > 0 and d == np.uint64(0):
        if shared:
            return False, pos, g, zeros, cum
        zeros += 1
    g = _gcd(g, d)
    if d > limit or d * tick >= edge:
        return False, pos, g, zeros, cum
    cum += d * tick
    if cum >= edge or cum > room:
        return False, pos, g, zeros, cum
    return True, pos, g, zeros, cum


def _ordered_read(buf, start, end, f, v2, newest, n, window, l, cut, run_e, run_n, hi, at):
    """Every check of :func:`_decode_one` on an ordered (unmerged)
    histogram of ``n >= 1`` buckets, reading its size runs (into ``run_e``
    and ``run_n``) and one delta per timestamp, never a bucket at a time:
    ``(True, p, runs, oldest_lo, mark)`` where the decoder accepts the
    blob, ``(False, ...)`` for the caller to decide it the general way
    (merged histograms, empty ones, and every blob refused here).

    ``p`` is the number of buckets newer than ``cut`` (timestamps never
    rise: a prefix), ``oldest_lo`` the oldest bucket's lower end and
    ``mark`` where the shared-timestamps bitmap starts in ``buf`` (-1:
    none).  Each timestamp is written at ``hi[at + i]`` for the first
    bucket ``i`` that has it (every bucket, without a bitmap).  A sum's
    histogram holds hundreds of buckets at a few dozen timestamps (the
    bitmap marks the rest): the general path writes six arrays per bucket
    to read it.  The checks are that path's (the same varints, runs,
    bitmap, zeros, gcd and tick rules, int64 room, window and canonical
    sizes), so a blob taken here is taken there, with the same buckets
    (``tests/test_columnar.py`` compares both on altered bytes)."""
    if (f & _FLAG_MERGED) != 0 or newest == INT64_MIN or n < 1:
        return _NO_READ
    good, pos, runs, total, tick, mark, n_shared = _hhead(buf, start, end, f, n, run_e, run_n)
    if not good:
        return _NO_READ
    limit, top_bit, edge, room = _limits(tick, newest)
    words = (n + _BITS - 1) // _BITS
    g = np.uint64(0)
    cum = np.uint64(0)
    p = n  # the first bucket at or before the cut
    w = -1  # a delta per bucket the bitmap leaves clear (every bucket without one), lowest first
    free = np.int64(0)
    zeros = 0
    for s in range(n - n_shared):
        i = s
        if mark >= 0:
            while free == 0:
                w += 1
                free = ~np.int64(buf[mark + w]) & ((np.int64(1) << min(n - _BITS * w, _BITS)) - 1)
            i = _BITS * w + _LOW7[free]
            free &= free - 1
        good, pos, g, zeros, cum = _delta(buf, pos, end, i, mark >= 0, g, zeros, cum, tick, limit, edge, room)
        if not good:
            return _NO_READ
        hi[at + i] = newest - np.int64(cum)
        if p == n and hi[at + i] <= cut:
            p = i
    if v2 and mark < 0 and zeros > words:
        return _NO_READ  # the bitmap would have been shorter
    wv, pos, good = _varint(buf, pos, end)  # the oldest bucket's width
    if not good or pos != end:
        return _NO_READ
    g = _gcd(g, wv)
    if v2 and ((tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2))):
        return _NO_READ
    oldest = newest - np.int64(cum)
    if np.uint64(newest) - np.uint64(oldest) >= np.uint64(window):
        return _NO_READ  # every bucket inside the window
    if wv > limit or wv * tick > (np.uint64(oldest) ^ top_bit):
        return _NO_READ
    if run_e[runs - 1] == 0 and wv != np.uint64(0):
        return _NO_READ  # an oldest bucket of size 1 has width 0
    if not _canon(np.int64(total), l, run_e, run_n, runs):
        return _NO_READ
    return True, p, runs, np.int64(np.uint64(oldest) - wv * tick), mark


def _ordered_bounds(buf, start, end, f, v2, newest, n, window, l, cut, run_e, run_n, hi):
    """:func:`_decode_one` then :func:`_bucket_bounds_one` of an ordered
    histogram, without its buckets (:func:`_ordered_read`; ``hi`` scratch
    of ``n`` entries): ``(True, lower, upper, total)``, or ``(False, 0, 0,
    0)`` for the caller to decide the blob the general way.  Its bounds are
    its l-canonical sizes: every bucket newer than ``cut`` but the last
    counts whole (its lower end is the next bucket's timestamp), the last
    whole only when its lower end too lies after the cut, else 1; the
    sizes are summed run by run."""
    ok, p, runs, oldest_lo, _ = _oread(buf, start, end, f, v2, newest, n, window, l, cut, run_e, run_n, hi, 0)
    if not ok:
        return _NO_BOUNDS
    total = np.int64(0)
    upper = np.int64(0)  # the sizes of buckets 0..p-1
    last = np.int64(0)
    left = p
    for j in range(runs):
        size = np.int64(1) << run_e[j]
        total += run_n[j] * size
        if left > 0:
            take = min(left, run_n[j])
            upper += take * size
            last = size
            left -= take
    lower = upper
    if last > 1 and (p < n or oldest_lo <= cut):
        lower = upper - last + 1  # the last bucket reaches to the cut or before it
    return True, lower, upper, total


def _merged_bounds(buf, start, end, f, v2, newest, n, window, cut, run_e, run_n, hi):
    """:func:`_decode_one` then :func:`_bucket_bounds_one` of a merged
    histogram (a union's: a width per bucket, no canonical form), without
    its buckets (``hi``: scratch of ``n`` entries): ``(True, lower, upper,
    total)``, or ``(False, 0, 0, 0)`` for the caller to decide the blob the
    general way (unmerged and empty histograms, and every blob refused
    here).  One pass over the size runs and deltas, one over the widths,
    each bucket's size taken from its run as it is bounded; the checks are
    the general decoder's (the same varints, runs, bitmap, zeros, gcd and
    tick rules, int64 room and window), so a blob taken here is taken
    there with the same bounds (``tests/test_columnar.py``)."""
    if (f & _FLAG_MERGED) == 0 or newest == INT64_MIN or n < 1:
        return _NO_BOUNDS
    good, pos, _, total, tick, mark, _ = _hhead(buf, start, end, f, n, run_e, run_n)
    if not good:
        return _NO_BOUNDS
    limit, top_bit, edge, room = _limits(tick, newest)
    words = (n + _BITS - 1) // _BITS
    g = np.uint64(0)
    cum = np.uint64(0)
    zeros = 0
    for i in range(n):  # each bucket's timestamp: a delta, or the one before's where the bitmap says so
        if mark >= 0 and (buf[mark + i // _BITS] >> (i % _BITS)) & 1:
            hi[i] = hi[i - 1]
            continue
        good, pos, g, zeros, cum = _delta(buf, pos, end, i, mark >= 0, g, zeros, cum, tick, limit, edge, room)
        if not good:
            return _NO_BOUNDS
        hi[i] = newest - np.int64(cum)
    if v2 and mark < 0 and zeros > words:
        return _NO_BOUNDS  # the bitmap would have been shorter
    if np.uint64(newest) - np.uint64(hi[n - 1]) >= np.uint64(window):
        return _NO_BOUNDS  # every bucket inside the window
    lower = np.int64(0)
    upper = np.int64(0)
    j = 0
    left = run_n[0]
    for i in range(n):  # each bucket's width, then its bounds (_bucket_bounds_one's rule)
        wv, pos, good = _varint(buf, pos, end)
        if not good or wv > limit or wv * tick > (np.uint64(hi[i]) ^ top_bit):
            return _NO_BOUNDS
        g = _gcd(g, wv)
        if left == 0:
            j += 1
            left = run_n[j]
        left -= 1
        if hi[i] > cut:
            size = np.int64(1) << run_e[j]
            upper += size
            lower += size if np.int64(np.uint64(hi[i]) - wv * tick) > cut else 1
    if pos != end:
        return _NO_BOUNDS
    if v2 and ((tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2))):
        return _NO_BOUNDS
    return True, lower, upper, np.int64(total)


def _ordered_decode(buf, start, end, f, v2, newest, n, window, l, exps, hi, lo, at, run_e, run_n):
    """:func:`_decode_one` of an ordered histogram by :func:`_ordered_read`:
    its ``n`` buckets written at ``at`` of ``exps``, ``hi`` and ``lo`` (the
    sizes run by run, each timestamp over the buckets the bitmap marks as
    sharing it, each lower end the next bucket's timestamp), or False for
    the general path to decide the blob."""
    ok, _, runs, oldest_lo, mark = _oread(buf, start, end, f, v2, newest, n, window, l, INT64_MIN, run_e, run_n,
                                          hi, at)
    if not ok:
        return False
    i = at
    for j in range(runs):
        for _ in range(run_n[j]):
            exps[i] = run_e[j]
            i += 1
    if mark >= 0:  # the buckets sharing the one before's timestamp
        for w in range((n + _BITS - 1) // _BITS):
            word = np.int64(buf[mark + w])
            while word != 0:
                i = _BITS * w + _LOW7[word]
                word &= word - 1
                hi[at + i] = hi[at + i - 1]
    for i in range(at, at + n - 1):
        lo[i] = hi[i + 1] if exps[i] != 0 else hi[i]
    lo[at + n - 1] = oldest_lo  # a size-1 oldest bucket has width 0: its own time
    return True


def _declared(buf, starts, ends, flags):
    """The bucket count each blob declares, where its bytes could hold it
    (0 elsewhere: the blob is then rejected)."""
    count = starts.size
    big = np.uint64(1) << np.uint64(40)
    declared = np.zeros(count, dtype=np.int64)
    for b in range(count):
        n, pos, good = _varint(buf, starts[b], ends[b])
        room = (ends[b] - pos) * (_BITS if flags[b] & _FLAG_SHARED else 1)
        if good and n < big and np.int64(n) <= room:
            declared[b] = np.int64(n)
    return declared


def _bucket_arrays(size):
    """The per-bucket arrays :func:`_decode_one` writes (exps, hi, lo) and
    uses as scratch (deltas, shared, widths), ``size`` buckets each."""
    return (np.empty(size, dtype=np.int8), np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64),
            np.empty(size, dtype=np.uint64), np.empty(size, dtype=np.bool_), np.empty(size, dtype=np.uint64))


def _decode_bounds_all(buf, starts, ends, flags, version_2, newest, window, l, cutoffs):
    """:func:`_decode_all` and :func:`_bounds_all` in one pass: each blob
    decoded into scratch arrays (one histogram's size, in cache) and
    bounded for the units after ``cutoffs[b]`` at once, no column built."""
    count = starts.size
    declared = _decl(buf, starts, ends, flags)
    most = declared.max() if count else 0
    exps, hi, lo, deltas, shared, widths = _bufs(most)
    run_e = np.empty(most, dtype=np.int64)
    run_n = np.empty(most, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    lower = np.zeros(count, dtype=np.int64)
    upper = np.zeros(count, dtype=np.int64)
    counts = np.zeros(count, dtype=np.int64)
    units = np.zeros(count, dtype=np.int64)
    for b in range(count):
        n = declared[b]
        fast, lower[b], upper[b], units[b] = _obounds(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n,
                                                     window, l, cutoffs[b], run_e, run_n, hi)
        if not fast and (flags[b] & _FLAG_MERGED) != 0:  # a union's: bounded bucket by bucket from its bytes
            fast, lower[b], upper[b], units[b] = _mbounds(buf, starts[b], ends[b], flags[b], version_2[b], newest[b],
                                                          n, window, cutoffs[b], run_e, run_n, hi)
        if fast:  # an ordered or merged histogram: bounded from its bytes, no bucket written
            ok[b] = True
            counts[b] = n
        elif _dec1(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window, l, exps, hi, lo, deltas,
                   shared, widths, 0, run_e, run_n):
            ok[b] = True
            counts[b] = n
            lower[b], upper[b] = _bounds1(exps, hi, lo, n, cutoffs[b])
            total = np.int64(0)  # below 2**62: _decode_one refuses more
            for i in range(n):
                total += np.int64(1) << np.int64(exps[i])
            units[b] = total
    return ok, lower, upper, counts, units


def _decode_all(buf, starts, ends, flags, version_2, newest, window, l):
    count = starts.size
    declared = _decl(buf, starts, ends, flags)
    cap = declared.sum()
    most = declared.max() if count else 0
    exps, hi, lo, _, _, _ = _bufs(cap)
    _, _, _, deltas, shared, widths = _bufs(most)  # scratch: one histogram's (in cache, not 17 bytes per bucket)
    run_e = np.empty(most, dtype=np.int64)
    run_n = np.empty(most, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    counts = np.zeros(count, dtype=np.int64)
    at = 0
    for b in range(count):
        n = declared[b]
        if _odecode(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window, l, exps, hi, lo, at, run_e,
                    run_n) or _dec1(buf, starts[b], ends[b], flags[b], version_2[b], newest[b], n, window, l, exps, hi,
                                    lo, deltas, shared, widths, at, run_e, run_n):
            ok[b] = True
            counts[b] = n
            at += n
    return ok, counts, exps[:at], hi[:at], lo[:at]
