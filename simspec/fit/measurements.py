"""Serving measurements a user brings to ``simspec fit``: the file format and its strict reader.

A team that ran ``vllm bench serve`` or SGLang's ``bench_serving`` has, for a few batch sizes,
the mean time per output token of plain decoding, and for speculative decoding the same numbers
with the acceptance length the engine reported. One measurement is one row:

``batch``
    requests in flight (the benchmark's ``--max-concurrency``), an integer >= 1.
``quantity``
    what ``value`` is (means over the benchmark's requests):
    ``tpot_ms`` time per output token after the first; ``itl_ms`` time between streamed chunks
    (one chunk per decode iteration, so with speculation ITL = TPOT x acceptance length);
    ``tokens_per_s`` output throughput of the whole server; ``tokens_per_s_per_user`` 1000 /
    TPOT; ``e2e_latency_s`` arrival to last token.
``value``
    the measured number, within the physically possible range of its quantity
    (:data:`PLAUSIBLE`: e.g. a TPOT between 0.01 ms and 100 s), so a unit error is refused
    rather than fitted.
``prompt_tokens``, ``output_tokens``
    the benchmark's input and output lengths (integers; output >= 2).
``draft_tokens``
    speculative steps per iteration (``--num-speculative-tokens``, SGLang's
    ``--speculative-num-steps``); 0 or empty = plain decoding.
``acceptance_length``
    required when ``draft_tokens > 0`` and empty otherwise: the reported mean tokens committed
    per verify pass (accepted drafts + 1), in [1, draft_tokens + 1].
``topk``, ``num_draft_tokens``
    optional, speculative rows only: a draft tree's width and size (SGLang's
    ``--speculative-eagle-topk`` / ``--speculative-num-draft-tokens``). Recorded; the row is
    simulated as a chain of ``draft_tokens`` drafts.
``note``
    optional free text (where the number comes from).

The file is CSV with a header row (``#`` lines and blank lines are skipped, column order is
free, unknown columns are refused), or TOML with one ``[[measurements]]`` table per row and the
same keys. A CSV example (numbers invented for illustration)::

    # H100 SXM, Qwen3-30B-A3B bf16, vLLM 0.11, EAGLE-3 head
    batch,quantity,value,prompt_tokens,output_tokens,draft_tokens,acceptance_length
    1,tpot_ms,4.9,512,256,,
    16,tpot_ms,9.8,512,256,,
    16,tpot_ms,6.1,512,256,3,2.6

Every problem raises :class:`~simspec.errors.InputError` (exit code 2) naming the file, the
row (and its line) and column, what was expected and what was found.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simspec.errors import InputError, describe
from simspec.inputs import load_toml, read_input_bytes
from simspec.schema import build, param

#: What a row's ``value`` may measure (module docstring).
QUANTITIES = ("tpot_ms", "itl_ms", "tokens_per_s", "tokens_per_s_per_user", "e2e_latency_s")
REQUIRED = ("batch", "quantity", "value", "prompt_tokens", "output_tokens")
OPTIONAL = ("draft_tokens", "acceptance_length", "topk", "num_draft_tokens", "note")
COLUMNS = REQUIRED + OPTIONAL
#: More rows than this is not a calibration set (every row is simulated many times).
MAX_ROWS = 200
#: Largest batch, prompt and output lengths a row may state (the scenario's own limits).
MAX_BATCH = 65536
MAX_TOKENS = 10_000_000
#: The physically possible range of each quantity, wide enough for any GPU, engine and model
#: (a 10 µs decode step is faster than one pass over any MoE layer's weights on any GPU; 100 s
#: per token is slower than streaming a trillion-parameter model over PCIe 3). A value outside
#: it is a unit error or a typo, and a fit to it would pin its parameters at their bounds.
PLAUSIBLE: dict[str, tuple[float, float]] = {
    "tpot_ms": (0.01, 1e5),
    "itl_ms": (0.01, 1e5),
    "tokens_per_s": (1e-3, 1e8),
    "tokens_per_s_per_user": (1e-3, 1e5),
    "e2e_latency_s": (1e-4, 1e7),
}


@dataclass(frozen=True, slots=True)
class MeasurementRow:
    """One measured number and the benchmark settings it was measured at."""

    batch: int = param(help="requests in flight", ge=1, le=MAX_BATCH)
    quantity: str = param(help="what value is", choices=QUANTITIES)
    value: float = param(help="the measured number", gt=0)
    prompt_tokens: int = param(help="input length", ge=1, le=MAX_TOKENS)
    output_tokens: int = param(help="output length", ge=2, le=MAX_TOKENS)
    draft_tokens: int = param(0, "speculative steps per iteration", ge=0, le=64)
    acceptance_length: float | None = param(None, "mean tokens committed per verify pass")
    topk: int = param(1, "draft tree width", ge=1, le=64)
    num_draft_tokens: int | None = param(None, "draft tree size", ge=0, le=4096)
    note: str = param("", "free text")
    where: str = ""  # "row 3 (line 5)" or "measurements[2]": how error messages name the row

    @property
    def speculative(self) -> bool:
        """True when the row was measured with speculative decoding."""
        return self.draft_tokens > 0


@dataclass(frozen=True, slots=True)
class Measurements:
    """A measurements file, validated: its rows, where it came from and its digest."""

    rows: tuple[MeasurementRow, ...]
    source: str
    sha256: str


_INTEGERS = ("batch", "prompt_tokens", "output_tokens", "draft_tokens", "topk", "num_draft_tokens")


def _cell(key: str, value: Any) -> Any:
    """A CSV cell (text) as the number its column holds; text that is none stays text."""
    if not isinstance(value, str) or key not in (*_INTEGERS, "value", "acceptance_length"):
        return value.strip() if isinstance(value, str) else value
    try:
        return int(value) if key in _INTEGERS else float(value)
    except ValueError:
        return value.strip()


def _row(raw: Mapping[str, Any], source: str, where: str, separator: str) -> MeasurementRow:
    """One raw row (CSV cells or a TOML table) read by :func:`simspec.schema.build`, then the
    checks between its columns; an empty cell is a missing one."""

    def fail(key: str, expected: str, found: str) -> InputError:
        return InputError(source, f"{where}{separator}{key}", expected, found)

    given = {k: _cell(k, v) for k, v in raw.items() if v is not None and str(v).strip()}
    try:
        row: MeasurementRow = build(MeasurementRow, given)
    except InputError as err:
        found = "an empty cell" if err.found == "nothing" else err.found
        raise fail(err.key_path, err.expected, found) from None
    low, high = PLAUSIBLE[row.quantity]
    if not low <= row.value <= high:
        expected = f"a {row.quantity} in [{low:g}, {high:g}] (a physically possible value)"
        raise fail("value", expected, describe(row.value))
    draft, acceptance = row.draft_tokens, row.acceptance_length
    if acceptance is not None and not draft:
        plain = "an empty cell on a plain-decoding row (draft_tokens = 0)"
        raise fail("acceptance_length", plain, describe(acceptance))
    if acceptance is None and draft:
        speculative = "the measured acceptance length on a speculative row (draft_tokens > 0)"
        raise fail("acceptance_length", speculative, "an empty cell")
    if acceptance is not None and not 1 <= acceptance <= draft + 1:
        expected = f"a number in [1, {draft + 1}] (draft_tokens + 1)"
        raise fail("acceptance_length", expected, describe(acceptance))
    for key in ("topk", "num_draft_tokens"):
        if key in given and not draft:
            raise fail(key, "an empty cell on a plain-decoding row", describe(given[key]))
    if row.num_draft_tokens is not None and row.num_draft_tokens < draft:
        expected = f"an integer in [{draft}, 4096]"
        raise fail("num_draft_tokens", expected, describe(row.num_draft_tokens))
    return dataclasses.replace(row, where=where)


def _check_keys(source: str, where: str, keys: list[str], what: str) -> None:
    for key in keys:
        if key not in COLUMNS:
            raise InputError(source, where, f"{what} among " + ", ".join(COLUMNS), repr(key))
    for key in REQUIRED:
        if key not in keys:
            raise InputError(source, where, f"the {what} {key!r}", "none")


def _csv_rows(text: str, source: str) -> list[MeasurementRow]:
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise InputError(source, "", "a CSV header row and measurement rows", "no rows")
    reader = csv.reader(io.StringIO("\n".join(line for _, line in lines)))
    records = list(reader)
    header_line = lines[0][0]
    header = [h.strip() for h in records[0]]
    where = f"header (line {header_line})"
    _check_keys(source, where, header, "column")
    for i, name in enumerate(header):
        if name in header[:i]:
            raise InputError(source, where, "each column once", f"{name!r} twice")
    rows = []
    for n, (cells, (line, _)) in enumerate(zip(records[1:], lines[1:], strict=True), 1):
        where = f"row {n} (line {line})"
        if len(cells) != len(header):
            raise InputError(
                source, where, f"{len(header)} cells (one per header column)", f"{len(cells)}"
            )
        raw = dict(zip(header, cells, strict=True))
        rows.append(_row(raw, source, where, ", column "))
    return rows


def _toml_rows(text: str, source: str) -> list[MeasurementRow]:
    try:
        data = load_toml(text, source, "")
    except tomllib.TOMLDecodeError as err:
        raise InputError(source, "", "valid TOML", str(err)) from None
    for key in data:
        if key != "measurements":
            raise InputError(source, key, "only [[measurements]] tables", "an unknown key")
    tables = data.get("measurements")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise InputError(source, "measurements", "[[measurements]] tables", describe(tables))
    rows = []
    for n, raw in enumerate(tables):
        where = f"measurements[{n}]"
        _check_keys(source, where, list(raw), "key")
        rows.append(_row(raw, source, where, "."))
    return rows


def parse_measurements(text: str, source: str, *, toml: bool = False) -> list[MeasurementRow]:
    """Validate the text of a measurements file (CSV, or TOML when ``toml``) into rows."""
    rows = _toml_rows(text, source) if toml else _csv_rows(text, source)
    if not rows:
        raise InputError(source, "", "at least one measurement row", "none")
    if len(rows) > MAX_ROWS:
        raise InputError(source, "", f"at most {MAX_ROWS} measurement rows", f"{len(rows)}")
    return rows


def read_measurements(path: str | Path) -> Measurements:
    """Read and validate a measurements file: TOML when its name ends in ``.toml``, else CSV."""
    source = str(path)
    raw = read_input_bytes(path, source, "measurements file (CSV or TOML)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(source, "", "UTF-8 text", f"undecodable byte at {err.start}") from None
    rows = parse_measurements(text, source, toml=source.lower().endswith(".toml"))
    return Measurements(tuple(rows), source, hashlib.sha256(raw).hexdigest())
