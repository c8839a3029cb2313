"""Run the embedded default scenario (made small) and print each policy's speedup.

python examples/run_scenario.py
"""

import simspec

scenario = simspec.load_scenario(
    None, ["workload.num_requests=8", "workload.output_tokens=64", "workload.concurrency=4"]
)
result = simspec.run(scenario)
print(f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.gpu}")
for row in result.policies:
    print(
        f"{row.label:>8}: TPOT {row.tpot_ms:.3f} ms, acceptance length "
        f"{row.acceptance_length:.3f}, speedup {row.speedup_vs_no_spec:.3f}x"
    )
