"""Speedup of fixed k = 3 against the batch size, with and without routing overlap.

python examples/sweep_batch_sizes.py
"""

import simspec

base = simspec.load_scenario(
    None,
    ["workload.output_tokens=48", 'policies=[{name = "fixed", draft_tokens = 3}]'],
)
print("batch  independent  overlap 0.38")
for batch in (1, 4, 16, 64):
    row = []
    for overlap in (0.0625, 0.38):  # 0.0625 = k_e/N: the chance level of Qwen3-30B-A3B
        s = simspec.with_overrides(
            base,
            {
                "workload.concurrency": batch,
                "workload.num_requests": batch,
                "routing.overlap": overlap,
            },
        )
        row.append(simspec.run(s).get("fixed-3").speedup_vs_no_spec)
    print(f"{batch:>5}  {row[0]:>11.3f}  {row[1]:>12.3f}")
