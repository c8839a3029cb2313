"""Time of a forward pass and of a draft step: pure functions, no SimPy, no I/O.

- :mod:`~simspec.params`: the named efficiencies and overheads, and eta_moe(U);
- :mod:`~simspec.costs.kernels`: per-kernel roofline terms and the whole-pass formula;
- :mod:`~simspec.costs.base`: the :class:`CostModel` protocol and the ``COST_MODELS`` registry;
- :mod:`~simspec.costs.roofline`, :mod:`~simspec.costs.calibrated`: the two cost models.

A new cost model is one module here with ``@COST_MODELS.register("name")``.
"""
