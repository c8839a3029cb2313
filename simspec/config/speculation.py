"""The shape of a speculation step (scenario table ``[speculation]``).

A policy decides how many draft steps (the depth k) each request takes; this table decides
whether the drafts form a chain (one token per step) or a tree (``topk`` candidates per step,
the best ``num_draft_tokens`` of them verified), as SGLang's ``speculative_eagle_topk`` and
``speculative_num_draft_tokens`` do.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculationConfig:
    """Chain or tree drafts (scenario table ``[speculation]``)."""

    topk: int = param(1, "draft candidates kept per step (1 = a chain)", ge=1, le=64)
    num_draft_tokens: int = param(
        0, "draft tokens verified per request and step (0 = every node of the chain)", ge=0, le=1024
    )
