"""Reading input files safely: regular files only, bounded size, bounded nesting.

A scenario, a profile or a trace named on the command line may be anything the user can name:
a FIFO (reading blocks forever), ``/dev/zero`` (never ends), a symlink loop, a file under
``/proc`` that fails on read. :func:`read_input_bytes` refuses all of them with an
:class:`~simspec.errors.InputError` naming the file, before or instead of blocking. Parsed data
nested thousands deep would overflow Python's recursion limit further on (copying, validating,
hashing), so :func:`nesting_depth` measures it without recursing; :func:`load_toml` and
:func:`load_json` also turn Python's limit on integer digits into an InputError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from simspec.errors import InputError

#: Deepest nesting of tables and arrays a scenario, a ``--set`` value or a profile may have.
MAX_NESTING = 32
#: Largest text input read (scenarios and profiles are KiB; a trace is read by numpy).
MAX_INPUT_BYTES = 64 << 20


def check_regular(
    path: str | Path, source: str, what: str, error: type[InputError] = InputError
) -> None:
    """Raise ``error`` unless ``path`` is an existing regular file (or a symlink to one)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(source, "", f"an existing {what}", "no such file") from None
    except OSError as err:  # a symlink loop, a name too long, no permission
        raise error(source, "", f"a readable {what}", err.strerror or str(err)) from None
    if not stat.S_ISREG(mode):
        found = "a folder" if stat.S_ISDIR(mode) else "a special file (FIFO, device or socket)"
        raise error(source, "", f"a {what} (a regular file)", found)


def read_input_bytes(
    path: str | Path, source: str, what: str, error: type[InputError] = InputError
) -> bytes:
    """The bytes of the regular file ``path`` (at most :data:`MAX_INPUT_BYTES`)."""
    check_regular(path, source, what, error)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as err:  # e.g. /proc/self/mem: a regular file that cannot be read
        raise error(source, "", f"a readable {what}", err.strerror or type(err).__name__) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise error(source, "", f"a {what} of at most {MAX_INPUT_BYTES >> 20} MiB", "a larger file")
    return raw


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """How deeply dicts and lists nest in ``value`` (stops counting past ``limit``)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            break
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((v, depth + 1) for v in node)
    return deepest


def read_input_text(
    path: str | Path, source: str, what: str, error: type[InputError] = InputError
) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_input_bytes`)."""
    raw = read_input_bytes(path, source, what, error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(source, "", f"a UTF-8 {what}", f"non-UTF-8 bytes ({err.reason})") from None


def load_toml(text: str, source: str, key: str, error: type[InputError] = InputError) -> Any:
    """``tomllib.loads(text)``, refusing data nested deeper than :data:`MAX_NESTING`.

    A ``tomllib.TOMLDecodeError`` propagates (the caller words it).
    """
    import tomllib

    try:
        data = tomllib.loads(text)
    except RecursionError:
        data = None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as err:  # Python's limit on integer digits, beyond any real value
        raise error(source, key, *_too_long(err)) from None
    if data is None or nesting_depth(data) > MAX_NESTING:
        raise error(source, key, f"tables and arrays nested at most {MAX_NESTING} deep", "deeper")
    return data


def _too_long(err: ValueError) -> tuple[str, str]:
    """(expected, found) for a ValueError of Python's integer-digits limit (else its text)."""
    import sys

    limit = sys.get_int_max_str_digits()
    if "digits" in str(err):
        return f"integers of at most {limit} digits", "a longer integer"
    return "valid numbers", str(err)[:120]


def load_json(text: str, source: str, key: str, error: type[InputError] = InputError) -> Any:
    """``json.loads(text)``, refusing integers longer than Python parses and data nested deeper
    than :data:`MAX_NESTING` (before a RecursionError, not after).

    A ``json.JSONDecodeError`` propagates (the caller words it).
    """
    import json

    try:
        data = json.loads(text)
    except RecursionError:
        data = None
    except json.JSONDecodeError:
        raise
    except ValueError as err:
        raise error(source, key, *_too_long(err)) from None
    if data is None or nesting_depth(data) > MAX_NESTING:
        raise error(source, key, f"objects and arrays nested at most {MAX_NESTING} deep", "deeper")
    return data


#: Largest uncompressed content of an ``.npz`` input (every array together).
MAX_NPZ_BYTES = 4 << 30


def check_npz(path: str | Path, source: str, what: str) -> None:
    """Refuse an ``.npz`` archive before numpy allocates its arrays: each member must be an
    ``.npy`` array whose header's shape and dtype account for its stored size, and all of them
    together at most :data:`MAX_NPZ_BYTES` uncompressed (a ~300-byte file may claim an array of
    terabytes, and a few MB of deflate may expand to tens of GB). Not a zip: left to numpy."""
    import zipfile

    import numpy as np

    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return  # not an archive: numpy's own error names it
    with archive:
        members = archive.infolist()
        total = sum(m.file_size for m in members)
        if total > MAX_NPZ_BYTES:
            raise InputError(
                source,
                "",
                f"a {what} of at most {MAX_NPZ_BYTES >> 30} GiB uncompressed",
                f"{total / 2**30:.1f} GiB",
            )
        for member in members:
            key = member.filename.removesuffix(".npy")
            try:
                with archive.open(member) as handle:
                    version = np.lib.format.read_magic(handle)
                    shape, _, dtype = (
                        np.lib.format.read_array_header_1_0(handle)
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0(handle)
                    )
                    header = handle.tell()
            except Exception:  # not an .npy member: numpy refuses it, naming the archive
                continue
            if dtype.hasobject:  # pickled: np.load refuses it (allow_pickle=False)
                continue
            claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if claimed != member.file_size - header:
                raise InputError(
                    source,
                    key,
                    "an array whose header matches its data",
                    f"a header claiming shape {tuple(shape)} of {dtype} "
                    f"({claimed:,} bytes) over {max(member.file_size - header, 0):,} bytes",
                )
