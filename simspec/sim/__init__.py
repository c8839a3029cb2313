"""The simulation proper: the SimPy engine (processes only wait), the step's marginal-cost plan,
the records a run appends, and the setup that turns a resolved scenario into engine inputs."""
