"""Command-line interface: a thin layer that parses, calls the library, prints and writes.

Each subcommand lives in its own module under :mod:`simspec.commands`. Exit codes: 0 success;
2 bad input (scenario, flag, file) with a one-paragraph message naming the file, the key path,
what was expected and what was found; 1 internal error; 130 Ctrl-C, 143 SIGTERM and 129 SIGHUP
(one line, no partial files).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType

from simspec._version import __version__
from simspec.errors import InputError, Terminated

#: Subcommand modules under simspec.commands, in the order `simspec --help` lists them.
COMMANDS = (
    "run",
    "compare",
    "recommend",
    "sweep",
    "plot",
    "validate",
    "models",
    "gpus",
    "routing",
    "record",
    "calibrate",
    "fit",
    "fidelity",
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and appends each option's default to its help.

    Like :class:`argparse.ArgumentDefaultsHelpFormatter`, but silent where a default says
    nothing (None, False, an empty list) or the help already names it.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text
            or default in (None, False, argparse.SUPPRESS)
            or default == []
            or not (action.option_strings or action.nargs in ("?", "*"))
        ):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become InputError (exit 2, one paragraph, no traceback)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError("command line", self.prog, "valid arguments (see --help)", message)


class _Once:
    """Mixin of a single-valued option's action: given twice with different values it is an
    error, where argparse would keep the last and silently drop the first (``--json a.json
    --json b.json``). The same value twice is harmless and accepted."""

    dest: str

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        given: dict[str, tuple[str, object]] = namespace.__dict__.setdefault(_GIVEN, {})
        before = given.get(self.dest)
        if before is not None and before[1] != values:
            first, value = before
            raise InputError(
                "command line",
                option_string or self.dest,
                f"each option once (a second {option_string} would replace {first} {value!r})",
                f"{first} {value!r} and {option_string} {values!r}",
            )
        given[self.dest] = (option_string or self.dest, values)
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


#: The namespace attribute where :class:`_Once` remembers the options given (removed after
#: parsing).
_GIVEN = "_options_given"

#: argparse actions that keep one value (a repeat replaces it): the ones :class:`_Once` guards.
_SINGLE = (argparse._StoreAction, argparse._StoreConstAction)


def _once(parser: argparse.ArgumentParser) -> None:
    """Make every single-valued option of ``parser`` and its subcommands a :class:`_Once`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _once(child)
        elif action.option_strings and type(action) in _SINGLE:
            action.__class__ = type(f"Once{type(action).__name__}", (_Once, type(action)), {})


def _modules() -> dict[str, ModuleType]:
    return {name: importlib.import_module(f"simspec.commands.{name}") for name in COMMANDS}


def _parser(modules: dict[str, ModuleType]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simspec",
        description="Simulate speculative decoding on Mixture-of-Experts LLMs.",
        epilog="Run `simspec COMMAND --help` for each command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"simspec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, module in modules.items():
        command = sub.add_parser(
            module.NAME,
            help=module.HELP.replace("%", "%%"),  # argparse %-formats help texts
            description=module.HELP,
            epilog=f"example: {module.EXAMPLE}",
            formatter_class=HelpFormatter,
        )
        module.configure(command)
        command.set_defaults(_execute=module.execute, _name=name)
    _once(parser)
    return parser


#: Signals handled like Ctrl-C: a terminal closed (SIGHUP), a job stopped by ``kill`` or CI.
STOP_SIGNALS = ("SIGTERM", "SIGHUP")


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`~simspec.errors.Terminated` inside (main thread only;
    the previous handlers come back on exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            previous[number] = signal.signal(number, _raise_terminated)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simspec`` command; returns the exit code."""
    with _stop_signals():
        return _main(argv)


#: Errors of writing that the environment causes (a full disk, a file-size or quota limit, a
#: read-only or failing device): one line and exit 2, like bad input, never a traceback.
_WRITE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EROFS")
    if hasattr(errno, name)
)


def _escape_unencodable() -> None:
    """Characters the terminal's encoding lacks (``PYTHONIOENCODING=ascii`` and a scenario named
    in another script) are written as backslash escapes instead of failing after the work."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def _main(argv: Sequence[str] | None) -> int:
    _escape_unencodable()
    try:
        args = _parser(_modules()).parse_args(argv)
        args.__dict__.pop(_GIVEN, None)
        if getattr(args, "set", None):
            from simspec.config.overrides import check_no_replaced_override

            check_no_replaced_override(args.set)
        code = int(args._execute(args))
        sys.stdout.flush()  # a full standard output (/dev/full) fails here, not at exit
        return code
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    except InputError as err:
        print(f"simspec: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Terminated as stop:
        name = signal.Signals(stop.signum).name
        print(f"simspec: terminated by {name}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("simspec: interrupted", file=sys.stderr)
        return 130
    except OSError as err:
        if err.errno not in _WRITE_ERRNOS:
            return _internal_error()
        where = err.filename or "standard output"
        print(
            f"simspec: error: {where}: expected room to write, found {err.strerror or err}.",
            file=sys.stderr,
        )
        if err.filename is None:  # whatever standard output still buffers goes nowhere
            import os

            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 2
    except Exception:
        return _internal_error()


def _internal_error() -> int:
    import traceback

    traceback.print_exc()
    print(
        "simspec: internal error (a bug: please report it with the traceback above)",
        file=sys.stderr,
    )
    return 1


def run_command() -> int:
    """The ``simspec`` program (``python -m simspec`` and the console script): :func:`main`, then
    the collector frozen for the interpreter's exit.

    At exit Python collects garbage while it tears its modules down, walking every object a
    command left (a sweep's results and caches), a visible part of a short command. Frozen
    objects are skipped, and the process ends anyway, so nothing is kept. :func:`main` itself,
    which tests call many times in one process, leaves the collector alone.
    """
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_command())
