"""Hints printed before a long simulation: what would make it faster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Simulated tokens (requests x output tokens x runs) of Monte-Carlo routing above which
#: run, compare, sweep and validate suggest analytic routing (a run worth waiting less for).
SLOW_MONTE_CARLO_TOKENS = 100_000


def analytic_routing_hint(scenarios: Sequence[Any], oracle: bool) -> str | None:
    """A note suggesting ``routing.mode = "analytic"`` when the Monte-Carlo runs among
    ``scenarios`` are long (None otherwise)."""
    from simspec.analysis.experiment import work_tokens

    sampled = [s for s in scenarios if s.routing.mode == "monte_carlo"]
    tokens = sum(work_tokens(s, oracle) for s in sampled)
    if tokens < SLOW_MONTE_CARLO_TOKENS:
        return None
    return (
        f"note: {tokens:,} simulated tokens with Monte-Carlo routing (sampled expert sets); "
        "--set 'routing.mode=\"analytic\"' uses the expected unique experts instead and "
        "runs much faster, without the sampling noise"
    )


def routing_overlap_hint(scenario: Any, speculates: bool | None = None) -> str | None:
    """A note when a speculative run on an MoE target leaves the routing's lag overlap unset
    (None otherwise). ``speculates``: whether the command drafts (None: whether one of the
    scenario's policies does; ``recommend`` searches draft lengths of its own).

    Unset means independent routing: a verify pass's tokens share experts only by chance, the
    costliest verify pass any router gives. Published routers span adjacent-token overlaps
    from about chance to 0.6, simspec's validation predicts every row at the default
    scenario's 0.38, and ``validation/SENSITIVITY.md`` shows how far the predicted speedups
    move over that range, so the choice should be the user's, not a silent default.
    """
    routing = scenario.routing
    if not scenario.target.is_moe or routing.mode == "trace":
        return None
    if routing.overlap is not None or routing.overlaps is not None:
        return None
    from simspec.config.load import read_scenario_data
    from simspec.policies.fixed import is_plain_decoding

    if speculates is None:
        speculates = any(not is_plain_decoding(p.policy) for p in scenario.policies)
    if not speculates:
        return None
    validated = read_scenario_data(None)[0]["routing"]["overlap"]  # what validation predicts at
    return (
        "note: routing.overlap is unset, so tokens route independently and every verify token "
        "adds experts as if unrelated to its neighbours (the costliest verify pass); published "
        "routers measure adjacent-token overlaps from about chance to 0.6, simspec's validation "
        f"runs {validated:g} and validation/SENSITIVITY.md shows what the choice moves: set "
        "routing.overlap (simspec routing stats measures it on a routing trace)"
    )


#: Baseline TTFT over the lowest other policy's above which :func:`lockstep_hint` speaks.
LOCKSTEP_TTFT_RATIO = 1.2


def lockstep_hint(scenario: Any, result: Any) -> str | None:
    """A note when a closed loop with equal request lengths ran in lockstep and it shows in
    TTFT (None otherwise).

    Requests of equal length finish together under plain decoding, and their replacements
    arrive together and are prefilled as one group, so the k = 0 baseline's TTFT includes a
    whole batch's prefill, while speculation (whose requests finish apart) does not: the TTFT
    difference is the lockstep's, not the engine's. Length jitter spreads the finishes as real
    workloads do.
    """
    w = scenario.workload
    if w.loop != "closed" or w.length_jitter > 0:
        return None
    base = next((p for p in result.policies if p.is_baseline), None)
    others = [p.ttft_ms for p in result.policies if not p.is_baseline and not p.is_oracle]
    if base is None or not others or base.ttft_ms <= LOCKSTEP_TTFT_RATIO * min(others):
        return None
    return (
        f"note: {base.label}'s TTFT ({base.ttft_ms:.1f} ms vs {min(others):.1f}) comes from "
        "lockstep: with workload.length_jitter = 0 its requests finish together and their "
        "replacements are prefilled as a group; --set workload.length_jitter=0.5 gives TTFT "
        "as an engine with varied request lengths sees it"
    )


def preset_mismatch_hint(scenario: Any) -> str | None:
    """A note when the scenario's fitted profile was fitted under another engine preset: its
    fitted parameters still outrank this preset (:attr:`Scenario.roofline`), and they carry the
    other preset's overheads with them."""
    profile = scenario.profile
    if profile is None or not profile.serving_fit:
        return None
    fitted_under = profile.engine_preset
    if fitted_under is None or fitted_under == scenario.engine.preset:
        return None
    return (
        f"note: {profile.source} was fitted under engine preset {fitted_under!r}, this scenario "
        f"uses {scenario.engine.preset!r}; the profile's fitted {', '.join(profile.serving_fit)} "
        "outrank the preset (refit under this preset for its numbers)"
    )


def sweep_table_hint(path: str | None, command: str) -> str | None:
    """A note when the scenario file has a ``[sweep]`` table that ``command`` (run, compare,
    recommend) does not read: it simulates the base scenario, not the sweep's points, and
    saying so keeps the table from being silently ignored (None otherwise)."""
    if not path:
        return None
    from simspec.config.load import read_scenario_data

    data, source = read_scenario_data(path)
    if "sweep" not in data:
        return None
    return (
        f"note: {source} has a [sweep] table, which `simspec {command}` ignores: it simulates "
        f"the base scenario only; `simspec sweep {source} --out DIR` runs the sweep's points"
    )
