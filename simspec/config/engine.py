"""The serving engine a scenario imitates (scenario table ``[engine]``).

Real speculative iterations cost more than draft steps plus one verify pass: launches and
scheduling per pass and per draft step, the drafter's extend of the accepted tokens, verify
bookkeeping and collectives. An engine preset is a named set of those overheads (data files
under ``simspec/catalog/engines``); ``ideal`` keeps the physics-only cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec import catalog
from simspec.errors import FieldError
from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """The engine whose overheads the cost model adds (scenario table ``[engine]``)."""

    preset: str = param(
        "ideal",
        "engine preset, a name from simspec/catalog/engines: ideal (physics only, no engine "
        "overheads), or sglang, vllm, trtllm (overheads fitted on that engine's published rows)",
    )
    cuda_graphs: bool = param(
        True,
        "decode passes and draft steps replay CUDA graphs: each kernel costs the GPU's "
        "kernel_floor_graph_s instead of kernel_floor_eager_s",
    )
    overlap_scheduling: bool | None = param(
        None,
        "the engine plans the next iteration while the GPU runs this one during speculative "
        "decoding (TensorRT-LLM's overlap scheduler, vLLM's async scheduling), hiding a "
        "speculative iteration's host synchronisations (costs.verify_overhead_s); unset = the "
        "preset's setting (sglang, vllm: false; trtllm: true), else false",
    )
    scheduler_recv_interval: int = param(
        1,
        "the scheduler takes in newly arrived requests only every this many decode iterations, "
        "and at once after a prefill or when the batch is empty (SGLang's "
        "--scheduler-recv-interval, default 1: every iteration); a request waits up to that "
        "many iterations before its prefill, and its time to first token holds the wait",
        ge=1,
        le=10000,
    )

    def __post_init__(self) -> None:
        names = catalog.engine_names()
        if self.preset not in names:
            raise FieldError("preset", "one of " + ", ".join(map(repr, names)), self.preset)
