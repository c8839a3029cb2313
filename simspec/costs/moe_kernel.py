"""Time of one MoE layer's routed experts: the fused grouped-GEMM kernel, as named forms.

A pass of n tokens sends ``rows`` = n·k_e (token, expert) rows through one MoE layer and touches
U distinct experts of it. Each GPU holds a shard of every expert (the whole expert without
tensor parallelism, 1/tp of its intermediate width with it): ``expert_bytes`` and
``expert_params`` below are **one GPU's shard**, ``bandwidth`` and ``flops_per_s`` one GPU's (or
a device's, consistently). Two forms are registered (``[costs] moe_kernel``):

``saturation``
    t = max(U·b / (eta(U)·BW), 2·rows·P / F_eff), eta(U) = eta_max·(1 − exp(−U·b/S)).
    Occupancy grows with the bytes in flight. For small U·b it tends to the floor
    S / (eta_max·BW) (35 µs on an H100 at the default S = 94 MB), and it prices a single
    small-expert token's bandwidth below attention's.

``launch`` (fitted to the published fused_moe tables: :mod:`simspec.fit.kernels`)
    t = t0 + max(m, c) + theta·min(m, c), m = U·c_e + B_hbm / (eta_bw·BW), c = 2·rows·P / F_eff
    A fixed per-layer time t0: GPU time of the layer's chain of small kernels (top-k, the
    sort that groups rows by expert, the two GEMMs' ramp-up, the activation, the weighted
    sum). vLLM's benchmark_moe.py times the layer inside a CUDA graph, so t0 holds no CPU
    launch overhead. Then a small cost c_e per distinct expert (its tiles start a fresh
    pipeline: prologue, scales, output write) and the expert bytes streamed at one bandwidth
    efficiency eta_bw, whether one expert or all of them: the memory phase m. FLOPs take over
    when the rows are many (c, F_eff = peak × compute efficiency). The two phases overlap only
    in part: a tile's weights must arrive before its tensor-core work on them, so theta of the
    shorter phase (``moe_exposed_fraction``) adds to the longer. At decode sizes c is a few
    µs and theta changes nothing; from a few hundred tokens per layer (a prefill, a large
    verify) it is what makes the layer grow with its tokens: the published tables grow by
    about half their FLOPs' time at the default compute efficiency once the experts are all
    streamed (validation/KERNEL_FIT.md, rows up to 1024 tokens). Fitted: t0 ≈ 27 µs,
    c_e ≈ 0.25 µs, eta_bw ≈ 0.9, so the expert stream runs above attention's assumed 0.70
    while a one-token layer still pays t0.

Fixed times and the SM clock (launch form)
    t0 and c_e are latency, not bandwidth: the layer's chain of small kernels (top-k, the
    align/sort that counts rows per expert through shared-memory rounds, the activation, the
    weighted sum) and each GEMM's pipeline fill are sequences of dependent steps whose length
    is set in SM cycles. They are fitted at the reference clock (1980 MHz, H100 SXM / H200,
    :data:`simspec.physics.hardware.REFERENCE_SM_CLOCK_HZ`) and scale with the GPU's clock:
    ``latency_scale`` = 1980 MHz / f_SM (A100: 1410 MHz, x1.40; B200: 1980 MHz, x1.00; from the
    spec sheets cited in the catalog). Bandwidth terms do not scale.

Co-routed re-reads and L2 (``[costs] moe_l2_reuse``, launch form only)
    The kernel cuts an expert's rows into tiles of ``moe_tile_rows`` rows (Triton fused_moe's
    BLOCK_SIZE_M) and every row tile streams the expert's weight tiles again. With r rows over
    U experts there are about max(U, r / tile) row tiles, so R = max(0, r / tile − U)
    re-reads of an expert's shard: none at decode sizes (r / U ≤ tile), some in a large verify
    or prefill pass whose tokens crowd onto the same experts. A re-read costs HBM bytes unless
    it hits L2, which depends on how many bytes stream between the read and the re-read:

    - ``ideal``: every re-read hits (a distinct expert crosses HBM once per pass). Tuned
      kernels are built for this: GROUP_SIZE_M runs an expert's row tiles side by side, so a
      re-read follows its read within one wave.
    - ``fit``: re-reads hit only when the pass's working set in the layer, U·b, fits in L2
      (``l2_bytes`` of one GPU); otherwise the layer's sweep evicts a tile before it is read
      again (LRU over a cyclic stream larger than the cache keeps nothing) and the R·b
      re-read bytes come from HBM.
    - ``none``: every re-read comes from HBM (an upper bound).

    ``fit`` and ``none`` differ only when re-reads exist *and* the working set fits in L2;
    ``fit`` and ``ideal`` only when re-reads exist and it does not.

Kernel identity
    A fused-MoE layer is a different kernel on a different GPU generation or weight format:
    bf16 and fp8 weights run Triton's fused_moe on the tensor cores; MXFP4 experts on Hopper
    and Ampere, which have no FP4 tensor cores, run dequantising kernels (triton_kernels'
    matmul_ogs, Marlin). :func:`kernel_identity` names the kernel a layer runs,
    ``"<architecture>-<expert format>"`` from the bytes per expert parameter it streams, the
    same bytes the roofline prices. The kernel fit (:mod:`simspec.fit.kernels`) reports which
    identities its rows measure and how one fitted set of constants transfers between them;
    an identity no row measures (MXFP4 on Hopper or Ampere in the shipped cases) is priced
    with those constants as an extrapolation.

Every form is a pure function of floats and arrays; :func:`moe_layer_s` dispatches by name.
``unique_experts`` and ``rows`` may be arrays that broadcast together (many passes at once:
U of shape (passes, layers), rows of shape (passes, 1)), elementwise the same arithmetic as
one pass; :func:`simspec.costs.passes.pass_cost_many` relies on it, so a new form must
keep to numpy operations (no ``max``/``math`` on its inputs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simspec.params import L2_REUSE_MODES, MOE_KERNEL_FORMS, RooflineParams

#: A form: (params, U, rows, expert_bytes, expert_params, bandwidth, flops_per_s, l2_bytes,
#: latency_scale) -> s.
MoeKernelForm = Callable[
    [RooflineParams, np.ndarray, float | np.ndarray, float, float, float, float, float, float],
    np.ndarray,
]
MOE_KERNELS: dict[str, MoeKernelForm] = {}


def register_form(name: str) -> Callable[[MoeKernelForm], MoeKernelForm]:
    """Register a form under a name of :data:`simspec.params.MOE_KERNEL_FORMS`."""

    def decorator(form: MoeKernelForm) -> MoeKernelForm:
        if name not in MOE_KERNEL_FORMS or name in MOE_KERNELS:
            raise ValueError(f"MoE kernel form {name!r}: unknown to params or registered twice")
        MOE_KERNELS[name] = form
        return form

    return decorator


@register_form("saturation")
def saturation_s(
    params: RooflineParams,
    unique_experts: np.ndarray,
    rows: float | np.ndarray,
    expert_bytes: float,
    expert_params: float,
    bandwidth: float,
    flops_per_s: float,
    l2_bytes: float,
    latency_scale: float = 1.0,
) -> np.ndarray:
    """max(U·b / (eta(U)·BW), 2·rows·P / F) with the occupancy curve (module docstring; it has
    no fixed time, so ``latency_scale`` does not enter)."""
    u = np.asarray(unique_experts, dtype=float)
    eta = params.moe_efficiency(np.maximum(u, 1.0), expert_bytes)
    routed_flops = 2.0 * rows * expert_params
    return np.maximum(u * expert_bytes / (eta * bandwidth), routed_flops / flops_per_s)


def reread_bytes(
    unique_experts: np.ndarray | float,
    rows: float | np.ndarray,
    expert_bytes: float,
    tile_rows: float,
    l2_reuse: str,
    l2_bytes: float,
) -> np.ndarray:
    """HBM bytes of co-routed re-reads: R·b, or 0 where L2 serves them (module docstring).

    Examples
    --------
    64 rows on 2 experts of 1 MB in 16-row tiles: 4 row tiles, 2 re-reads.

    >>> float(reread_bytes(2.0, 64, 1e6, 16, "none", 0.0))
    2000000.0
    >>> float(reread_bytes(2.0, 64, 1e6, 16, "fit", 50e6))  # 2 MB fit in 50 MB of L2
    0.0
    """
    u = np.asarray(unique_experts, dtype=float)
    if l2_reuse not in L2_REUSE_MODES:
        raise ValueError(f"moe_l2_reuse {l2_reuse!r} is not one of {L2_REUSE_MODES}")
    if l2_reuse == "ideal":
        return np.zeros_like(u)
    rereads = np.maximum(rows / tile_rows - u, 0.0)
    missed = rereads * expert_bytes
    if l2_reuse == "fit":
        return np.where(u * expert_bytes <= l2_bytes, 0.0, missed)
    return missed


@register_form("launch")
def launch_s(
    params: RooflineParams,
    unique_experts: np.ndarray,
    rows: float | np.ndarray,
    expert_bytes: float,
    expert_params: float,
    bandwidth: float,
    flops_per_s: float,
    l2_bytes: float,
    latency_scale: float = 1.0,
) -> np.ndarray:
    """s·t0 + max(m, c) + theta·min(m, c), m = s·U·c_e + B_hbm / (eta_bw·BW),
    c = 2·rows·P / F, s = ``latency_scale`` (module docstring)."""
    u = np.asarray(unique_experts, dtype=float)
    hbm_bytes = u * expert_bytes
    if params.moe_l2_reuse != "ideal":  # "ideal" re-reads 0 bytes: adding 0.0 changes nothing
        hbm_bytes = hbm_bytes + reread_bytes(
            u, rows, expert_bytes, params.moe_tile_rows, params.moe_l2_reuse, l2_bytes
        )
    expert_s = params.moe_expert_s * latency_scale
    memory = u * expert_s + hbm_bytes / (params.moe_bandwidth_efficiency * bandwidth)
    compute = 2.0 * rows * expert_params / flops_per_s
    longer = np.maximum(memory, compute)
    if params.moe_exposed_fraction:
        longer = longer + params.moe_exposed_fraction * np.minimum(memory, compute)
    return params.moe_launch_s * latency_scale + longer


#: GPU generation of a catalog GPU, by its name's prefix (the export variants H20 / H800 /
#: A800 and the GB200 / B300 share their generation's die and kernels).
ARCHITECTURES = {
    "a100": "ampere",
    "a800": "ampere",
    "h100": "hopper",
    "h200": "hopper",
    "h20": "hopper",
    "h800": "hopper",
    "b200": "blackwell",
    "gb200": "blackwell",
    "b300": "blackwell",
}
#: Expert weight format by bytes per parameter (:data:`simspec.physics.precision.BYTES_PER_PARAM`).
_FORMATS = {2.0: "bf16", 1.0: "fp8", 4.25 / 8: "mxfp4", 4.5 / 8: "nvfp4"}


def kernel_identity(gpu_name: str, expert_bytes_per_param: float) -> str:
    """The fused-MoE kernel a layer runs: ``"<architecture>-<format>"`` (module docstring).

    Examples
    --------
    >>> kernel_identity("h100-sxm", 4.25 / 8), kernel_identity("a100-pcie-40gb", 2.0)
    ('hopper-mxfp4', 'ampere-bf16')
    """
    architecture = next(
        (arch for prefix, arch in ARCHITECTURES.items() if gpu_name.startswith(prefix)), gpu_name
    )
    weights = next(
        (name for size, name in _FORMATS.items() if abs(size - expert_bytes_per_param) < 1e-9),
        f"{expert_bytes_per_param:g}B",
    )
    return f"{architecture}-{weights}"


def moe_layer_s(
    params: RooflineParams,
    unique_experts: np.ndarray | float,
    rows: float | np.ndarray,
    *,
    expert_bytes: float,
    expert_params: float,
    bandwidth: float,
    flops_per_s: float,
    l2_bytes: float = 0.0,
    latency_scale: float = 1.0,
) -> np.ndarray:
    """Routed-expert time of one MoE layer per entry of ``unique_experts``, s.

    The form is ``params.moe_kernel`` (:data:`MOE_KERNELS`).

    Parameters
    ----------
    params : RooflineParams
        ``moe_kernel`` picks the form; its keys are the form's constants.
    unique_experts : array
        U, distinct routed experts the pass touches, per layer.
    rows : float or array
        (token, expert) rows of the pass, n·k_e (an array broadcasting against
        ``unique_experts``: one value per pass).
    expert_bytes, expert_params : float
        One GPU's shard of one routed expert: its weight bytes and parameters.
    bandwidth : float
        HBM bytes/s that shard is read at (peak; the form applies its efficiency).
    flops_per_s : float
        Achievable FLOP/s (peak × compute efficiency) of the same GPU(s).
    l2_bytes : float
        L2 of the GPU holding the shard (read by ``moe_l2_reuse = "fit"``; 0 = none).
    latency_scale : float
        How much longer the form's fixed times (``moe_launch_s``, ``moe_expert_s``, stated at
        the reference SM clock) take on this GPU: :attr:`simspec.physics.hardware.GpuSpec.
        latency_scale` (module docstring, *Fixed times and the SM clock*).

    Examples
    --------
    The launch form at one token of Qwen3-30B-A3B (8 experts of 9.4 MB) on an H100:

    >>> p = RooflineParams(moe_kernel="launch", moe_launch_s=20e-6, moe_expert_s=0.0,
    ...                    moe_bandwidth_efficiency=0.9, moe_exposed_fraction=0.5)
    >>> t = moe_layer_s(p, 8.0, 8, expert_bytes=9.437e6, expert_params=4.72e6,
    ...                 bandwidth=3.35e12, flops_per_s=6e14)
    >>> round(float(t) * 1e6, 2)  # 20 µs + 75.5 MB / (0.9 · 3.35 TB/s) + 0.5 · 0.13 µs of FLOPs
    45.1
    """
    form = MOE_KERNELS[params.moe_kernel]
    u = np.asarray(unique_experts, dtype=float)
    return form(
        params,
        u,
        rows,
        expert_bytes,
        expert_params,
        bandwidth,
        flops_per_s,
        l2_bytes,
        latency_scale,
    )
