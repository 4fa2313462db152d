"""The project's own families among the registered ones.

The registries (``ehist.synopsis.SYNOPSES``, ``udaf.spec.FAMILIES``) hold
every family imported in the process, a family defined outside the
project too (``tests/test_extension.py`` defines one, and pytest imports
every test module before it runs any).  The tests that list the project's
families by hand compare their lists with these.
"""

PACKAGES = ("ehist", "distinct", "lp_norms", "frequencies", "quantiles", "udaf")


def ours(classes) -> set:
    """The classes of ``classes`` defined in the project's packages."""
    return {c for c in classes if c.__module__.partition(".")[0] in PACKAGES}
