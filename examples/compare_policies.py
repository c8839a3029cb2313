"""Compare budget policies with the hindsight oracle on the paper-A scenario (shortened).

python examples/compare_policies.py
"""

from pathlib import Path

from simspec.compare import compare
from simspec.config.scenario import load_scenario

path = Path(__file__).resolve().parents[1] / "scenarios" / "limits-of-speculation.toml"
scenario = load_scenario(path, ["workload.num_requests=2", "workload.output_tokens=200"])
comparison = compare(scenario)
for row in comparison.results["policies"]:
    print(
        f"{row['label']:>36}: speedup {row['speedup_vs_no_spec']:.3f}x, "
        f"gap to oracle {row['gap_to_oracle_pct']:.1f} %"
    )
delta = comparison.results["oracle"]["delta"]
print(
    f"Delta space: boundary slope {delta['fitted_slope_s_per_token'] * 1e3:.3f} ms/token, "
    f"oracle {delta['oracle_time_per_token_s'] * 1e3:.3f} ms/token, "
    f"local-condition violations {delta['local_condition_violations']}"
)
