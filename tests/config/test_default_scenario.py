"""The embedded default scenario: a workload a served engine could see."""

import simspec
from simspec.config.load import read_scenario_data, scenario_from_dict


def test_the_default_workload_is_not_lockstep():
    """With equal output lengths every request of a batch finishes at one step and the next
    ones are prefilled together, so plain decoding's TTFT counts a whole group's prefill while
    speculation (whose requests finish at scattered steps) does not. Spread lengths make the
    time to the first token the same for every policy up to a few per cent: the prefill of one
    request plus at most one step's wait."""
    data, _ = read_scenario_data(None)
    assert data["workload"]["length_jitter"] > 0
    rows = simspec.run(None).policies
    ttft = [r.ttft_ms for r in rows]
    assert max(ttft) / min(ttft) < 1.1, ttft
    # and the equal-length run shows the artefact (so this test can fail)
    data["workload"]["length_jitter"] = 0.0
    lockstep = simspec.run(scenario_from_dict(data, "default, equal lengths")).policies
    assert lockstep[0].ttft_ms > 1.3 * min(r.ttft_ms for r in lockstep[1:])
