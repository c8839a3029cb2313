"""Regenerate (or check) every command output quoted in the project's Markdown files.

A quoted output is marked in the Markdown by an HTML comment (invisible when rendered) on the
line before it::

    <!-- docs: simspec run scenarios/replay-tiny-mixtral.toml -->

and optionally ``<!-- docs: keep=REGEX,N file=PATH :: COMMAND -->``: ``keep`` quotes the N lines
from the first that matches REGEX (N omitted: up to the next blank line), ``file`` quotes a file
the command wrote instead of its standard output. ``COMMAND`` may be ``python-block``: the
preceding fenced ``python`` block, run as a script. The block after the marker is a fenced code
block, an indented block (a first line ``$ command`` is kept) or a Markdown table; its lines are
replaced by the output.

Each command runs in bash, in a scratch folder holding links to the repository's top-level
entries (so files it writes land there), with ``simspec`` and ``python`` this interpreter.

    python tools/docs_numbers.py            # check: list every quoted block that differs
    python tools/docs_numbers.py --write    # rewrite the blocks with what the code prints now

Exit status of the check: 0 when every block matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The Markdown files whose quoted outputs are regenerated.
DOCS = (
    "README.md",
    "studies/*/README.md",
    "scenarios/papers/*/README.md",
    "scenarios/studies/*/README.md",
    "validation/*.md",
)
MARKER = re.compile(r"^\s*<!-- docs: (?P<spec>.*) -->\s*$")


@dataclasses.dataclass
class Block:
    """One quoted output: where it is, how it is made, what it says now."""

    path: Path
    marker_line: int  # 0-based index of the marker
    start: int  # first line replaced
    end: int  # one past the last line replaced
    command: str
    keep: str | None
    count: int | None
    file: str | None
    indent: str
    current: list[str]


def _parse_spec(spec: str) -> tuple[str, str | None, int | None, str | None]:
    keep = count = file = None
    if " :: " in spec:
        options, command = spec.split(" :: ", 1)
        for option in shlex.split(options):
            name, _, value = option.partition("=")
            if name == "keep":
                regex, _, n = value.rpartition(",")
                if regex and n.isdigit():
                    keep, count = regex, int(n)
                else:
                    keep = value
            elif name == "file":
                file = value
            else:
                raise ValueError(f"unknown option {name!r} in docs marker: {spec}")
    else:
        command = spec
    return command.strip(), keep, count, file


def find_blocks(path: Path) -> list[Block]:
    """Every marked block of the Markdown file ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        command, keep, count, file = _parse_spec(match["spec"])
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines):
            raise ValueError(f"{path}:{i + 1}: a docs marker with no block after it")
        head = lines[j]
        indent = ""
        if head.lstrip().startswith("```"):
            fence_indent = head[: len(head) - len(head.lstrip())]
            start = j + 1
            end = start
            while end < len(lines) and not lines[end].lstrip().startswith("```"):
                end += 1
            indent = fence_indent
        elif head.startswith("    "):
            start = j + 1 if head.lstrip().startswith("$ ") else j
            end = start
            while end < len(lines) and lines[end].startswith("    "):
                end += 1
            indent = "    "
        elif head.startswith("|"):
            start, end = j, j
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
        else:
            raise ValueError(f"{path}:{j + 1}: expected a code block or a table after the marker")
        current = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[start:end]]
        blocks.append(Block(path, i, start, end, command, keep, count, file, indent, current))
    return blocks


def _python_block(path: Path, marker_line: int) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()[:marker_line]
    end = max(i for i, ln in enumerate(lines) if ln.strip() == "```")
    start = max(i for i, ln in enumerate(lines[:end]) if ln.strip() == "```python")
    return "\n".join(lines[start + 1 : end]) + "\n"


def _scratch() -> Path:
    """A fresh folder with links to the repository's tracked top-level entries (an output
    folder a command writes, such as runs/, is then the scratch folder's own)."""
    folder = Path(tempfile.mkdtemp(prefix="simspec-docs-"))
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in sorted({line.split("/", 1)[0] for line in listed}):
        if (ROOT / name).exists():
            (folder / name).symlink_to(ROOT / name)
    return folder


def run_block(block: Block) -> list[str]:
    """The lines the block's command produces now (after ``keep`` and ``file``)."""
    folder = _scratch()
    env = dict(os.environ, PYTHONPATH=str(ROOT), PY=sys.executable, COLUMNS="200")
    command = block.command
    if command.split()[0] == "python-block":
        script = folder / "block.py"
        script.write_text(_python_block(block.path, block.marker_line), encoding="utf-8")
        command = "python block.py" + command[len("python-block") :]
    prelude = 'simspec() { "$PY" -m simspec "$@"; }; python() { "$PY" "$@"; }; '
    done = subprocess.run(
        ["bash", "-c", prelude + command],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{block.path.name}:{block.marker_line + 1}: `{block.command}` exited "
            f"{done.returncode}:\n{done.stderr[-2000:]}"
        )
    text = (folder / block.file).read_text(encoding="utf-8") if block.file else done.stdout
    lines = [ln.rstrip() for ln in text.splitlines()]
    if block.keep is not None:
        pattern = re.compile(block.keep)
        first = next((i for i, ln in enumerate(lines) if pattern.search(ln)), None)
        if first is None:
            raise RuntimeError(f"{block.path.name}:{block.marker_line + 1}: no line matches keep")
        if block.count is not None:
            lines = lines[first : first + block.count]
        else:
            last = next((i for i in range(first, len(lines)) if not lines[i]), len(lines))
            lines = lines[first:last]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def doc_files(root: Path = ROOT) -> list[Path]:
    """The Markdown files :data:`DOCS` names."""
    found: list[Path] = []
    for pattern in DOCS:
        found += sorted(root.glob(pattern))
    return found


def write(block: Block, lines: list[str]) -> None:
    """Replace ``block``'s lines in its file (blocks of one file: last first)."""
    text = block.path.read_text(encoding="utf-8").splitlines()
    text[block.start : block.end] = [block.indent + ln if ln else ln for ln in lines]
    block.path.write_text("\n".join(text) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Check (default) or ``--write`` every marked block; ``--only TEXT`` limits to commands
    containing TEXT."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the blocks")
    parser.add_argument("--only", default="", help="only commands containing this text")
    args = parser.parse_args(argv)
    differing = 0
    for path in doc_files():
        for block in reversed(find_blocks(path)):  # last first: rewriting keeps indices valid
            if args.only not in block.command:
                continue
            lines = run_block(block)
            if lines == block.current:
                continue
            differing += 1
            where = f"{path.relative_to(ROOT)}:{block.marker_line + 1}"
            if args.write:
                write(block, lines)
                print(f"rewrote {where}: {block.command}")
            else:
                print(f"differs {where}: {block.command}")
                for old, new in zip(block.current, lines, strict=False):
                    if old != new:
                        print(f"  quoted: {old}\n  now:    {new}")
                        break
                else:
                    print(f"  {len(block.current)} quoted lines, {len(lines)} now")
    return 1 if differing and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
