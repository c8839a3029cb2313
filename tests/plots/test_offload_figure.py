"""Speedup vs draft length under offloading (simspec.plots.offload): the plotted numbers are the
runs' own, checked against separate runs of each draft length, not pixels."""

from __future__ import annotations

from pathlib import Path

import pytest

import simspec
from simspec.cli import main
from simspec.plots.offload import OffloadCurves, offload_curves, offload_figure

STUDY = Path(__file__).resolve().parents[2] / "scenarios" / "studies" / "offloading"
SMALL = {"workload.num_requests": 1, "workload.prompt_tokens": 32, "workload.output_tokens": 24}
LINKS = (4.0, 25.0)
KS = (0, 1, 3)


@pytest.fixture(scope="module")
def scenario() -> simspec.Scenario:
    return simspec.load_scenario(STUDY / "qwen3-30b-a3b.toml", SMALL)


@pytest.fixture(scope="module")
def curves(scenario) -> OffloadCurves:
    return offload_curves(scenario, "offload.link_gb_per_s", LINKS, KS)


def _tpot(scenario: simspec.Scenario, link: float, k: int) -> float:
    """Mean time per output token of one fixed-k policy run alone at ``link`` GB/s."""
    alone = simspec.with_overrides(
        scenario,
        {"offload.link_gb_per_s": link, "policies": [{"name": "fixed", "draft_tokens": k}]},
    )
    rows = [r for r in simspec.run(alone).records() if r["policy"] == f"fixed-{k}"]
    return float(rows[0]["tpot_ms"])


def test_each_point_is_the_ratio_of_separate_runs(scenario, curves):
    """Speedup(link, k) = TPOT of fixed-0 over TPOT of fixed-k, each run on its own (same seed,
    same routing: the policies are paired)."""
    assert curves.values == LINKS and curves.draft_lengths == KS
    for link, row in zip(LINKS, curves.speedup, strict=True):
        plain = _tpot(scenario, link, 0)
        assert row[0] == 1.0
        for k, speedup in zip(KS[1:], row[1:], strict=True):
            assert speedup == pytest.approx(plain / _tpot(scenario, link, k), rel=1e-9)


def test_a_slower_link_makes_plain_decoding_slower(scenario):
    """The curves' varied key reaches the runs: a 4 GB/s link is slower than a 25 GB/s one."""
    assert _tpot(scenario, 4.0, 0) > _tpot(scenario, 25.0, 0)


def test_the_figure_draws_one_curve_per_value_and_marks_the_best_k(curves):
    fig = offload_figure(curves)
    ax = fig.axes[0]
    data = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(KS)]
    assert [ln.get_label() for ln in data] == ["4 GB/s", "25 GB/s"]
    for line, row in zip(data, curves.speedup, strict=True):
        assert list(line.get_xdata()) == list(KS)
        assert list(line.get_ydata()) == pytest.approx(list(row))
    stars = [ln for ln in ax.get_lines() if ln.get_marker() == "*" and len(ln.get_xdata())]
    best = curves.best()
    assert len(stars) == len(LINKS)
    for star, link, row in zip(stars, LINKS, curves.speedup, strict=True):
        assert star.get_xdata()[0] == best[link]
        assert star.get_ydata()[0] == max(row)
    assert [tick.get_text() for tick in ax.get_xticklabels()] == [str(k) for k in KS]
    # the stars and the y = 1 rule are explained in the legend too
    names = ["4 GB/s", "25 GB/s", "no speculation", "best k of each curve"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == names
    assert ax.get_legend().get_title().get_text() == "host link"


def test_best_picks_the_highest_speedup():
    c = OffloadCurves("t", "offload.cache_experts_per_layer", (8.0, 16.0), (0, 1, 2),
                      ((1.0, 1.2, 1.1), (1.0, 0.9, 0.8)))  # fmt: skip
    assert c.best() == {8.0: 1, 16.0: 0}


def test_the_command_writes_the_figure(tmp_path, capsys):
    path = tmp_path / "s.toml"
    text = (STUDY / "qwen3-30b-a3b.toml").read_text(encoding="utf-8")
    path.write_text(text.replace("num_requests = 4", "num_requests = 1"), encoding="utf-8")
    out = tmp_path / "fig"
    code = main(["plot", "--offload", str(path), "--vary", "cache=8,16",
                 "--draft-lengths", "0,1", "--out", str(out)])  # fmt: skip
    assert code == 0
    assert (out / "offload-speedup-vs-k-cache.png").exists()
    assert "best draft length: 8: k = " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--vary", "bandwidth=4"], "--vary"),
        (["--vary", "link=4,x"], "--vary"),
        (["--draft-lengths", "-1"], "--draft-lengths"),
    ],
)
def test_bad_options_exit_2_naming_the_flag(tmp_path, capsys, argv, names):
    code = main(["plot", "--offload", str(STUDY / "qwen3-30b-a3b.toml"), *argv,
                 "--out", str(tmp_path)])  # fmt: skip
    assert code == 2
    assert names in capsys.readouterr().err


def test_a_scenario_without_offloading_is_refused(scenario):
    resident = simspec.with_overrides(
        scenario, {"offload.experts": "gpu", "hardware.gpu": "h100-sxm"}
    )
    with pytest.raises(simspec.InputError, match=r"offload\.experts"):
        offload_curves(resident, "offload.link_gb_per_s", (4.0,), (0, 1))


def test_plot_without_folders_or_a_scenario_exits_2(capsys):
    assert main(["plot"]) == 2
    assert "--offload SCENARIO" in capsys.readouterr().err
