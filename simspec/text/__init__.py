"""What the text fixes before any policy runs: acceptance processes (which drafts the target
would accept, and the drafter's confidences), the workload, and the reference sequences."""
