"""Time of a forward pass and of a draft step: pure functions, no SimPy, no I/O.

- :mod:`~simspec.costs.kernels`, :mod:`~simspec.costs.moe_kernel`: per-kernel roofline terms
  (the named efficiencies they use live in :mod:`simspec.params`);
- :mod:`~simspec.costs.parallel`: tensor/expert parallelism and alpha-beta collectives;
- :mod:`~simspec.costs.passes`: one pass and many passes at once from those terms;
- :mod:`~simspec.costs.base`: the :class:`CostModel` protocol and the ``COST_MODELS`` registry;
- :mod:`~simspec.costs.roofline`, :mod:`~simspec.costs.calibrated`: the two cost models;
- :mod:`~simspec.costs.batch`: a batch's or a run's steps priced with any cost model.

A new cost model is one module here with ``@COST_MODELS.register("name")``.
"""
