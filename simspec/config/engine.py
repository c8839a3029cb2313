"""The serving engine a scenario imitates (scenario table ``[engine]``).

Real speculative iterations cost more than draft steps plus one verify pass: launches and
scheduling per pass and per draft step, the drafter's extend of the accepted tokens, verify
bookkeeping and collectives. An engine preset is a named set of those overheads (data files
under ``simspec/catalog/engines``); ``ideal`` keeps the physics-only cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """The engine whose overheads the cost model adds (scenario table ``[engine]``)."""

    preset: str = param(
        "ideal",
        "engine preset: ideal (physics only, no engine overheads) or a named engine's fitted "
        "overheads",
    )
