"""What `simspec run` and `simspec compare` share (not a subcommand): their options, the
checks made before simulating, the replicated run, and the outputs written after it.

``--replications R`` runs the scenario under R seeds (:mod:`simspec.analysis.replications`):
the usual rows are replication 0 (the scenario's own seed, so R = 1 changes nothing), followed
by a table of means over the replications with 95 % t intervals and, per policy, the paired
difference of its speedup to the best policy's: *within noise* when that interval contains 0.
``--requests-csv PATH`` writes one row per request, policy and replication
(:data:`simspec.analysis.metrics.REQUEST_COLUMNS`). A scenario with an ``[slo]`` table also gets
a table of latency percentiles, SLO attainment and goodput.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from simspec.commands import (
    Output,
    add_allow_large_option,
    add_format_option,
    add_set_option,
    add_trace_option,
    check_format_output,
    check_outputs,
    check_range,
    check_work,
    check_writable,
    notes_stream,
    scenario_inputs,
    table,
    write_output,
    write_trace_out,
)
from simspec.commands._hints import (
    analytic_routing_hint,
    lockstep_hint,
    preset_mismatch_hint,
    routing_overlap_hint,
    sweep_table_hint,
)
from simspec.io.atomic import STDOUT

if TYPE_CHECKING:
    from simspec.analysis.replications import Replicated
    from simspec.analysis.results import RunResult
    from simspec.config.scenario import Scenario

#: The figures `simspec compare --plot DIR` writes into DIR.
PLOT_FILES = ("policies.png", "delta-space.png")

#: Most replications one command runs.
MAX_REPLICATIONS = 10_000


def add_replication_options(parser: argparse.ArgumentParser) -> None:
    """The ``--replications`` and ``--requests-csv`` options."""
    parser.add_argument(
        "--replications",
        type=int,
        default=1,
        metavar="R",
        help="run R seeds derived from the scenario's and add means with paired 95 %% CIs",
    )
    parser.add_argument(
        "--requests-csv",
        metavar="PATH",
        help="write one row per request (every policy and replication) to PATH as CSV",
    )


def add_experiment_options(
    parser: argparse.ArgumentParser, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> None:
    """The arguments of `simspec run` and `simspec compare`; ``extra`` adds a command's own
    options after ``--json``."""
    parser.add_argument(
        "scenario", nargs="?", help="scenario TOML file (default: the embedded one)"
    )
    parser.add_argument("--json", metavar="OUT", help="write the results JSON to OUT (atomically)")
    if extra is not None:
        extra(parser)
    add_format_option(parser)
    add_trace_option(parser)
    add_replication_options(parser)
    add_set_option(parser)
    add_allow_large_option(parser)


def simulate_replicated(
    args: argparse.Namespace,
    command: str,
    *,
    oracle: bool,
    checks: Callable[[], None] | None = None,
    header: Callable[[Scenario], str] | None = None,
) -> tuple[Scenario, Replicated]:
    """Load the scenario, check every option and output path (``checks`` adds the command's own)
    before any simulation, print ``header(scenario)`` where the notes go (so a long run says at
    once what it simulates), then run the scenario's replications with a progress bar."""
    from simspec.analysis.guardrails import print_warnings
    from simspec.analysis.replications import replicate
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    check_outputs(experiment_outputs(args), scenario_inputs(args.scenario, scenario))
    check_replication_options(args)  # bounds R before the work guard counts R scenarios
    check_work([scenario] * args.replications, oracle=oracle, allow_large=args.allow_large)
    if args.json:
        check_writable(args.json, "--json")
    if checks is not None:
        checks()
    check_format_output(args)
    if args.trace_out:
        check_writable(args.trace_out, "--trace-out")
    if header is not None:
        print(header(scenario), file=notes_stream(args), flush=True)
    for hint in (
        sweep_table_hint(args.scenario, command),
        analytic_routing_hint([scenario] * args.replications, oracle),
        preset_mismatch_hint(scenario),
        routing_overlap_hint(scenario),
    ):
        if hint:
            print(hint, file=sys.stderr, flush=True)
    with Progress(command) as progress:
        replicated = replicate(
            scenario,
            args.replications,
            oracle=oracle,
            progress=progress,
            keep_logs=bool(args.trace_out or args.requests_csv),
        )
    print_warnings(replicated.warnings)
    return scenario, replicated


def experiment_outputs(args: argparse.Namespace) -> list[Output]:
    """Every output a `run` or `compare` command line asks for (standard output only where it
    carries data), with the figures of ``--plot``."""
    rows_as_data = args.format != "table" or args.output != STDOUT
    outputs: list[Output] = [
        ("--json", args.json),
        ("--output", args.output if rows_as_data else None),
        ("--trace-out", args.trace_out),
        ("--requests-csv", args.requests_csv),
    ]
    plot = getattr(args, "plot", None)
    if plot is not None:
        outputs += [("--plot", plot and str(Path(plot) / name)) for name in PLOT_FILES]
    return outputs


def write_experiment_outputs(
    args: argparse.Namespace, scenario: Scenario, replicated: Replicated
) -> None:
    """The tables over replications, ``--trace-out``, ``--requests-csv`` and ``--json``."""
    report = notes_stream(args)
    report_replications(args, replicated)
    print(answer_line(replicated), file=report)
    hint = lockstep_hint(scenario, replicated.runs[0])
    if hint:
        print(hint, file=sys.stderr)
    write_trace_out(args, replicated.runs[0], scenario)
    if args.trace_out and args.trace_out != "-":
        print(f"wrote {args.trace_out}", file=report)
    if args.json:
        write_output(args.json, replicated.to_json(), "--json")
        if args.json != "-":
            print(f"wrote {args.json}")


def answer_line(replicated: Replicated) -> str:
    """The run's answer in one line: the best policy's speedup over no speculation and, with
    the oracle, the bound no online policy can beat (means over replications, with their 95 %
    half-widths when there are several), and the codes of the warnings that qualify it (an
    extrapolated preset, a best k at the edge of the search), so the answer is never read
    without them."""
    best = replicated.best()
    several = len(replicated.runs) > 1

    def speedup(label: str) -> str:
        mean = replicated.mean(label)
        return f"{mean.mean:.2f}x" + (f" ± {mean.half_width:.2f}" if several else "")

    text = f"best: {best}, {speedup(best)} vs no speculation"
    oracle = next((p.label for p in replicated.runs[0].policies if p.is_oracle), None)
    if oracle is not None:
        text += f"; oracle bound {speedup(oracle)}"
    codes = list(dict.fromkeys(w.split(":", 1)[0] for w in replicated.warnings))
    if codes:
        text += f"; see warning{'s' if len(codes) > 1 else ''} {', '.join(codes)}"
    return text


def check_replication_options(args: argparse.Namespace) -> None:
    """Fail before simulating on a bad ``--replications`` or an unwritable ``--requests-csv``."""
    check_range("--replications", args.replications, 1, MAX_REPLICATIONS)
    if args.requests_csv:
        check_writable(args.requests_csv, "--requests-csv")


def replication_table(replicated: Replicated) -> str:
    """The means over replications with 95 % CIs and each policy's paired difference to the best."""
    summary = replicated.summary()
    with_gap = any(row.gap_to_oracle_pct is not None for row in summary)
    best = replicated.best()
    rows = []
    for s in summary:
        cells = [
            s.policy,
            s.tpot_ms.text(),
            s.speedup_vs_no_spec.text(),
            "(best)" if s.policy == best else s.speedup_diff_vs_best.text(),
            "yes" if s.within_noise_of_best else "no",
        ]
        if with_gap:
            gap = s.gap_to_oracle_pct
            cells.append(gap.text(1) if gap is not None else "")
        rows.append(cells)
    headers = ["policy", "TPOT ms", "speedup", f"speedup - {best}", "within noise"]
    if with_gap:
        headers.append("gap to oracle %")
    return table(headers, rows)


def slo_table(result: RunResult) -> str:
    """Per policy: TPOT and TTFT percentiles, SLO attainment and goodput (scenario with [slo])."""
    headers = (
        "policy",
        "TPOT p50 ms",
        "p90",
        "p99",
        "TTFT p50 ms",
        "p90",
        "p99",
        "met SLO",
        "goodput req/s",
        "goodput tok/s",
    )
    rows = [
        (
            p.label,
            *(f"{getattr(p, f'{m}_p{q}_ms'):.3f}" for m in ("tpot", "ttft") for q in (50, 90, 99)),
            f"{p.slo_attainment or 0.0:.1%}",
            f"{p.goodput_requests_per_s or 0.0:.2f}",
            f"{p.goodput_tokens_per_s or 0.0:.1f}",
        )
        for p in result.policies
    ]
    return table(headers, rows)


def report_replications(args: argparse.Namespace, replicated: Replicated) -> None:
    """Print the SLO table (with ``[slo]``) and the table over replications (R > 1); write
    ``--requests-csv``.

    The table goes where the command's notes go: standard error when standard output carries
    data (``--json -`` or ``--format csv|md|json`` to standard output).
    """
    report = notes_stream(args)
    runs = replicated.runs
    slo = runs[0].scenario.get("slo") or {}
    if any(v is not None for v in slo.values()):
        targets = ", ".join(f"{k} <= {v:g}" for k, v in slo.items() if v is not None)
        print(
            f"latency percentiles over requests; SLO {targets} (seed {runs[0].seed})", file=report
        )
        print(slo_table(runs[0]), file=report)
    if len(runs) > 1:
        print(
            f"over {len(runs)} replications (seeds {', '.join(map(str, replicated.seeds))}): "
            "means ± 95 % CI half-widths; speedup differences paired within each replication",
            file=report,
        )
        print(replication_table(replicated), file=report)
    if args.requests_csv:
        from simspec.analysis.metrics import requests_csv

        write_output(args.requests_csv, requests_csv(runs), "--requests-csv")
        if args.requests_csv != "-":
            print(f"wrote {args.requests_csv}", file=report)
