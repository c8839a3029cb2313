"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

from simspec import catalog
from simspec.analysis.experiment import run_experiment
from simspec.config.load import apply_overrides, scenario_from_dict
from simspec.config.scenario import Scenario
from simspec.costs.roofline import RooflineCostModel

#: (target, drafter, dense draft model or None): a draft head, and a dense draft model.
DRAFTER_CASES = [
    ("qwen3-30b-a3b", "eagle3-qwen3-30b-a3b", None),
    ("qwen3-8b", "qwen3-0.6b-draft", "qwen3-0.6b"),
]


def roofline_model(
    target: str, drafter: str, draft_model: str | None = None, num_gpus: int = 1
) -> RooflineCostModel:
    """The roofline cost model of catalog names on H100 SXMs."""
    return RooflineCostModel(
        target=catalog.get_model(target),
        drafter=catalog.get_drafter(drafter),
        gpu=catalog.get_gpu("h100-sxm"),
        num_gpus=num_gpus,
        draft_model=None if draft_model is None else catalog.get_model(draft_model),
    )


def tiny(*overrides: str, policies: list[dict[str, Any]] | None = None) -> Scenario:
    """A fast scenario (few short requests) with ``key=value`` overrides applied."""
    data: dict[str, Any] = {
        "name": "tiny",
        "seed": 1,
        "model": {"target": "qwen3-30b-a3b", "drafter": "eagle3-qwen3-30b-a3b"},
        "routing": {"overlap": 0.38},
        "acceptance": {"process": "iid", "alpha": 0.7},
        "workload": {
            "loop": "closed",
            "concurrency": 2,
            "num_requests": 4,
            "prompt_tokens": 64,
            "output_tokens": 24,
        },
        "policies": policies
        if policies is not None
        else [{"name": "fixed", "draft_tokens": 0}, {"name": "fixed", "draft_tokens": 3}],
    }
    return scenario_from_dict(apply_overrides(data, overrides), "tiny.toml")


def simulate(scenario: Scenario, *, oracle: bool = False) -> dict[str, Any]:
    """The results JSON object of ``scenario`` (through the one experiment driver)."""
    return run_experiment(scenario, oracle=oracle).to_dict()


def declared(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the scenario's own policies (without an added baseline or the oracle)."""
    return [
        r
        for r in results["policies"]
        if not r["is_oracle"] and not (r["is_baseline"] and r["label"] == "no-spec")
    ]
