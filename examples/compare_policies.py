"""Compare budget policies with the hindsight oracle on the paper-A scenario (shortened).

python examples/compare_policies.py
"""

from pathlib import Path

import simspec

path = Path(__file__).resolve().parents[1] / "scenarios" / "limits-of-speculation.toml"
scenario = simspec.load_scenario(path, ["workload.num_requests=2", "workload.output_tokens=200"])
result = simspec.compare(scenario)
for row in result.policies:
    print(
        f"{row.label:>36}: speedup {row.speedup_vs_no_spec:.3f}x, "
        f"gap to oracle {row.gap_to_oracle_pct:.1f} %"
    )
assert result.oracle is not None
delta = result.oracle.delta
print(
    f"Delta space: boundary slope {delta['fitted_slope_s_per_token'] * 1e3:.3f} ms/token, "
    f"oracle {delta['oracle_time_per_token_s'] * 1e3:.3f} ms/token, "
    f"{delta['misclassified_fraction'] * 100:.1f} % misclassified "
    f"(random cost tables {delta['control_random_tables_misclassified_fraction'] * 100:.1f} %), "
    f"AUC {delta['auc']:.2f} (random cost tables {delta['control_random_tables_auc']:.2f})"
)
