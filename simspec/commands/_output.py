"""How the commands print and write their results: aligned text tables, ``--format``
(table, CSV, Markdown, JSON records), ``--trace-out`` and atomic output files.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from simspec.commands._checks import check_writable

#: Cells a numeric column may hold besides numbers (missing or not applicable values).
_PLACEHOLDERS = frozenset({"", "-", "n/a", "nan", "inf", "-inf", "None"})


_NUMBER = re.compile(r"[+-]?(\d[\d,_]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*[%x]?")


def is_numeric_column(cells: Sequence[str]) -> bool:
    """True when every cell is a number (``1,024``, ``3.5%``, ``1.2x``) or a placeholder."""
    values = [c.strip() for c in cells]
    return any(v not in _PLACEHOLDERS for v in values) and all(
        v in _PLACEHOLDERS or _NUMBER.fullmatch(v) for v in values
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: text columns left-aligned, numeric columns right-aligned.

    A column is numeric when every body cell is a number or a placeholder
    (:func:`is_numeric_column`); its header is right-aligned with it, so digits line up.
    """
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        bool(rows) and is_numeric_column([r[i] for r in cells[1:]]) for i in range(len(headers))
    ]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if right else c.ljust(w)
                for c, w, right in zip(row, widths, numeric, strict=True)
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_output(path: str, text: str, flag: str) -> None:
    """Write ``text`` atomically (``-`` = stdout), turning OS errors into input errors."""
    from simspec.errors import InputError
    from simspec.io import write_atomic

    try:
        write_atomic(path, text)
    except OSError as err:
        raise InputError(flag, path, "a writable file path", err.strerror or str(err)) from None


# -- result rows in several formats ------------------------------------------------------------
#: What ``--format`` accepts: an aligned text table, CSV, a Markdown pipe table, JSON records.
FORMATS = ("table", "csv", "md", "json")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a command's result rows.

    ``key`` names it in CSV headers and JSON records (machine names such as ``tpot_ms``),
    ``header`` in the text and Markdown tables; ``spec`` formats its values there (a
    :func:`format` spec such as ``".3f"``), while CSV and JSON keep full precision.
    """

    key: str
    header: str
    spec: str = ""

    def text(self, value: Any) -> str:
        """``value`` as the text and Markdown tables show it (None -> ``-``)."""
        if value is None:
            return "-"
        return format(value, self.spec) if self.spec else str(value)


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """The shared ``--format`` and ``--output`` options (how and where the rows go)."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="how to write the result rows: an aligned text table, CSV, a Markdown pipe table "
        "or JSON records (CSV and JSON keep full precision)",
    )
    parser.add_argument(
        "--output",
        metavar="PATH",
        default="-",
        help="write the rows in --format to PATH (atomically; '-' = standard output)",
    )


def render_rows(columns: Sequence[Column], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """``rows`` (raw values, one per column) as ``fmt`` text, ending in a newline."""
    import csv
    import io
    import json

    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.key for c in columns])
        writer.writerows([["" if v is None else v for v in row] for row in rows])
        return buffer.getvalue()
    if fmt == "json":
        records = [{c.key: v for c, v in zip(columns, row, strict=True)} for row in rows]
        return json.dumps(records, indent=2, allow_nan=False) + "\n"
    texts = [[c.text(v) for c, v in zip(columns, row, strict=True)] for row in rows]
    headers = [c.header for c in columns]
    if fmt == "table":
        return table(headers, texts) + "\n"
    if fmt == "md":
        right = [
            bool(texts) and is_numeric_column([r[i] for r in texts]) for i in range(len(columns))
        ]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        rule = "|" + "|".join("---:" if r else ":---" for r in right) + "|"
        return "\n".join([line(headers), rule, *map(line, texts)]) + "\n"
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")


def check_format_output(args: argparse.Namespace) -> None:
    """Fail early on an unwritable ``--output`` or two outputs both sent to standard output."""
    from simspec.errors import InputError
    from simspec.io.atomic import STDOUT

    json_out = getattr(args, "json", None)
    if args.output == STDOUT and json_out == STDOUT and args.format != "table":
        raise InputError(
            "--output",
            args.output,
            "one output on standard output (give --output or --json a file)",
            f"--json - and --format {args.format} both on standard output",
        )
    check_writable(args.output, "--output")


def notes_stream(args: argparse.Namespace) -> TextIO:
    """Where human notes go: standard error when standard output carries data (``--json -`` or
    ``--format csv|md|json`` to standard output), else standard output."""
    data_on_stdout = getattr(args, "json", None) == "-" or (
        getattr(args, "output", None) == "-" and getattr(args, "format", "table") != "table"
    )
    return sys.stderr if data_on_stdout else sys.stdout


def emit_rows(
    args: argparse.Namespace,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    notes: Sequence[str] = (),
) -> None:
    """Write the rows as ``args.format`` to ``args.output``, with the human notes around them.

    The notes (scenario line, oracle summary) go with a text table on standard output; when
    standard output carries data (``--format csv|md|json`` or ``--json -``) they go to
    standard error, so a pipe receives the data alone.
    """
    from simspec.io.atomic import STDOUT

    report = notes_stream(args)
    for note in notes:
        print(note, file=report)
    text = render_rows(columns, rows, args.format)
    if args.output == STDOUT and args.format == "table":
        print(text, end="", file=report)
        return
    write_output(args.output, text, "--output")
    if args.output != STDOUT:
        print(f"wrote {args.output}", file=report)


def add_trace_option(parser: argparse.ArgumentParser) -> None:
    """The shared ``--trace-out`` option (a Perfetto timeline of every simulated run)."""
    parser.add_argument(
        "--trace-out",
        metavar="TRACE.json",
        help="write a Chrome/Perfetto trace of every run (prefill, draft and verify passes, "
        "requests) to TRACE.json, to open in ui.perfetto.dev",
    )


def write_trace_out(args: argparse.Namespace, result: Any, scenario: Any) -> None:
    """Write ``--trace-out`` from a result run with ``keep_logs=True`` (no-op without it)."""
    if not getattr(args, "trace_out", None):
        return
    from simspec.io.perfetto import trace_events, trace_json

    meta = {
        "scenario": scenario.name,
        "scenario_digest": result.scenario_digest,
        "seed": result.seed,
        "simspec_version": result.simspec_version,
        "time": "simulated GPU time",
    }
    write_output(args.trace_out, trace_json(trace_events(result.logs or {}, meta)), "--trace-out")
