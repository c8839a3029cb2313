"""Which fixed draft length k to run at batch 1 and batch 8, with 95 % confidence intervals.

The embedded default scenario (Qwen3-30B-A3B + EAGLE-3 on one H100), shortened: for each batch
size, fixed k = 0..4, two online policies and the oracle run under 3 seeds; the best k is the
argmax of the mean speedups, and the k whose paired difference to it contains 0 are as good.
Same as `simspec recommend --batch 1,8 --max-k 4 --set ...`.

python examples/recommend_k.py
"""

import simspec
from simspec.analysis.recommend import (
    batch_scenario,
    markdown_table,
    online_policy_data,
    recommend_batches,
)

scenario = simspec.load_scenario(
    None, ["workload.num_requests=8", "workload.output_tokens=48", 'routing.mode="analytic"']
)
online = online_policy_data(scenario, None)  # threshold and cost_aware with their defaults
batches = [(b, batch_scenario(scenario, b, 4, online)) for b in (1, 8)]
recommendations = recommend_batches(batches, replications=3)
print(markdown_table(recommendations), end="")
for rec in recommendations:
    means = {k: c.speedup.mean for k, c in rec.fixed}
    assert rec.best_k == max(means, key=means.__getitem__)  # the argmax of the mean speedups
    ties = ", ".join(str(k) for k, _ in rec.runners_up) or "none"
    print(
        f"batch {rec.batch}: k = {rec.best_k}, {rec.expected_speedup.text()}x; within noise: {ties}"
    )
