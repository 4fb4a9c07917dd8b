"""Speed benchmarks run by ``make bench``: each module exposes ``run(out)`` and prints figures.

Timings belong here, never in tests.
"""
