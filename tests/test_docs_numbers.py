"""Every command output quoted in the Markdown files is what the code prints now.

``tools/docs_numbers.py`` regenerates the quoted blocks (``--write``); these tests run each
marked block of the README and fail on any difference, and check the tool on a small document.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("docs_numbers", ROOT / "tools/docs_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_numbers"] = module
    spec.loader.exec_module(module)
    return module


docs = _tool()
BLOCKS = [b for path in docs.doc_files() for b in docs.find_blocks(path)]


def test_the_readme_marks_its_quoted_outputs():
    commands = [b.command for b in BLOCKS if b.path.name == "README.md"]
    assert len(commands) >= 7
    assert any("python-block" in c for c in commands)


#: Commands that take more than about 10 s (run by `-m slow`).
SLOW = (
    "simspec recommend",
    "simspec sweep",
    "studies.delta_study",
    "studies.sensitivity",
    "studies.offloading",
)


_OUTPUTS: dict[tuple[object, ...], list[str]] = {}


def _output(block):
    """What ``block``'s command prints now; blocks quoting the same output of the same command
    (one in the README, one in a paper's README) run it once."""
    key: tuple[object, ...] = (block.command, block.keep, block.count, block.file)
    if block.command.split()[0] == "python-block":  # the script is the block before the marker
        key += (block.path, block.marker_line)
    if key not in _OUTPUTS:
        _OUTPUTS[key] = docs.run_block(block)
    return _OUTPUTS[key]


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, marks=[pytest.mark.slow] if any(s in b.command for s in SLOW) else [])
        for b in BLOCKS
    ],
    ids=[f"{b.path.name}:{b.marker_line + 1}" for b in BLOCKS],
)
def test_a_quoted_output_is_what_the_command_prints(block):
    assert _output(block) == block.current, (
        f"{block.path.name}:{block.marker_line + 1} quotes an old output of `{block.command}`; "
        "run `python tools/docs_numbers.py --write`"
    )


DOC = """# t

<!-- docs: echo one; echo two -->
```
one
two
```

<!-- docs: keep=^b,2 :: printf 'a\\nb 1\\nc 2\\nd\\n' -->
    $ some command
    b 1
    c 9

<!-- docs: file=out.md :: printf '| x |\\n|---|\\n| 3 |\\n' > out.md -->
| x |
|---|
| 4 |

<!-- docs: printf -- '- a 1\\n- b 2\\n' -->
- a 1
- b 3

prose after the list
"""


def test_the_tool_finds_fenced_indented_and_table_blocks_and_spots_changes(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text(DOC, encoding="utf-8")
    fenced, indented, table, bullets = docs.find_blocks(doc)
    assert bullets.current == ["- a 1", "- b 3"]  # the list ends at the blank line
    assert docs.run_block(bullets) == ["- a 1", "- b 2"]
    assert fenced.current == ["one", "two"] and docs.run_block(fenced) == fenced.current
    assert indented.current == ["b 1", "c 9"]  # the `$ command` line is kept
    assert docs.run_block(indented) == ["b 1", "c 2"]  # a quoted number that differs
    assert docs.run_block(table) == ["| x |", "|---|", "| 3 |"]
    for block in reversed([fenced, indented, table, bullets]):
        docs.write(block, docs.run_block(block))
    text = doc.read_text(encoding="utf-8")
    assert "    $ some command\n    b 1\n    c 2\n" in text and "| 3 |" in text
    assert "- b 2\n\nprose after the list" in text
    assert all(docs.run_block(b) == b.current for b in docs.find_blocks(doc))


def test_sweep_tables_of_a_summary(tmp_path):
    from studies.sweep_table import by_batch, table

    head = "case,workload.concurrency,policy,tpot_ms,tpot_ms_ci95,speedup_vs_no_spec,"
    head += "tpot_diff_vs_oracle_ms,tpot_diff_vs_oracle_ci95_ms\n"
    rows = [
        "m,2,no-spec,4.0,0.0,1.0,2.0,0.1",
        "m,2,fixed-1,3.0,0.2,1.333,1.0,0.05",
        "m,2,fixed-2,2.5,0.3,1.6,0.5,0.04",
        "m,2,oracle,2.0,0.1,2.0,0.0,0.0",
        "m,1,fixed-2,2.0,0.1,1.25,0.5,0.1",
    ]
    (tmp_path / "summary.csv").write_text(head + "\n".join(rows) + "\n", encoding="utf-8")
    lines = table(tmp_path).splitlines()
    assert lines[2] == "| m | no-spec | 4.000 ± 0.000 | 1.000 | +2.000 ± 0.100 |"
    assert lines[4] == "|  | fixed-2 (best fixed) | 2.500 ± 0.300 | 1.600 | +0.500 ± 0.040 |"
    assert lines[5].endswith("| 0 |")
    batch = by_batch([tmp_path], ["speedups"]).splitlines()
    assert batch[2] == "| m | 1.25 1.33 1.60 |"  # concurrency 1 first


def test_findings_state_the_share_of_the_gap_the_cost_aware_rule_closes(tmp_path):
    from studies.sweep_table import findings

    head = "case,policy,tpot_ms,speedup_vs_no_spec\n"
    rows = ["m,no-spec,4.0,1.0", "m,fixed-1,3.0,1.333", "m,cost_aware,2.5,1.6", "m,oracle,2.0,2.0"]
    (tmp_path / "summary.csv").write_text(head + "\n".join(rows) + "\n", encoding="utf-8")
    assert findings(tmp_path).startswith(
        "- m: the best fixed k (fixed-1) gains 1.33x against the oracle's 2.00x; "
    )
    # (3.0 - 2.5) / (3.0 - 2.0) = 50 % of the gap
    closing = "cost_aware 2.500 ms vs 3.000 ms, closing 50 % of the best fixed k's TPOT gap"
    assert findings(tmp_path).strip().endswith(closing + " to the oracle.")
