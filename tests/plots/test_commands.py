"""`simspec plot` on real sweep folders, `compare --plot` bars and the U(T) figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex

from simspec.cli import main
from simspec.plots.layout import BASELINE_COLOR, ORACLE_COLOR
from simspec.plots.policies import policy_bars_figure
from simspec.plots.routing import unique_experts_figure, unique_experts_of_sweep_figure
from simspec.sweep.points import read_sweep
from tests.helpers import tiny

# No [routing] overlap: independent routing, the default.
INDEPENDENT = """
name = "indep"
seed = 3
[model]
target = "mixtral-8x7b"
drafter = "eagle3-mixtral-8x7b"
[hardware]
num_gpus = 2
[workload]
prompt_tokens = 32
output_tokens = 12
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep.grid]
batch = [{ "workload.concurrency" = 1, "workload.num_requests" = 1 },
         { "workload.concurrency" = 2, "workload.num_requests" = 2 }]
"""


def test_plot_of_an_independent_routing_sweep(tmp_path: Path, capsys):
    scenario = tmp_path / "indep.toml"
    scenario.write_text(INDEPENDENT)
    out = tmp_path / "run"
    assert main(["sweep", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    assert main(["plot", str(out)]) == 0
    for name in ("speedup-vs-batch", "policies", "unique-experts"):
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    # num_requests is set with the batch (an axis of tables): no figure of its own
    assert sorted(p.name for p in (out / "figures").glob("speedup-vs-*.png")) == [
        "speedup-vs-batch.png"
    ]
    capsys.readouterr()
    fig = unique_experts_of_sweep_figure(read_sweep(out), samples=20)
    (ax,) = fig.axes
    title = ax.get_title()
    assert "independent routing" in title and "uniform popularity" in title
    assert "top-2 of 8" in title
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["independent", "sampled (20 sequences)", "all 8 experts"]
    # Independent routing, uniform popularity: U(T) = N(1 - (1 - k/N)^T) (MoESD), in units of k.
    t = np.arange(1, 13)
    independent = ax.get_lines()[0].get_ydata()
    np.testing.assert_allclose(independent, 8 * (1 - (1 - 2 / 8) ** t) / 2, rtol=1e-9)


def test_unique_experts_title_names_the_overlap_profile(tmp_path: Path, capsys):
    scenario = tmp_path / "ov.toml"
    text = INDEPENDENT.replace(
        "[workload]", '[routing]\noverlaps = [0.4, 0.3]\npopularity = "zipf"\n[workload]'
    )
    scenario.write_text(text)
    out = tmp_path / "run"
    assert main(["sweep", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    (ax,) = unique_experts_of_sweep_figure(read_sweep(out), samples=20).axes
    assert "Zipf popularity (s = 0.8)" in ax.get_title()
    assert "rho_1..rho_2 = 0.4, 0.3" in ax.get_title()


def test_ceiling_line_only_when_it_is_in_range():
    t = np.arange(1, 5)
    curve = {"independent": 8.0 * t}
    (ax,) = unique_experts_figure(t, curve, 8, num_experts=512).axes
    assert [x.get_text() for x in ax.get_legend().get_texts()] == ["independent"]
    (ax,) = unique_experts_figure(t, curve, 8, num_experts=32).axes
    assert ax.get_ylim()[1] >= 32 / 8


def test_compare_bars_baseline_grey_oracle_black():
    from simspec import compare

    s = tiny(
        "workload.concurrency=1",
        "workload.num_requests=1",
        "workload.output_tokens=20",
        policies=[{"name": "fixed", "draft_tokens": 2}],
    )
    result = compare(s)
    (ax,) = policy_bars_figure(result).axes
    colors = [to_hex(p.get_facecolor()) for p in ax.patches]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["no-spec", "fixed-2", "oracle"]
    assert colors[0] == BASELINE_COLOR.lower()
    assert colors[2] == ORACLE_COLOR.lower()
    assert len(set(colors)) == 3


GRID = """
name = "kinds"
seed = 2
[routing]
overlap = 0.3
[workload]
num_requests = 2
prompt_tokens = 32
output_tokens = 10
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep]
oracle = true
grid = { "workload.concurrency" = [1, 2], "acceptance.alpha" = [0.5, 0.8] }
"""


def test_plot_renders_every_figure_kind_of_a_small_sweep(tmp_path: Path, capsys):
    scenario = tmp_path / "kinds.toml"
    scenario.write_text(GRID)
    out = tmp_path / "run"
    assert main(["sweep", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    assert main(["plot", str(out)]) == 0
    capsys.readouterr()
    kinds = (
        "speedup-vs-batch",
        "speedup-vs-acceptance.alpha",
        "policies",
        "unique-experts",
        "delta-space",
    )
    for name in kinds:
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name


def test_unique_experts_legend_covers_no_curve_and_not_the_line_of_all_experts():
    t = np.arange(1, 17)
    fig = unique_experts_figure(t, {"independent": 8 * (1 - 0.75**t)}, 2, num_experts=8)
    (ax,) = fig.axes
    assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == ":"] == [4.0]
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_unique_experts_ticks_are_whole_tokens():
    t = np.arange(1, 5)
    fig = unique_experts_figure(t, {"independent": 2.0 * t}, 2)
    (ax,) = fig.axes
    fig.canvas.draw()
    assert all(float(x).is_integer() for x in ax.get_xticks())


CASES = """
name = "two"
seed = 3
[workload]
num_requests = 1
concurrency = 1
prompt_tokens = 16
output_tokens = 6
[[policies]]
name = "fixed"
draft_tokens = 1
[sweep]
cases = [
  { label = "coarse", "model.target" = "mixtral-8x7b", "hardware.num_gpus" = 2 },
  { label = "fine", "model.target" = "qwen3-30b-a3b" },
]
"""


def test_unique_experts_of_several_cases_draws_the_most_fine_grained(tmp_path: Path, capsys):
    scenario = tmp_path / "two.toml"
    scenario.write_text(CASES)
    out = tmp_path / "run"
    assert main(["sweep", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    (ax,) = unique_experts_of_sweep_figure(read_sweep(out), samples=5).axes
    assert ax.get_title().startswith("fine (most experts of 2 cases): top-8 of 128")


def test_the_sweeps_delta_space_names_its_point_and_keeps_its_controls(tmp_path: Path, capsys):
    """The figure draws the first point in the sweep's order, says which, shows the controls
    saved with that point's analysis, and flags a failed control (here made to fail)."""
    import dataclasses

    from simspec.analysis.delta import control_failure
    from simspec.plots.sweep import delta_space_of_sweep

    scenario = tmp_path / "kinds.toml"
    scenario.write_text(GRID)
    out = tmp_path / "run"
    assert main(["sweep", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    points = read_sweep(out)
    first = points[0]
    delta = first.delta_points()
    stored = first.result.oracle.delta
    fig = delta_space_of_sweep(points)
    left, right = fig.axes
    chosen = left.collections[0].get_offsets()
    expected = np.column_stack(
        [delta.delta_a_expected[delta.chosen], 1e3 * delta.delta_cost_s[delta.chosen]]
    )
    np.testing.assert_allclose(chosen, expected)
    title = fig._suptitle.get_text()
    values = ", ".join(f"{k}={v}" for k, v in first.values.items())
    assert f"sweep point {values}, replication 1 of 1 (first of {len(points)}" in title
    random_ = stored["control_random_tables_misclassified_fraction"]
    assert f"random cost tables {100 * random_:.1f} %" in right.get_title()
    failing = sum(1 for p in points if control_failure(p.result.oracle.delta))
    assert (f"{failing} of {len(points)} failed the control" in title) is (failing > 0)

    bad = {**stored, "misclassified_fraction": 0.45}
    bad["control_random_tables_misclassified_fraction"] = 0.40
    failed_first = dataclasses.replace(
        first,
        result=dataclasses.replace(
            first.result, oracle=dataclasses.replace(first.result.oracle, delta=bad)
        ),
    )
    others = sum(1 for p in points[1:] if control_failure(p.result.oracle.delta))
    fig = delta_space_of_sweep([failed_first, *points[1:]])
    assert any("failed its control" in t.get_text() for t in fig.texts)
    assert f"; {others + 1} of {len(points)} failed the control)" in fig._suptitle.get_text()
    from simspec.commands.sweep import sweep_warnings

    (line,) = [w for w in sweep_warnings([failed_first, *points[1:]]) if "delta-control" in w]
    assert line.endswith(f"({others + 1} of {len(points)} points with the oracle)")
    assert any("delta-control" in w for w in sweep_warnings(points)) is (failing > 0)
