"""The roofline cost model: every pass priced by :func:`simspec.costs.passes.target_pass_cost`.

Split over GPUs (:mod:`simspec.costs.parallel`) the drafter runs with the target's tensor
parallelism, as EAGLE-3 does in SGLang and vLLM: each GPU reads 1/t of the head's weights and
KV cache, and each head layer ends in two all-reduces. Besides draft steps and the target pass, a
speculative iteration of a real engine does more (:meth:`RooflineCostModel.speculation_overhead_s`):
verify bookkeeping kernels, host synchronisations an engine without an overlap scheduler
exposes, and the drafter's extend over the accepted tokens (EAGLE-3 in SGLang/vLLM: the
accepted tokens' target hidden states are fed through the head before the next draft). That
extend is the draft phase's first pass, widened: its logits give the first draft token, and the
engine then runs k - 1 more head passes for k draft tokens (SGLang's ``draft_forward`` skips
the last of its ``speculative_num_steps`` forwards, "we get 1 token from draft prefill";
vLLM's EAGLE ``propose`` returns after that first forward when ``num_speculative_tokens`` is
1 and loops k - 1 times otherwise). The draft phase keeps its k one-row passes (the depths a
policy prices), so the first extend pass adds only what its committed rows add to a one-row
pass (:meth:`RooflineCostModel._extend_s`). A draft step costs its kernels' floors
(:func:`~simspec.physics.launches.draft_step_kernels`) besides its weights, KV reads and
collectives, and its sampling over the draft vocabulary (:func:`draft_sampling_wave_s`). An
MTP drafter's step (:mod:`simspec.physics.mtp`) is one pass of the target's own MTP module,
split over the GPUs as the target is: its attention, its MoE layer loading the union of the
drafting tokens' experts, the full-vocabulary LM head, the 2h -> h projection and the kernels
of both. An n-gram drafter (``kind = "ngram"``,
:mod:`simspec.physics.drafters`) runs nothing on the GPU: its draft steps and extend passes
cost 0, and its host lookup, once per speculative iteration over every running request
(:meth:`~simspec.physics.drafters.DrafterSpec.lookup_s`), is part of the iteration's
speculation overhead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from simspec.costs.base import (
    COST_MODELS,
    draft_phase_by_depth,
    prefill_unique_experts,
    tree_draft_phase_by_depth,
)
from simspec.costs.kernels import _add, _batch_sum
from simspec.costs.parallel import Parallelism, allreduce_s, attention_share
from simspec.costs.passes import (
    PassConstants,
    _weights,
    host_overhead_s,
    pass_constants,
    pass_cost,
    pass_cost_many,
    pass_terms,
)
from simspec.params import PassCost, RooflineParams
from simspec.physics.drafters import DrafterSpec
from simspec.physics.experts import independent_union
from simspec.physics.hardware import GpuSpec
from simspec.physics.launches import VERIFY_KERNELS, draft_step_kernels
from simspec.physics.models import ModelSpec
from simspec.physics.mtp import MTP_STEP_KERNELS, projection_bytes

#: Passes over a draft step's logits per row: the softmax reads them and writes the
#: probabilities (one online pass), the top-k reads the probabilities.
DRAFT_SAMPLING_PASSES = 3
#: Bytes of one draft logit or probability (fp32).
DRAFT_PROBABILITY_BYTES = 4.0


def draft_sampling_wave_s(vocab_size: int, gpu: GpuSpec) -> float:
    """One wave of a draft step's sampling: softmax and top-k over the draft vocabulary.

    After every draft step SGLang's EAGLE worker takes ``softmax`` of the head's logits and
    ``fast_topk`` of the probabilities (``torch.max`` for topk = 1, else ``torch.topk``) over
    the draft vocabulary, one row per drafted node (batch × topk rows; the draft extend
    after a verify samples one row per request): python/sglang/srt/speculative/eagle_worker.py
    and spec_utils.py, https://github.com/sgl-project/sglang. Both kernels run one thread
    block per row over the whole row, so a row reads and writes
    :data:`DRAFT_SAMPLING_PASSES` · V · 4 bytes at one SM's share of HBM bandwidth, and a
    wave of up to one row per SM runs at once (the form of the verify's top-p
    renormalisation, :func:`simspec.costs.passes.renorm_wave_s`): t = ceil(rows / SMs) ·
    this. The kernels' floors are in :data:`~simspec.physics.launches.DRAFT_STEP_KERNELS`.
    Under tensor parallelism every rank samples the gathered rows, so t does not shrink.
    """
    row_bytes = DRAFT_SAMPLING_PASSES * vocab_size * DRAFT_PROBABILITY_BYTES
    return row_bytes * max(gpu.num_sms, 1) / gpu.hbm_bytes_per_s


@COST_MODELS.register("roofline")
@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineCostModel:
    """Per-kernel roofline of target passes and draft steps (module docstring)."""

    target: ModelSpec
    drafter: DrafterSpec
    gpu: GpuSpec
    params: RooflineParams = RooflineParams()
    num_gpus: int = 1
    tensor_parallel: int = 0  # 0 = num_gpus
    expert_parallel: int = 1
    draft_model: ModelSpec | None = None  # the dense draft model, when drafter.kind == "dense"
    # Per-model constants, derived once here rather than in every pass (no spec hashing there).
    _target: PassConstants = field(init=False, repr=False, compare=False)
    _prefill: PassConstants = field(init=False, repr=False, compare=False)  # samples no drafts
    _draft: PassConstants | None = field(init=False, repr=False, compare=False)
    _draft_layers: int = field(init=False, repr=False, compare=False)
    _projection_bytes: float = field(init=False, repr=False, compare=False)  # an MTP module's
    _split: Parallelism = field(init=False, repr=False, compare=False)
    _head_bytes: float = field(init=False, repr=False, compare=False)  # a head step's weights
    _head_kv: float = field(init=False, repr=False, compare=False)  # its KV bytes per token
    _head_fixed_s: float = field(init=False, repr=False, compare=False)  # floors + host time
    _sampling_wave_s: float = field(init=False, repr=False, compare=False)  # draft_sampling_wave_s
    _weightless: bool = field(init=False, repr=False, compare=False)  # an n-gram drafter

    def __post_init__(self) -> None:
        split = Parallelism.of(self.num_gpus, self.tensor_parallel, self.expert_parallel)
        object.__setattr__(self, "_split", split)
        target = pass_constants(
            self.target.shape,
            self.gpu,
            self.params,
            self.num_gpus,
            parallel=split,
            hidden_size=self.target.hidden_size,
        )
        object.__setattr__(self, "_target", target)
        # A prefill samples one token per prompt and masks causally: no verified drafts to
        # renormalise, no verify mask; its attention runs in the prefill form.
        prefill = dataclasses.replace(
            target, renorm_wave_s=0.0, mask_bytes_per_entry=0.0, prefill=True
        )
        object.__setattr__(self, "_prefill", prefill)
        constants = None
        projection = 0.0
        if self.draft_model is not None and self.drafter.kind == "mtp":
            # The target's own module: split as the target is, plus its projection's kernels.
            constants = pass_constants(
                self.draft_model.shape,
                self.gpu,
                self.params,
                self.num_gpus,
                parallel=split,
                hidden_size=self.draft_model.hidden_size,
            )
            extra = MTP_STEP_KERNELS * self.gpu.kernel_floor_s(self.params.cuda_graphs)
            constants = dataclasses.replace(
                constants, floor_s=constants.floor_s + extra, renorm_wave_s=0.0
            )
            projection = projection_bytes(self.draft_model)
        elif self.draft_model is not None:  # a dense draft model: tensor parallel like the target
            t = split.tensor
            constants = pass_constants(
                self.draft_model.shape,
                self.gpu,
                self.params,
                t,
                parallel=Parallelism(
                    tensor=t, expert=1, expert_shards=t, attention_groups=split.attention_groups
                ),
                hidden_size=self.draft_model.hidden_size,
            )
        object.__setattr__(self, "_draft", constants)
        object.__setattr__(self, "_projection_bytes", projection)
        draft_moe = 0 if self.draft_model is None else self.draft_model.shape.num_moe_layers
        object.__setattr__(self, "_draft_layers", draft_moe)
        object.__setattr__(self, "_head_bytes", self.drafter.head_weight_bytes())
        head_kv = self.drafter.head_kv_bytes_per_token(self.target.kv_cache_bytes)
        object.__setattr__(self, "_head_kv", head_kv)
        floors = draft_step_kernels(max(self.drafter.num_layers, 1)) * self.gpu.kernel_floor_s(
            self.params.cuda_graphs
        )
        object.__setattr__(self, "_head_fixed_s", floors + self.params.draft_step_overhead_s)
        vocab = self.drafter.draft_vocab_size or self.target.shape.vocab_size
        object.__setattr__(self, "_sampling_wave_s", draft_sampling_wave_s(vocab, self.gpu))
        object.__setattr__(self, "_weightless", self.drafter.kind == "ngram")

    @property
    def target_constants(self) -> PassConstants:
        """The target pass's per-model constants (:func:`~simspec.costs.passes.pass_constants`)."""
        return self._target

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """See :func:`simspec.costs.passes.target_pass_cost`."""
        return pass_cost(self._target, tokens_per_request, context_tokens, unique_experts)

    def verify_totals(
        self,
        tokens_per_request: np.ndarray,
        context_tokens: np.ndarray,
        unique_experts: np.ndarray,
        counts: np.ndarray | None = None,
        unique_index: np.ndarray | None = None,
    ) -> np.ndarray:
        """Totals of N passes (rows) as one array expression: :func:`~simspec.costs.passes.
        pass_cost_many` (the fast form behind :func:`simspec.costs.batch.verify_totals`)."""
        return pass_cost_many(
            self._target,
            tokens_per_request,
            context_tokens,
            unique_experts,
            counts=counts,
            unique_index=unique_index,
        )

    def prefill(self, prompt_tokens: np.ndarray) -> PassCost:
        """Prefill of new prompts (see :func:`prefill_unique_experts`)."""
        prompts = np.asarray(prompt_tokens, dtype=float)
        unique = prefill_unique_experts(self._target.shape, prompts)
        return pass_cost(self._prefill, prompts, np.zeros_like(prompts), unique)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """One draft token for each request in ``context_tokens`` (the drafting ones).

        The drafter runs with the target's tensor parallelism (module docstring).
        """
        ctx = np.asarray(context_tokens, dtype=float)
        if len(ctx) == 0:
            return 0.0
        return self._drafter_pass(np.ones_like(ctx), ctx)

    def draft_step_totals(
        self, context_tokens: np.ndarray, counts: np.ndarray | None = None
    ) -> np.ndarray:
        """:meth:`draft_step` of N steps at once: ``context_tokens`` (N, B), one step per row.

        Entry p equals ``draft_step(context_tokens[p])`` bit for bit; ``counts`` (B,) as in
        :func:`simspec.costs.passes.pass_cost_many` (exact for integer contexts).
        """
        ctx = np.asarray(context_tokens, dtype=float)
        if ctx.shape[-1] == 0:
            return np.zeros(len(ctx))
        weights = None if counts is None else np.asarray(counts, dtype=float)
        return np.asarray(self._drafter_pass(np.ones_like(ctx), ctx, weights), dtype=float)

    def draft_phase_s(self, context_tokens: np.ndarray, draft_tokens: np.ndarray) -> float:
        """One step's draft phase: :func:`simspec.costs.base.draft_phase_by_depth`, the same
        number (the fast form behind :func:`simspec.costs.batch.draft_phase_s`).

        A draft head's step reads its batch through two sums only, the requests n_j still
        drafting at depth j and their KV entries Σ (c_b + j) (:meth:`_head_pass`). On integer
        contexts both are exact integers, so they are formed here from per-depth counts and
        context sums, with no array per depth, and each step is the float
        :meth:`draft_step` returns. Anything else (a dense draft model, float contexts, an
        overridden :meth:`draft_step`) takes the general path.
        """
        ks, ctx = np.asarray(draft_tokens), np.asarray(context_tokens)
        general = self._draft is not None or ctx.dtype.kind not in "iu" or ks.dtype.kind not in "iu"
        if general:
            return draft_phase_by_depth(self, ctx, ks)
        asked = ks.tolist()
        depth = max(asked, default=0)
        if depth <= 0:
            return 0.0
        lowest = min(asked)
        if lowest == depth:  # every request drafts every depth (a fixed k)
            drafting, context = [len(asked)] * depth, [int(np.add.reduce(ctx))] * depth
        else:  # requests and context sums at depths >= j: suffix sums over their k
            low = min(lowest, 0)  # a negative k drafts nothing: as 0
            counts = np.bincount(ks - low)[1 - low :].tolist()  # k = 1..depth
            sums = [int(s) for s in np.bincount(ks - low, weights=ctx)[1 - low :].tolist()]
            drafting = list(accumulate(reversed(counts)))[::-1]
            context = list(accumulate(reversed(sums)))[::-1]
        if context[0] + drafting[0] * depth >= 2**53:  # beyond exact float integers
            return draft_phase_by_depth(self, ctx, ks)
        steps = [
            self._head_pass(float(n), float(total + n * j), requests=float(n))
            for j, (n, total) in enumerate(zip(drafting, context, strict=True), start=1)
        ]
        return float(sum(steps))

    def tree_draft_phase_s(
        self, context_tokens: np.ndarray, draft_tokens: np.ndarray, topk: int | np.ndarray
    ) -> float:
        """One step's tree draft phase: :func:`simspec.costs.batch.tree_draft_phase_s`, the
        same number from the head's two sums. Step 1 forwards one row per request with
        k_b >= 1, step j > 1 its ``topk`` rows (``topk`` (B,): each request's own), each at
        context c_b + j - 1: n_j = Σ w_b rows attending to Σ w_b c_b + j·n_j KV entries in
        all, exact integers on integer contexts and topk, so each step is the float
        :meth:`draft_step` returns for those rows. Anything else takes the general path."""
        ks, ctx = np.asarray(draft_tokens), np.asarray(context_tokens)
        rows = np.broadcast_to(np.asarray(topk), ks.shape)
        kinds = (ctx.dtype.kind, ks.dtype.kind, rows.dtype.kind)
        if self._draft is not None or any(k not in "iu" for k in kinds):
            return tree_draft_phase_by_depth(self, ctx, ks, rows)
        depth = int(ks.max(initial=0))
        if depth <= 0:
            return 0.0
        if int(np.add.reduce(ctx)) * max(int(rows.max()), 1) + int(rows.sum()) * depth >= 2**53:
            return tree_draft_phase_by_depth(self, ctx, ks, rows)
        k = np.maximum(ks, 0)  # a negative depth drafts nothing
        # Per depth d = 0..depth: requests, context sums, rows and row-weighted context sums of
        # the requests that draft exactly d steps (exact integers as floats, below 2**53);
        # suffix sums give those still drafting at each depth j.
        per_depth = [
            np.bincount(k, weights=w, minlength=depth + 1)[:0:-1].tolist()
            for w in (None, ctx, rows, rows * ctx)
        ]
        requests, contexts, widths, weighted = (
            [int(v) for v in accumulate(column)][::-1] for column in per_depth
        )
        first = float(requests[0])
        steps = [self._head_pass(first, float(contexts[0] + requests[0]), requests=first)]
        for j in range(2, depth + 1):
            n = widths[j - 1]
            seen = float(weighted[j - 1] + j * n)
            drafting = float(requests[j - 1])
            steps.append(self._head_pass(float(n), seen, requests=drafting) if n else 0.0)
        return float(sum(steps))

    def draft_phase_totals(
        self, context_tokens: np.ndarray, draft_tokens: np.ndarray
    ) -> np.ndarray:
        """:meth:`draft_phase_s` of N steps at once: ``context_tokens`` and ``draft_tokens``
        (N, B), one step per row; entry p equals ``draft_phase_s(context_tokens[p],
        draft_tokens[p])`` bit for bit (the same per-depth sums through :meth:`_head_pass`,
        added in depth order; a depth a step does not reach adds an exact 0)."""
        ks, ctx = np.asarray(draft_tokens), np.asarray(context_tokens)
        general = self._draft is not None or ctx.dtype.kind not in "iu" or ks.dtype.kind not in "iu"
        if not general:
            ks = np.maximum(ks, 0)  # a negative k drafts nothing
            general = bool(
                _add(ctx, axis=-1).max(initial=0) + ks.shape[-1] * ks.max(initial=0) >= 2**53
            )  # beyond exact float integers
        if general:
            return np.array(
                [draft_phase_by_depth(self, c, k) for c, k in zip(ctx, ks, strict=True)],
                dtype=float,
            )
        total = np.zeros(len(ks))
        for j in range(1, int(ks.max(initial=0)) + 1):
            on = ks >= j
            drafting = _add(on, axis=-1)
            seen = _add(np.where(on, ctx, 0), axis=-1) + drafting * j
            fed = drafting.astype(float)
            step = self._head_pass(fed, seen.astype(float), requests=fed)
            total = total + np.where(drafting > 0, step, 0.0)
        return total

    def speculation_overhead_totals(
        self, accepted_tokens: np.ndarray, context_tokens: np.ndarray
    ) -> np.ndarray:
        """:meth:`speculation_overhead_s` of N steps at once: (N, B) arguments, one step per
        row; entry p equals ``speculation_overhead_s(accepted_tokens[p], context_tokens[p])``
        bit for bit (:meth:`_drafter_pass` sums along the last axis)."""
        p = self.params
        tokens = np.asarray(accepted_tokens, dtype=float)
        verify = self._verify_fixed_s()
        if self._weightless:  # no extend pass; the lookup over every running request
            return verify + np.asarray(self.drafter.lookup_s(context_tokens), dtype=float)
        if not (p.draft_extend_passes and tokens.shape[-1]):
            return np.full(len(tokens), verify + 0.0)
        ctx = np.asarray(context_tokens, dtype=float)
        return verify + self._extend_s(tokens, ctx)

    def verify_terms(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
        """:meth:`verify_pass` of N passes at once, by component: (overhead_s, moe_s,
        attention_s, other_s, floors_s, collectives_s, tree_attention_s), arrays (N,) but the
        overhead and the floors (one value each: every pass has B requests);
        ``tokens_per_request`` and ``context_tokens`` (N, B), ``unique_experts`` (N, layers).
        Row p equals
        ``verify_pass(tokens[p], contexts[p], unique[p])`` bit for bit
        (:func:`~simspec.costs.passes.pass_terms`, the one body of both)."""
        tokens = np.asarray(tokens_per_request, dtype=float)
        ctx = np.asarray(context_tokens, dtype=float)
        unique = np.asarray(unique_experts, dtype=float)
        moe, attention, other, comm, tree = pass_terms(self._target, tokens, ctx, unique)
        n = len(tokens)
        host_s = host_overhead_s(self._target, None)
        return (
            host_s,
            np.broadcast_to(np.asarray(moe, dtype=float), (n,)),
            np.broadcast_to(np.asarray(attention, dtype=float), (n,)),
            np.broadcast_to(np.asarray(other, dtype=float), (n,)),
            self._target.floor_s,
            np.broadcast_to(np.asarray(comm, dtype=float), (n,)),
            np.broadcast_to(np.asarray(tree, dtype=float), (n,)),
        )

    def speculation_overhead_s(
        self, accepted_tokens: np.ndarray, context_tokens: np.ndarray
    ) -> float:
        """Engine work of a speculative iteration besides its draft steps and target pass.

        By mechanism: the verify bookkeeping's kernels at the GPU's floor
        (:data:`~simspec.physics.launches.VERIFY_KERNELS`: tree positions and mask, the accept
        kernel, gathers of the accepted tokens' KV slots and hidden states, the output), the
        host synchronisations ``params.verify_overhead_s`` unless the engine overlaps
        scheduling (``params.overlap_scheduling``), and ``params.draft_extend_passes`` drafter
        passes over each request's committed tokens (``accepted_tokens``: a_b + 1), the first
        of them the draft phase's first step widened to those tokens (:meth:`_extend_s`).
        The top-p renormalisation of a sampled verify is part of the verify pass
        (:func:`~simspec.costs.passes.pass_terms`). An n-gram drafter has no extend; its host
        lookup over every running request (contexts ``context_tokens``) takes the extend's
        place.
        """
        p = self.params
        if self._weightless:
            return self._verify_fixed_s() + float(self.drafter.lookup_s(context_tokens))
        extend = 0.0
        if p.draft_extend_passes and len(accepted_tokens):
            tokens = np.asarray(accepted_tokens, dtype=float)
            ctx = np.asarray(context_tokens, dtype=float)
            extend = self._extend_s(tokens, ctx)
        return self._verify_fixed_s() + extend

    def _extend_s(self, tokens: np.ndarray, ctx: np.ndarray):
        """The drafter's extend passes over each request's committed ``tokens`` (contexts
        ``ctx``; (B,) or (N, B)) beyond the draft phase: the first pass is the draft phase's
        first step widened from one row per request to the committed tokens (module docstring),
        so it adds its pass less a one-row pass; passes beyond the first
        (``draft_extend_passes`` > 1) cost in full."""
        passes = self.params.draft_extend_passes
        full = self._drafter_pass(tokens, ctx)
        widened = full - self._drafter_pass(np.ones_like(tokens), ctx)
        return min(passes, 1.0) * widened + max(passes - 1.0, 0.0) * full

    def _verify_fixed_s(self) -> float:
        """The part of a speculative iteration's overhead that does not depend on its batch:
        the verify bookkeeping's kernel floors and the exposed host synchronisations."""
        p = self.params
        floors = VERIFY_KERNELS * self.gpu.kernel_floor_s(p.cuda_graphs)
        return floors + (0.0 if p.overlap_scheduling else p.verify_overhead_s)

    def _drafter_pass(self, tokens: np.ndarray, ctx: np.ndarray, counts: np.ndarray | None = None):
        """One drafter forward pass feeding ``tokens[b]`` tokens to request b (context ctx[b]).

        ``tokens`` and ``ctx`` are (B,) (a float comes back) or (N, B), N passes (an array):
        sums run along the last axis (column b counting ``counts[b]`` times, if given), the
        rest is elementwise.
        """
        if self._draft is not None:
            overhead = self.params.draft_step_overhead_s
            unique = np.zeros((*tokens.shape[:-1], self._draft_layers))
            projection = 0.0
            if self._projection_bytes:  # an MTP module (module docstring)
                fed = _batch_sum(tokens, counts)
                unique = self._mtp_unique_experts(fed, unique)
                c = self._draft
                bpp = c.shape.attention_bytes_per_param  # the module's dense weights
                group = fed  # the busiest data-parallel attention group's tokens
                if self._split.attention_groups > 1:
                    requests = float(tokens.shape[-1]) if counts is None else float(np.sum(counts))
                    group = fed * attention_share(self._split, requests)
                projection = _weights(self._projection_bytes, group, bpp, c.w_bw, c.flops_per_s)
            if tokens.ndim == 2:
                return projection + pass_cost_many(
                    self._draft, tokens, ctx, unique, overhead_s=overhead, counts=counts
                )
            cost = pass_cost(self._draft, tokens, ctx, unique, overhead_s=overhead).total_s
            return cost + projection
        fed = _batch_sum(tokens, counts)  # Python floats for one pass
        rows = float(tokens.shape[-1]) if counts is None else float(np.sum(counts))
        return self._head_pass(fed, _batch_sum(ctx + tokens, counts), rows, requests=rows)

    def _mtp_unique_experts(self, fed, zeros: np.ndarray) -> np.ndarray:
        """Distinct routed experts an MTP module's MoE layer loads for ``fed`` tokens (a float,
        or one count per pass): the union of the drafting tokens' experts, each routed as the
        target's (the independent-routing expectation,
        :func:`~simspec.physics.experts.independent_union`), shaped like ``zeros``."""
        assert self._draft is not None  # an MTP module's constants
        n, k = self._draft.shape.num_experts, self._draft.shape.experts_per_token
        if isinstance(fed, np.ndarray):  # one pass per entry, each as a single pass computes it
            union = np.array([independent_union(n, k, float(t)) for t in fed.tolist()])
            return zeros + union[:, None]
        return zeros + independent_union(n, k, fed)

    def draft_sampling_s(self, rows):
        """Softmax and top-k of one draft step over ``rows`` rows of the draft vocabulary
        (:func:`draft_sampling_wave_s`); a float, or an array for an array of row counts."""
        waves = np.ceil(np.asarray(rows, dtype=float) / max(self.gpu.num_sms, 1))
        time = waves * self._sampling_wave_s
        return float(time) if np.ndim(time) == 0 else time

    def _head_pass(self, fed, seen, rows=None, requests=None):
        """A draft head's forward pass over ``fed`` tokens that attend to ``seen`` KV entries in
        all (both Python floats, or arrays of one value per pass): it reads the batch through
        these two sums alone. It samples ``rows`` rows (default ``fed``: a draft step's one
        row per drafted token; a draft extend samples one per request). An n-gram drafter's
        pass is nothing: 0 (shaped as ``fed``). With data-parallel attention each group runs
        the head for its own ``requests`` (the pass's requests), so the busiest group's share
        of the three sums is priced (:func:`~simspec.costs.parallel.attention_share`)."""
        if self._weightless:
            return fed * 0.0
        if requests is not None and self._split.attention_groups > 1:
            share = attention_share(self._split, requests)
            rows = (fed if rows is None else rows) * share
            fed, seen = fed * share, seen * share
        overhead = self._head_fixed_s + self.draft_sampling_s(fed if rows is None else rows)
        d, t = self.drafter, self._split.tensor
        wbytes = self._head_bytes
        flops = 2.0 * fed * wbytes / d.weight_bytes
        bw = self.gpu.hbm_bytes_per_s * t
        memory = wbytes / (self.params.weight_efficiency * bw)
        compute = flops / (self.params.compute_efficiency * (self.gpu.bf16_flops_per_s * t))
        weights = (
            np.maximum(memory, compute) if isinstance(compute, np.ndarray) else max(memory, compute)
        )
        kv = seen * self._head_kv / (self.params.kv_efficiency * bw)
        comm: float | np.ndarray = 0.0
        if t > 1:  # two all-reduces per head layer, as in the target's layers
            message = fed * d.hidden_size * 2.0
            gpu = self.gpu
            one = allreduce_s(
                message,
                t,
                gpu.collective_latency_s,
                gpu.link_bytes_per_s,
                gpu.collective_step_latency_s,
                gpu.custom_allreduce,
                gpu.mesh,
            )
            comm = max(d.num_layers, 1) * (2.0 * one + self.params.comm_s_per_layer)
        return overhead + weights + kv + comm
