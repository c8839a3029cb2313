"""The simulation proper: one decode step as a pure function (``step``), the SimPy engine whose
processes only wait (``engine``), the step's marginal-cost plan, the columnar records a run
appends, and the setup that turns a resolved scenario into engine inputs."""
