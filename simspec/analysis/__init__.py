"""What runs produce and what they mean: typed results, the one experiment driver, the hindsight
oracle and the Delta-space analysis of its decisions."""
