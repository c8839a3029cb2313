"""Recording routing and acceptance traces from Hugging Face MoE models (``simspec record``).

:mod:`.hooks` attaches forward hooks to every router of a ``transformers`` MoE model and keeps
the experts it chose; :mod:`.trace` decodes prompts greedily with a drafter proposing at every
token and returns a :class:`~simspec.routing.trace.RoutingTrace`. torch and transformers (the
``record`` extra) are imported lazily, inside the functions.
"""

from __future__ import annotations

from .hooks import RouterRecorder, available_families, router_modules, tiny_model
from .trace import record_trace

__all__ = ["RouterRecorder", "available_families", "record_trace", "router_modules", "tiny_model"]
