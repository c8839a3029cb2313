"""The notebook API: simspec.run / compare with overrides and progress, records and DataFrames.

README_EXAMPLE is the README's "Python API" section, run here verbatim so it cannot rot.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import simspec
from simspec.analysis.results import METRICS

ROOT = Path(__file__).resolve().parents[1]


def _readme_example() -> str:
    """The first Python block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API\n") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


README_EXAMPLE = _readme_example()


@pytest.fixture(scope="module")
def small_result():
    return simspec.run(None, {"workload.num_requests": 3, "workload.output_tokens": 16})


def test_readme_example_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    exec(compile(README_EXAMPLE, "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "['1/2', '2/2']"  # the fixed-3 policy and the k = 0 baseline
    assert [line.split()[0] for line in lines[1:]] == ["no-spec", "fixed-3"]
    assert float(lines[2].split()[2]) > 1.0  # speculation pays on this scenario
    assert lines == _quoted_output()  # every number the README quotes


def _quoted_output() -> list[str]:
    """The output the README quotes after its Python example (tools/docs_numbers.py)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("<!-- docs: python-block") :]
    start = section.index("```\n") + len("```\n")
    return section[start : section.index("```", start)].splitlines()


def test_overrides_and_a_loaded_scenario_give_the_same_run():
    scenario = simspec.load_scenario(None)
    overrides = {"workload.num_requests": 2, "speculative_num_steps": 2}
    by_path = simspec.run(None, overrides)
    by_object = simspec.run(scenario, overrides)
    assert by_path == by_object
    assert [p.label for p in by_path.policies] == ["no-spec", "fixed-2"]


def test_progress_counts_every_simulated_run_of_compare():
    calls: list[tuple[int, int]] = []
    result = simspec.compare(
        None,
        {"workload.num_requests": 2, "num_speculative_tokens": 1},
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls == [(1, 3), (2, 3), (3, 3)]  # fixed-1, the baseline, the oracle
    assert result.policies[-1].is_oracle


def test_records_are_flat_rows_with_the_metrics(small_result):
    rows = small_result.records()
    assert [r["policy"] for r in rows] == [p.label for p in small_result.policies]
    for row, p in zip(rows, small_result.policies, strict=True):
        for name in METRICS:
            assert row[name] == getattr(p, name)
        assert row["gpu_draft_s"] == p.gpu_time_s["draft"]
        assert row["param_draft_tokens"] == p.params["draft_tokens"]
        assert row["is_baseline"] is p.is_baseline
        assert all(isinstance(v, str | int | float) for v in row.values())


def test_to_dataframe_has_one_row_per_policy(small_result):
    pandas = pytest.importorskip("pandas")
    frame = small_result.to_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["policy"]) == [p.label for p in small_result.policies]
    assert frame.to_dict("records") == small_result.records()
    indexed = frame.set_index("policy")
    assert indexed.loc["fixed-2", "tpot_ms"] == small_result.get("fixed-2").tpot_ms


def test_to_dataframe_has_the_columns_of_records(small_result, monkeypatch):
    # without pandas installed: a stand-in that keeps what it was given
    import types

    class Frame:
        def __init__(self, records):
            self.records = list(records)

        @classmethod
        def from_records(cls, records):
            return cls(records)

        def to_dict(self, orient):
            assert orient == "records"
            return self.records

    monkeypatch.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=Frame))
    frame = small_result.to_dataframe()
    assert frame.to_dict("records") == small_result.records()
    assert all("policy" in row for row in frame.to_dict("records"))


def test_to_dataframe_without_pandas_says_how_to_get_it(small_result, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        small_result.to_dataframe()


def test_import_simspec_does_not_import_pandas():
    import subprocess

    code = "import sys, simspec; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
