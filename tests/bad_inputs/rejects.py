"""Shared checks of the bad-inputs suite (part B): exit 2, one message, no traceback, no files.

A bad input must make ``simspec`` exit with code 2 and print one paragraph naming the file, the
key path, what was expected and what was found, without a traceback, and without creating or
changing any file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simspec.cli import main

#: A small scenario (two short requests): the base of every case.
BASE: dict[str, Any] = {
    "name": "bad-input-base",
    "seed": 7,
    "model": {"target": "qwen3-30b-a3b", "drafter": "eagle3-qwen3-30b-a3b"},
    "hardware": {"gpu": "h100-sxm"},
    "routing": {"overlap": 0.38},
    "acceptance": {"process": "iid", "alpha": 0.7},
    "workload": {"concurrency": 2, "num_requests": 2, "prompt_tokens": 64, "output_tokens": 8},
    "policies": [{"name": "fixed", "draft_tokens": 0}, {"name": "fixed", "draft_tokens": 2}],
}


def toml_value(value: Any) -> str:
    """``value`` in TOML syntax (numbers keep their exact repr: 5e-324, nan, -0.0)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f'"{k}" = {toml_value(v)}' for k, v in value.items()) + " }"
    raise TypeError(value)


def toml_text(data: Mapping[str, Any]) -> str:
    """A scenario mapping as TOML text (top-level scalars, tables, arrays of tables)."""
    lines: list[str] = []
    for key, value in data.items():
        if not isinstance(value, Mapping) and not (
            isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value)
        ):
            lines.append(f"{key} = {toml_value(value)}")
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines.append(f"\n[{key}]")
            lines.extend(f"{k} = {toml_value(v)}" for k, v in value.items())
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for entry in value:
                lines.append(f"\n[[{key}]]")
                lines.extend(f"{k} = {toml_value(v)}" for k, v in entry.items())
    return "\n".join(lines) + "\n"


def scenario(edits: Mapping[str, Any] | None = None, drop: Sequence[str] = ()) -> dict[str, Any]:
    """BASE with ``{"table.key": value}`` edits applied and ``"table.key"`` entries dropped."""
    data: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in BASE.items()}
    for path, value in (edits or {}).items():
        table, _, key = path.rpartition(".")
        if table:
            data.setdefault(table, {})[key] = value
        else:
            data[key] = value
    for path in drop:
        table, _, key = path.rpartition(".")
        (data[table] if table else data).pop(key, None)
    return data


def write_scenario(folder: Path, data: Mapping[str, Any], name: str = "case.toml") -> Path:
    path = folder / name
    path.write_text(toml_text(data), encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_rejected(
    capsys: Any, argv: Sequence[str], folder: Path, fragments: Sequence[str]
) -> str:
    """Run ``simspec argv``: exit 2, a one-paragraph message holding ``fragments``, no files.

    ``fragments`` should name the file, the key path, the expected and the found value.
    Returns the message.
    """
    capsys.readouterr()
    before = snapshot(folder)
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}, stderr: {err}"
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith("simspec: error: "), err
    message = err.removeprefix("simspec: error: ").strip()
    assert "\n" not in message, message
    assert "expected" in message and "found" in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert snapshot(folder) == before, "a rejected input created or changed a file"
    return message


def experiments_run(monkeypatch: Any) -> list[str]:
    """Record every call of the simulation driver (a refused run must never reach it)."""
    import simspec.analysis.experiment as experiment

    calls: list[str] = []
    real = experiment.run_experiment

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append("run")
        return real(*args, **kwargs)

    monkeypatch.setattr(experiment, "run_experiment", spy)
    return calls


def points_simulated(monkeypatch: Any) -> list[int]:
    """Record the seed of every sweep point simulated (a resume must skip the saved ones)."""
    import simspec.sweep.run as run

    calls: list[int] = []
    real = run.run_point

    def spy(scenario: Any, oracle: Any) -> Any:
        calls.append(scenario.seed)
        return real(scenario, oracle)

    monkeypatch.setattr(run, "run_point", spy)
    return calls
