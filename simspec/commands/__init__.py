"""One module per CLI subcommand.

Each module defines ``NAME``, ``HELP`` (one line), ``EXAMPLE`` (a full command line), and two
functions: ``configure(parser)`` adds its arguments, ``execute(args) -> int`` runs it and returns
the exit code. Adding a command = adding a module here and its name to ``simspec.cli.COMMANDS``.
Commands raise :class:`simspec.errors.InputError` for bad input; ``simspec.cli.main`` turns it
into exit code 2.
"""

from simspec.commands._checks import (
    MAX_WORK_TOKENS,
    Output,
    add_allow_large_option,
    add_set_option,
    catalog_entry,
    check_folder,
    check_outputs,
    check_range,
    check_work,
    check_writable,
    scenario_inputs,
)
from simspec.commands._output import (
    FORMATS,
    Column,
    add_format_option,
    add_trace_option,
    check_format_output,
    emit_rows,
    is_numeric_column,
    notes_stream,
    render_rows,
    table,
    write_output,
    write_trace_out,
)

__all__ = [
    "FORMATS",
    "MAX_WORK_TOKENS",
    "Column",
    "Output",
    "add_allow_large_option",
    "add_format_option",
    "add_set_option",
    "add_trace_option",
    "catalog_entry",
    "check_folder",
    "check_format_output",
    "check_outputs",
    "check_range",
    "check_work",
    "check_writable",
    "emit_rows",
    "is_numeric_column",
    "notes_stream",
    "render_rows",
    "scenario_inputs",
    "table",
    "write_output",
    "write_trace_out",
]
