"""`simspec gpus`: list the catalog's GPUs."""

from __future__ import annotations

import argparse

from simspec import catalog
from simspec.commands import table

NAME = "gpus"
HELP = "List the catalog's GPUs."
EXAMPLE = "simspec gpus"


def configure(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def execute(args: argparse.Namespace) -> int:
    """Print the GPU table (GPU link GB/s: per direction, through the switch or per peer link of
    a mesh; host GB/s: host-to-device bandwidth reached from pinned memory)."""
    rows = []
    for name in catalog.gpu_names():
        g = catalog.get_gpu(name)
        rows.append(
            (
                name,
                g.display_name,
                f"{g.memory_bytes / 1e9:.0f}",
                f"{g.hbm_bytes_per_s / 1e12:.2f}",
                f"{g.bf16_flops_per_s / 1e12:.0f}",
                f"{g.l2_bytes / 2**20:.0f}",
                g.num_sms,
                f"{g.link_bytes_per_s / 1e9:.0f} {g.fabric}" if g.link_bytes_per_s else "-",
                f"{g.pcie_generation} x{g.pcie_lanes}" if g.pcie_generation else "-",
                f"{g.host_link_bytes_per_s(pinned=True) / 1e9:.1f}"
                if g.host_link_bytes_per_s()
                else "-",
            )
        )
    header = (
        "gpu",
        "name",
        "memory GB",
        "HBM TB/s",
        "bf16 TFLOP/s",
        "L2 MiB",
        "SMs",
        "GPU link GB/s",
        "PCIe",
        "host GB/s",
    )
    print(table(header, rows))
    return 0
