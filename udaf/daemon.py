"""``spark.python.daemon.module=udaf.daemon``: Python workers that start with ehist loaded.

Spark starts each Python worker by forking a daemon process
(``pyspark.daemon``); the worker then imports what the task's functions
need: for ehist's passes numpy, pandas, pyarrow, numba and the family
modules, about 1.1 s of one core per worker on 2 cores.  A worker serves
many tasks while they succeed, but Spark ends it when a task raises (bad
input the passes refuse, a cancelled stage), so a session that meets
errors, or starts executors often, pays the imports again and again.
This daemon imports them once, before it forks: each worker is a copy
of a process that has them (the pages shared until written).

Set it when the session starts (it is read when the daemon starts):

>>> from pyspark.sql import SparkSession
>>> builder = SparkSession.builder.config("spark.python.daemon.module", "udaf.daemon")  # doctest: +SKIP

It changes no answer: the workers run the same code, only loaded
earlier.  The compiled loops still load from numba's cache on a worker's
first call of each (see :mod:`udaf.warm`).
"""

from __future__ import annotations

# what a worker's first task would import, imported once before the first
# fork: the libraries of the passes and every driver of the Spark layer
import numpy
import pandas
import pyarrow
import pyarrow.compute
import pyspark.daemon
import pyspark.worker

from . import functions, native, per_row, two_phase, union
from .spec import load_families

__all__ = ["main", "PRELOADED"]

#: The modules every worker starts with (besides the family modules).
PRELOADED = (numpy, pandas, pyarrow, pyarrow.compute, pyspark.worker, functions, native, per_row, two_phase, union)


def main() -> None:
    """Load every family module, then run Spark's daemon (its workers are
    forks of this process)."""
    load_families()
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
