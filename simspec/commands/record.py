"""`simspec record`: record a routing trace (and draft outcomes) from a Hugging Face MoE model.

``--model`` loads a causal LM with ``transformers`` (a hub id or a local folder; the ``record``
extra: ``pip install 'simspec[record]'``), decodes the prompts of ``--prompts`` (one per line)
greedily and writes the router top-k of every MoE layer for every token; with ``--drafter`` (a
small causal LM with the same tokenizer) also the per-position acceptance and confidences of
K greedy drafts and the rejected drafts' routing (:mod:`simspec.record.trace`).
``--tiny FAMILY`` records from a small randomly initialised model of a family instead (no
download), with random prompts and, with ``--drafter-layers N``, the model's own first N layers
as an early-exit drafter: the way to try the pipeline, and how the example trace was made.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from simspec.commands import check_outputs, check_range, check_writable
from simspec.commands._words import count
from simspec.errors import InputError

NAME = "record"
HELP = "Record a routing trace (and draft outcomes) from a Hugging Face MoE model (torch)."
EXAMPLE = (
    "simspec record --model Qwen/Qwen3-30B-A3B --drafter Qwen/Qwen3-0.6B "
    "--prompts prompts.txt --new-tokens 256 --draft-tokens 4 --device cuda --out trace.npz"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec record`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="target MoE model: a Hugging Face hub id or folder")
    source.add_argument(
        "--tiny",
        metavar="FAMILY",
        help="a tiny random model of a family instead: mixtral, qwen2_moe, qwen3_moe, olmoe, "
        "deepseek_v2, deepseek_v3, gpt_oss",
    )
    parser.add_argument("--drafter", help="drafter causal LM (hub id or folder; same tokenizer)")
    parser.add_argument("--prompts", help="text file, one prompt per line (with --model)")
    parser.add_argument("--out", required=True, help="trace file to write (.npz)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens decoded per prompt")
    parser.add_argument("--draft-tokens", type=int, default=4, help="drafts K per position")
    parser.add_argument(
        "--no-rejected", action="store_true", help="skip the rejected drafts' routing"
    )
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    tiny = parser.add_argument_group("tiny random models (--tiny)")
    tiny.add_argument("--layers", type=int, default=2, help="MoE layers")
    tiny.add_argument("--experts", type=int, default=8, help="routed experts per layer")
    tiny.add_argument("--top-k", type=int, default=2, help="experts per token")
    tiny.add_argument("--hidden", type=int, default=32, help="hidden size")
    tiny.add_argument("--vocab", type=int, default=64, help="vocabulary size")
    tiny.add_argument("--sequences", type=int, default=4, help="random prompts")
    tiny.add_argument("--prompt-tokens", type=int, default=8, help="tokens per random prompt")
    tiny.add_argument(
        "--drafter-layers",
        type=int,
        default=0,
        help="drafter = the model's first N layers, an early exit (0 = no drafter)",
    )
    tiny.add_argument("--seed", type=int, default=0, help="seed of the weights and prompts")


def execute(args: argparse.Namespace) -> int:
    """Record the trace and write it."""
    import time

    check_range("--new-tokens", args.new_tokens, 1, 100_000)
    check_range("--draft-tokens", args.draft_tokens, 1, 64)
    if args.tiny:
        if args.drafter or args.prompts:
            flag = "--drafter" if args.drafter else "--prompts"
            raise InputError(
                "command line", flag, "no value with --tiny (see --drafter-layers)", "one"
            )
        check_range("--layers", args.layers, 1, 256)
        check_range("--experts", args.experts, 2, 1024)
        check_range("--top-k", args.top_k, 1, args.experts)
        check_range("--drafter-layers", args.drafter_layers, 0, args.layers)
        for flag, value in (("--hidden", args.hidden), ("--vocab", args.vocab)):
            check_range(flag, value, 8, 1_000_000)
        check_range("--sequences", args.sequences, 1, 100_000)
        check_range("--prompt-tokens", args.prompt_tokens, 1, 100_000)
    else:
        _read_prompts(args.prompts)  # fail before loading torch and the model
    check_writable(args.out, "--out", stdout=False)
    check_outputs([("--out", args.out)], _local_inputs(args))
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        raise InputError(
            "command line",
            "simspec record",
            "torch and transformers (pip install 'simspec[record]')",
            str(err),
        ) from None
    start = time.perf_counter()
    target, drafter, prompts, grouped, name = _tiny(args) if args.tiny else _hub(args)
    from simspec.record.trace import record_trace

    try:
        trace = record_trace(
            target,
            prompts,
            args.new_tokens,
            drafter=drafter,
            draft_tokens=args.draft_tokens,
            rejected_drafts=not args.no_rejected,
            grouped=grouped,
            model=name,
            source=f"simspec record ({'tiny random model' if args.tiny else args.model})",
        )
    except ValueError as err:
        raise InputError("command line", "--model/--tiny", "a MoE model", str(err)) from None
    _report(trace, args.out)
    print(f"took {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


def _tiny(args: argparse.Namespace) -> tuple[Any, Any, list[list[int]], bool, str]:
    import numpy as np

    from simspec.record.hooks import (
        FAMILIES,
        available_families,
        early_exit_drafter,
        tiny_model,
    )

    have, missing = available_families()
    if args.tiny not in have:
        why = missing.get(args.tiny, "not a known family")
        raise InputError(
            "command line", "--tiny", "one of " + ", ".join(have), f"{args.tiny!r} ({why})"
        )
    import torch

    torch.set_num_threads(1)  # tiny matrices: one thread beats a thread pool (and contention)
    sizes = {
        "layers": args.layers,
        "experts": args.experts,
        "top_k": args.top_k,
        "hidden": args.hidden,
        "vocab": args.vocab,
        "seed": args.seed,
    }
    try:
        target = tiny_model(args.tiny, **sizes)
    except ValueError as err:
        raise InputError(
            "command line", "--experts", "a size the family accepts", str(err)
        ) from None
    drafter = None
    if args.drafter_layers:
        drafter = early_exit_drafter(target, args.tiny, args.drafter_layers, **sizes)
    rng = np.random.default_rng(args.seed)
    prompts = rng.integers(0, args.vocab, size=(args.sequences, args.prompt_tokens)).tolist()
    target = target.to(args.device)
    drafter = None if drafter is None else drafter.to(args.device)
    return target, drafter, prompts, FAMILIES[args.tiny].grouped, f"tiny random {args.tiny}"


def _hub(args: argparse.Namespace) -> tuple[Any, Any, list[list[int]], bool, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lines = _read_prompts(args.prompts)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    target = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(args.device).eval()
    drafter = None
    if args.drafter:
        drafter = AutoModelForCausalLM.from_pretrained(args.drafter, dtype=dtype).to(args.device)
        drafter = drafter.eval()
    prompts = [tokenizer(line)["input_ids"] for line in lines]
    family = str(getattr(target.config, "model_type", ""))
    return target, drafter, prompts, family.startswith(("deepseek", "gpt_oss")), family


def _read_prompts(path: str | None) -> list[str]:
    """The non-empty lines of the prompts file."""
    if not path:
        raise InputError("command line", "--prompts", "a prompts file with --model", "nothing")
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(path, "", "a readable UTF-8 text file", str(err)) from None
    if not lines:
        raise InputError(path, "", "one prompt per line", "no prompt")
    return lines


def _local_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The local files the recording reads (the prompts file, and every file of a model or
    drafter given as a folder), so ``--out`` cannot replace one of them."""
    inputs: list[tuple[str, Path]] = []
    if args.prompts:
        inputs.append(("prompts file", Path(args.prompts)))
    for what, name in (("model folder", args.model), ("drafter folder", args.drafter)):
        folder = Path(name) if name else None
        if folder is not None and folder.is_dir():
            inputs += [(what, entry) for entry in sorted(folder.iterdir()) if entry.is_file()]
    return inputs


def _report(trace: Any, out: str) -> None:
    from simspec.io import write_atomic
    from simspec.routing.trace import save_trace

    written = write_atomic(out, lambda tmp: save_trace(tmp, trace))
    print(
        f"recorded {count(len(trace.sequence_starts), 'sequence')}, {trace.num_tokens} tokens, "
        f"{count(trace.num_layers, 'MoE layer')}, top-{trace.experts_per_token} of "
        f"{trace.num_experts} experts ({trace.model})"
    )
    drafts = trace.drafts
    if drafts.accepted is not None:
        from simspec.text.acceptance import match_lengths

        rates = " ".join(f"{v:.3f}" for v in drafts.accepted.mean(axis=0))
        print(
            f"drafts: K = {drafts.draft_slots}, slot match rates {rates}, mean match length "
            f"{match_lengths(drafts.accepted).mean():.3f}, mean confidence "
            f"{drafts.confidences.mean():.3f}"  # type: ignore[union-attr]
        )
    print(f"wrote {written} ({written.stat().st_size / 1024:.1f} KiB)")
