"""Errors for bad user input.

Every error a user can cause with a scenario, a profile, a trace or a flag is an
:class:`InputError`. Its message is one paragraph that names the file, the key path
(``routing.overlap``, ``policies[2].draft_tokens``), what was expected and what was
found. The CLI prints it and exits with code 2, never with a traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """A bad input: which file, which key, what was expected, what was found."""

    def __init__(self, source: str, key_path: str, expected: str, found: str, hint: str = ""):
        self.source = source
        self.key_path = key_path
        self.expected = expected
        self.found = found
        self.hint = hint
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str, str]]:
        """Rebuilt from its fields, so the error crosses a process pool intact (a worker's
        bad input reaches the parent as this error, not as a broken pool)."""
        return type(self), (self.source, self.key_path, self.expected, self.found, self.hint)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        key = f"{self.key_path}: " if self.key_path else ""
        text = f"{where}{key}expected {self.expected}, found {self.found}."
        if self.hint:
            text += f" {self.hint}"
        return text


class ScenarioError(InputError):
    """A scenario file (or a ``--set`` override) is invalid."""


class FieldError(ValueError):
    """Raised by a config dataclass when one of its fields is invalid.

    ``key`` is relative to the dataclass (``"overlap"``); the scenario loader prefixes
    it with the table's path and turns it into a :class:`ScenarioError`.
    """

    def __init__(self, key: str, expected: str, found: object):
        self.key = key
        self.expected = expected
        self.found = found
        super().__init__(f"{key}: expected {expected}, found {describe(found)}")

    def __reduce__(self) -> tuple[type, tuple[str, str, object]]:
        """Rebuilt from its fields (crosses a process pool intact)."""
        return type(self), (self.key, self.expected, self.found)


def describe(value: object) -> str:
    """Render a found value for an error message: its repr and its TOML-ish type."""
    kind = {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        tuple: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached simspec: stopped like Ctrl-C (temporary files removed, a
    sweep's saved points kept), then exit 128 + the signal's number."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signum)
