"""Checks only a whole scenario can tell, run by the loader so `validate` catches them.

* **Drafters.** A drafter serves the targets its catalog entry lists (``targets``): an EAGLE-3
  head is trained on one target's hidden states, and a dense draft model lists every target that
  shares its tokenizer (vocabulary). A ``[model]`` table that names a target but no drafter
  gets the target's own drafter (:func:`default_drafter`: its EAGLE-3 head, else the first dense
  draft model that lists it); a drafter built for another target is an error listing those that
  fit (:func:`check_drafter`). An MTP drafter needs a target with MTP modules
  (:func:`check_mtp`).
* **Routing statistics.** Overlap profiles must be reachable by a top-k router with the
  scenario's expert popularities (lag overlaps such as ``[0.1, 0.9, 0.95]`` are not). The
  check builds the same routing models the run builds (:class:`~simspec.text.reference.
  ReferenceSet`), with the scenario's seed, so every statistic a run would reject is rejected
  at load time, with the file name.
"""

from __future__ import annotations

import functools
from typing import Any

from simspec import catalog
from simspec.config.scenario import ModelConfig
from simspec.errors import InputError, ScenarioError
from simspec.physics.drafters import DrafterSpec
from simspec.physics.models import ModelShape, ModelSpec
from simspec.routing.config import RoutingConfig
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.reference import ReferenceSet
from simspec.text.workload import WorkloadConfig


def compatible_drafters(target: str) -> list[str]:
    """Catalog drafters that serve ``target``: its EAGLE-3 heads first, then its dense drafts
    and MTP drafters, by name, and last the n-gram drafters every target has (never a
    target's default: a lookup's acceptance is the text's, not the model's)."""
    specs = [catalog.get_drafter(name) for name in catalog.drafter_names()]
    fitting = [d for d in specs if d.serves(target)]
    order = sorted(fitting, key=lambda d: (d.kind == "ngram", d.kind != "eagle3", d.name))
    return [d.name for d in order]


def _none_serves(target: str) -> str:
    return (
        f"a drafter for target {target!r}, but no catalog drafter lists it in its targets "
        "(add one under simspec/catalog/drafters/ or choose another target)"
    )


def default_drafter(target: str, source: str) -> str:
    """The drafter a ``[model]`` table without ``drafter`` gets: the target's own."""
    names = compatible_drafters(target)
    if not names or catalog.get_drafter(names[0]).kind == "ngram":
        raise ScenarioError(source, "model.drafter", _none_serves(target), "nothing")
    return names[0]


def fill_default_drafter(model: Any, source: str) -> Any:
    """``model`` (the raw ``[model]`` table) with its target's drafter when it names none."""
    if not isinstance(model, dict) or model.get("drafter") is not None:
        return model
    target = model.get("target", ModelConfig().target)
    if not isinstance(target, str) or target not in catalog.model_names():
        return model  # the table's own checks report the target
    return {**model, "drafter": default_drafter(target, source)}


def _mismatch(target: str, drafter: DrafterSpec) -> tuple[str, str]:
    """What a drafter for ``target`` must be, and what ``drafter`` was built for (messages)."""
    names = compatible_drafters(target)
    expected = (
        f"a drafter built for target {target!r}: " + ", ".join(names)
        if names
        else _none_serves(target)
    )
    return expected, ", ".join(drafter.targets) or "no listed target"


def check_drafter(target: str, drafter: DrafterSpec, source: str) -> None:
    """Raise ScenarioError when ``drafter`` does not serve ``target`` (module docstring)."""
    if drafter.serves(target):
        return
    expected, built_for = _mismatch(target, drafter)
    raise ScenarioError(
        source,
        "model.drafter",
        expected,
        f"{drafter.name!r}, built for {built_for}",
        "Leave model.drafter unset to get the target's own drafter.",
    )


def check_mtp(target: ModelSpec, drafter: DrafterSpec, source: str) -> None:
    """An MTP drafter runs the target's own MTP modules: the target must have as many as the
    drafter uses (``mtp_layers``, config.json ``num_nextn_predict_layers``), and the layer
    kinds its modules borrow (a sliding-window layer, a dense FFN width)."""
    if drafter.kind != "mtp":
        return
    if drafter.mtp_attention == "sliding" and target.attention.other_layers != "sliding":
        raise ScenarioError(
            source,
            "model.drafter",
            f"an MTP drafter whose modules' sliding-window attention the target has; "
            f"{target.name!r} has no sliding-window layers (attention.other_layers = "
            f"{target.attention.other_layers!r})",
            f"the MTP drafter {drafter.name!r} (mtp_attention = 'sliding')",
        )
    if drafter.mtp_ffn == "dense" and target.ffn.dense_intermediate_size <= 0:
        raise ScenarioError(
            source,
            "model.drafter",
            f"an MTP drafter whose modules' dense FFN width the target states; {target.name!r} "
            "has ffn.dense_intermediate_size = 0",
            f"the MTP drafter {drafter.name!r} (mtp_ffn = 'dense')",
        )
    if drafter.num_layers <= target.mtp_layers:
        return
    raise ScenarioError(
        source,
        "model.drafter",
        f"a drafter whose {drafter.num_layers} MTP module(s) the target has; {target.name!r} "
        f"has {target.mtp_layers} (mtp_layers, config.json num_nextn_predict_layers)",
        f"the MTP drafter {drafter.name!r}",
    )


def drop_stale_drafter(data: dict[str, Any], keys: list[str], *, strict: bool = False) -> None:
    """Overrides that change the target but not a drafter the scenario names, which does not
    serve the new target: drop that drafter, so the loader picks the new target's own (a sweep
    case or :func:`~simspec.config.load.with_overrides` naming only a target); with ``strict``
    (``--set`` on the command line) raise instead, as the same mismatch written in the file
    does. A drafter the overrides set themselves is kept (and checked by the loader).
    """
    if "model.target" not in keys or any(k in ("model", "model.drafter") for k in keys):
        return
    model = data.get("model")
    if not isinstance(model, dict):
        return
    target, drafter = model.get("target"), model.get("drafter")
    if (
        isinstance(target, str)
        and isinstance(drafter, str)
        and drafter in catalog.drafter_names()
        and drafter not in compatible_drafters(target)
    ):
        if not strict:
            del model["drafter"]
            return
        expected, built_for = _mismatch(target, catalog.get_drafter(drafter))
        raise ScenarioError(
            "--set model.target",
            "model.drafter",
            expected,
            f"{drafter!r} named by the scenario, built for {built_for}",
            "Set the drafter too (--set model.drafter=NAME), or leave model.drafter unset in "
            "the file to get the target's own drafter.",
        )


@functools.lru_cache(maxsize=64)
def _routing_problem(
    routing: RoutingConfig, shape: ModelShape, max_draft_tokens: int, seed: int
) -> tuple[str, str, str] | None:
    """(key path, expected, found) when the run's routing models cannot be built."""
    try:
        ReferenceSet(
            seed=seed,
            workload=WorkloadConfig(),
            acceptance=AcceptanceConfig(),
            routing=routing,
            shape=shape,
            max_draft_tokens=max_draft_tokens,
        )
    except InputError as err:
        return err.key_path, err.expected, err.found
    return None


def check_routing(
    routing: RoutingConfig, shape: ModelShape, max_draft_tokens: int, seed: int, source: str
) -> None:
    """Raise ScenarioError when the overlap statistics are out of a top-k router's reach."""
    problem = _routing_problem(routing, shape, max_draft_tokens, seed)
    if problem is not None:
        key, expected, found = problem
        raise ScenarioError(source, key, expected, found)
