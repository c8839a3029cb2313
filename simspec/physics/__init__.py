"""What the hardware and the models are: per-layer bytes and FLOPs, drafters, GPUs, experts."""
