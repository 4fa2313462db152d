"""The paper's Example 1 (DGIM Section 2), replayed on the l-canonical form.

The example's bucket sizes 32, 16, 8, 8, 4, 4, 2, 1, 1 have one or two
buckets of each size, i.e. they are the l-canonical form with l = 1
(k = 2, eps = 0.5).  The paper says "k/2 = 2" while its numbers keep at
most two buckets per size, which is the l = 1 rule of its own Invariant 2
and Section 4 (at most l + 1 of each size); we follow the numbers.
"""

from __future__ import annotations

import numpy as np

from ehist import ExponentialHistogram, canonical_sizes


def sizes_oldest_first(h):
    sizes, _, _ = h.buckets()
    return sizes[::-1].tolist()


def test_example_1():
    h = ExponentialHistogram(window=10**6, eps=0.5)
    assert h.l == 1
    h.update(np.arange(76))  # 76 ones = 32+16+8+8+4+4+2+1+1
    assert sizes_oldest_first(h) == [32, 16, 8, 8, 4, 4, 2, 1, 1]
    before = dict(zip(h.buckets()[1].tolist(), h.buckets()[0].tolist()))

    h.add(76)  # "When a new 1 arrives, the older 1's are merged"
    assert sizes_oldest_first(h) == [32, 16, 8, 8, 4, 4, 2, 2, 1]

    h.add(77)
    h.add(78)  # "the merging cascades up to the buckets of size 8"
    assert sizes_oldest_first(h) == [32, 16, 16, 8, 4, 2, 1]

    # merging never creates a new boundary inside old data: every bucket
    # timestamp that is left was a bucket timestamp before
    after = h.buckets()[1].tolist()
    assert all(t in before or t >= 76 for t in after)


def test_example_1_batch_equals_steps():
    step = ExponentialHistogram(window=10**6, eps=0.5).update(np.arange(76))
    for t in (76, 77, 78):
        step.add(t)
    batch = ExponentialHistogram(window=10**6, eps=0.5).update(np.arange(79))
    assert step == batch
    assert canonical_sizes(79, 1)[::-1].tolist() == [32, 16, 16, 8, 4, 2, 1]
