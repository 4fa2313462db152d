"""The l-canonical representation of a sum (DGIM, Section 4).

Given ``l >= 1`` and a total ``S >= 0``, the l-canonical representation is
the unique sequence ``k_0, ..., k_j`` of bucket counts (``k_i`` buckets of
size ``2**i``) with

* ``sum(k_i * 2**i) == S``,
* ``l <= k_i <= l + 1`` for every ``i < j``,
* ``1 <= k_j <= l + 1`` (the largest size present).

It is what an exponential histogram with ``l = ceil(k / 2)``,
``k = ceil(1 / eps)`` looks like after any sequence of insertions and
expirations, which is why batch insertion can rebuild the bucket sizes from
the new total alone and place the boundaries with ``searchsorted``
(Datar, Gionis, Indyk and Motwani, Lemma 2 and Procedure l-Canonical).

Examples
--------
>>> canonical_counts(76, 1).tolist()   # the paper's Example 1
[2, 1, 2, 2, 1, 1]
>>> canonical_sizes(76, 1).tolist()    # newest (smallest) bucket first
[1, 1, 2, 4, 4, 8, 8, 16, 32]
>>> int(canonical_sizes(10**6, 50).sum())
1000000
"""

from __future__ import annotations

import numpy as np

__all__ = ["canonical_counts", "canonical_exponents", "canonical_sizes"]


def canonical_counts(total: int, l: int) -> np.ndarray:
    """Bucket counts ``k_i`` of the l-canonical representation of ``total``.

    Parameters
    ----------
    total : int
        The sum to represent, ``0 <= total < 2**63``.
    l : int
        The minimum number of buckets of every size below the largest.

    Returns
    -------
    numpy.ndarray of int64
        ``counts[i]`` buckets of size ``2**i``; empty when ``total == 0``.
        The last entry is non-zero.
    """
    total = int(total)
    l = int(l)
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    if total < 0 or total >= 2**63:
        raise ValueError(f"total must be in [0, 2**63), got {total}")
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # Largest j with l * (2**j - 1) <= total  (i.e. 2**j <= total / l + 1).
    j = (total // l + 1).bit_length() - 1
    while l * ((1 << (j + 1)) - 1) <= total:
        j += 1
    while l * ((1 << j) - 1) > total:
        j -= 1
    rest = total - l * ((1 << j) - 1)
    m, low = divmod(rest, 1 << j)  # m < l by the choice of j
    counts = np.full(j + 1, l, dtype=np.int64)
    counts[j] = m
    if j:
        bits = (low >> np.arange(j, dtype=np.int64)) & 1
        counts[:j] += bits
    if counts[j] == 0:
        counts = counts[:j]
    return counts


def canonical_exponents(total: int, l: int) -> np.ndarray:
    """Bucket exponents (size ``2**e``), newest (smallest) bucket first."""
    counts = canonical_counts(total, l)
    return np.repeat(np.arange(len(counts), dtype=np.int8), counts)


def canonical_sizes(total: int, l: int) -> np.ndarray:
    """Bucket sizes, newest (smallest) bucket first."""
    return np.left_shift(np.int64(1), canonical_exponents(total, l).astype(np.int64))
