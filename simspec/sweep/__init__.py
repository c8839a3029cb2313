"""Sweeps: a grid of scenario variants × replications, run in parallel, crash-safe, resumable.

One question per sweep — how does the speedup of each policy change with the batch size, the
routing overlap, the model? — answered with many paired simulations:

==========  ===================================================================================
spec        what runs: the ``[sweep]`` table (grid, cases, replications, oracle), derived seeds,
            :func:`~simspec.sweep.spec.expand` into validated points, ``load_sweep`` for a file
run         how it runs: :func:`~simspec.sweep.run.run_sweep` on local processes or dask, every
            finished point saved atomically, ``resume`` after a kill
points      the sweep folder on disk, read back as result objects (``read_sweep``)
summary     means over replications and paired 95 % confidence intervals (Student t)
tables      ``results.csv`` and ``summary.csv``, views of the result objects
==========  ===================================================================================

Policies, the k = 0 baseline and the oracle of a point share its reference sequences, so their
differences are paired. Import from the submodules; this package module imports none of them.
"""
