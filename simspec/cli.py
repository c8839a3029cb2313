"""Command-line interface: a thin layer that parses, calls the library, prints and writes.

Exit codes: 0 success; 2 bad input (scenario, flag, file) with a one-paragraph message naming the
file, the key path, what was expected and what was found; 1 internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from simspec import catalog
from simspec.errors import InputError

EXAMPLES = {
    "run": "simspec run scenarios/qwen3-30b-h100-batch32.toml --set workload.concurrency=8 "
    "--json out.json",
    "validate": "simspec validate scenarios/qwen3-235b-h200-open-loop.toml",
    "models": "simspec models",
    "gpus": "simspec gpus",
}


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become InputError (exit 2, one paragraph, no traceback)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError("command line", self.prog, "valid arguments (see --help)", message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simspec",
        description="Simulate speculative decoding on Mixture-of-Experts LLMs.",
        epilog="Run `simspec COMMAND --help` for each command's options and an example.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example: {EXAMPLES[name]}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    run = add("run", "Run a scenario's policies and print one row per policy.")
    run.add_argument("scenario", nargs="?", help="scenario TOML file (default: the embedded one)")
    run.add_argument("--json", metavar="OUT", help="write the results JSON to OUT (atomically)")
    run.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a scenario key, e.g. --set routing.overlap=0.5 (repeatable)",
    )
    val = add("validate", "Check a scenario file without running it.")
    val.add_argument("scenario", help="scenario TOML file")
    val.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], help="override a key"
    )
    add("models", "List the catalog's target models and drafters.")
    add("gpus", "List the catalog's GPUs.")
    return parser


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if n and i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cmd_run(args: argparse.Namespace) -> int:
    from simspec.io import results_json, write_atomic
    from simspec.scenario import load_scenario
    from simspec.simulate import simulate

    scenario = load_scenario(args.scenario, args.set)
    if args.json:
        _check_writable(args.json)
    results = simulate(scenario)
    rows = [
        (
            p["label"],
            f"{p['tokens_per_s']:.1f}",
            f"{p['tpot_ms']:.3f}",
            f"{p['ttft_ms']:.1f}",
            f"{p['acceptance_length']:.3f}",
            f"{p['mean_k']:.2f}",
            f"{p['verify_over_decode']:.3f}",
            f"{p['unique_experts_per_layer']:.1f}",
            f"{p['speedup_vs_no_spec']:.3f}",
        )
        for p in results["policies"]
    ]
    print(
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop"
    )
    print(
        _table(
            (
                "policy",
                "tokens/s",
                "TPOT ms",
                "TTFT ms",
                "accept len",
                "mean k",
                "verify/decode",
                "experts/layer",
                "speedup",
            ),
            rows,
        )
    )
    if args.json:
        try:
            write_atomic(args.json, results_json(results))
        except OSError as err:
            raise InputError(
                "--json", args.json, "a writable file path", err.strerror or str(err)
            ) from None
        print(f"wrote {args.json}")
    return 0


def _check_writable(path: str) -> None:
    """Fail before a long run, not after it, when OUT cannot be written."""
    import os
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        raise InputError("--json", path, "a file path", "an existing folder")
    parent = target.parent if str(target.parent) else Path(".")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise InputError("--json", path, "a path in a writable folder", f"{parent} is not writable")


def _cmd_validate(args: argparse.Namespace) -> int:
    from simspec.scenario import load_scenario

    s = load_scenario(args.scenario, args.set)
    print(
        f"{args.scenario}: ok — {s.name} ({s.digest()}), {len(s.policies)} policies, "
        f"{s.model.target} + {s.model.drafter} on {s.hardware.num_gpus}x {s.hardware.gpu}"
    )
    return 0


def _cmd_models(_: argparse.Namespace) -> int:
    rows = []
    for name in catalog.model_names():
        m = catalog.get_model(name)
        moe = m.moe
        experts = f"{moe.experts_per_token}/{moe.num_experts}" if m.is_moe else "dense"
        shared = str(moe.num_shared_experts) if m.is_moe else "-"
        rows.append(
            (
                name,
                experts,
                shared,
                m.num_layers,
                m.shape.num_moe_layers,
                m.attention.kind,
                f"{m.total_params_b:g}",
                f"{m.active_params_b:g}",
                f"{m.shape.total_weight_bytes / 1e9:.1f}",
            )
        )
    print(
        _table(
            (
                "model",
                "experts k/N",
                "shared",
                "layers",
                "MoE layers",
                "attention",
                "total B",
                "active B",
                "weights GB",
            ),
            rows,
        )
    )
    print()
    drows = []
    for name in catalog.drafter_names():
        d = catalog.get_drafter(name)
        drows.append((name, d.kind, d.max_draft_tokens, ", ".join(d.targets)))
    print(_table(("drafter", "kind", "max draft", "targets"), drows))
    return 0


def _cmd_gpus(_: argparse.Namespace) -> int:
    rows = []
    for name in catalog.gpu_names():
        g = catalog.get_gpu(name)
        rows.append(
            (
                name,
                g.display_name,
                f"{g.memory_bytes / 1e9:.0f}",
                f"{g.hbm_bytes_per_s / 1e12:.2f}",
                f"{g.bf16_flops_per_s / 1e12:.0f}",
                f"{g.l2_bytes / 2**20:.0f}",
                g.num_sms,
            )
        )
    print(_table(("gpu", "name", "memory GB", "HBM TB/s", "bf16 TFLOP/s", "L2 MiB", "SMs"), rows))
    return 0


COMMANDS = {"run": _cmd_run, "validate": _cmd_validate, "models": _cmd_models, "gpus": _cmd_gpus}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simspec`` command; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    except InputError as err:
        print(f"simspec: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("simspec: interrupted", file=sys.stderr)
        return 130
    except Exception:
        import traceback

        traceback.print_exc()
        print(
            "simspec: internal error (a bug: please report it with the traceback above)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
