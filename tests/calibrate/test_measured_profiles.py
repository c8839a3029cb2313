"""The measured H200 profiles under calibration/: the fit reproduces them, and the calibrated
model predicts the held-out layer-stack passes measured on the GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec import catalog
from simspec.calibrate.plan import bench_model
from simspec.fit import assemble_profile
from simspec.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
MEASURED = sorted(
    p for p in (ROOT / "calibration").glob("*.json") if '"kind": "measured"' in p.read_text()
)


def test_measured_profiles_are_shipped():
    assert {p.name for p in MEASURED} >= {"h200-qwen3-30b-a3b.json", "h200-gpt-oss-120b.json"}


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.stem)
def test_a_table_cell_carries_one_graph_launch_of_a_few_microseconds(path):
    """The isolated cell's launch latency, from the profile's own floors table: the shortest
    isolated kernel (4.0-4.5 us on the H200) less a back-to-back kernel (1.0-1.4 us)."""
    latency = load_profile(path).cell_latency_s
    assert 1e-6 < latency < 5e-6


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.stem)
def test_refitting_the_measured_tables_gives_the_shipped_profile(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    meta = data["metadata"]
    spec = bench_model(catalog.get_model(meta["model"]), meta["shapes"])
    refit = assemble_profile(
        spec,
        data["tables"],
        metadata=meta,
        peak=data["peak"],
        ceilings=data["ceilings"],
    )
    numbers = {k for k, v in data["fitted"].items() if isinstance(v, float)}
    assert {k: refit["fitted"][k] for k in numbers} == pytest.approx(
        {k: data["fitted"][k] for k in numbers}, rel=1e-9
    )
    assert {k: v for k, v in refit["fitted"].items() if k not in numbers} == {
        k: v for k, v in data["fitted"].items() if k not in numbers
    }
    assert [v["predicted_s"] for v in refit["validation"]] == pytest.approx(
        [v["predicted_s"] for v in data["validation"]], rel=1e-9
    )
    profile = load_profile(path)
    assert (profile.kind, profile.gpu, profile.shapes) == ("measured", "h200", "full")


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.stem)
def test_calibrated_model_predicts_held_out_graph_replays_within_eight_percent(path):
    """Each held-out layer-stack pass (CUDA-graph replay, as engines decode) was timed on the
    GPU and never used by the fit; the tables' interpolation (each cell less the graph launch it
    was timed with, which a whole-pass graph pays once), the floors of the kernels no table
    times and the fitted overhead must predict it within 8 %."""
    data = json.loads(path.read_text(encoding="utf-8"))
    held_out = [v for v in data["validation"] if v["use"] == "validation" and v["mode"] == "graph"]
    assert len(held_out) >= 5
    for v in held_out:
        error = v["predicted_s"] / v["measured_s"] - 1.0
        assert abs(error) <= 0.08, (v["batch"], v["tokens_per_request"], error)


def test_refit_command_keeps_the_measurement_and_rewrites_the_fit(tmp_path, capsys):
    from simspec.cli import main

    shipped = ROOT / "calibration" / "h200-gpt-oss-120b.json"
    old = json.loads(shipped.read_text(encoding="utf-8"))
    old["fitted"]["request_overhead_s"] = 1e-4  # a key an earlier version fitted
    source, out = tmp_path / "old.json", tmp_path / "new.json"
    source.write_text(json.dumps(old), encoding="utf-8")
    assert main(["calibrate", "--refit", str(source), "--out", str(out)]) == 0
    capsys.readouterr()
    new = json.loads(out.read_text(encoding="utf-8"))
    assert new["tables"] == old["tables"] and new["peak"] == old["peak"]
    assert "request_overhead_s" not in new["fitted"]
    assert new["validation"] == json.loads(shipped.read_text(encoding="utf-8"))["validation"]
    assert new["metadata"]["refit"]["command"].startswith("simspec calibrate --refit")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["metadata"].update(kind="analytic"), "metadata.kind"),
        (lambda d: d["tables"].update(moe=5), "tables.moe"),
        (lambda d: d["metadata"].update(model="no-such-model"), "metadata.model"),
    ],
)
def test_refit_of_a_bad_profile_is_exit_2_naming_the_key(tmp_path, capsys, change, named):
    from simspec.cli import main

    data = json.loads((ROOT / "calibration" / "h200-qwen3-30b-a3b.json").read_text())
    change(data)
    source, out = tmp_path / "bad.json", tmp_path / "out.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    assert main(["calibrate", "--refit", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert not out.exists()


def test_the_exposed_phase_fits_both_measured_moe_tables_better_than_full_overlap():
    """The control for the launch form's exposed fraction on a kernel it was not fitted to
    (torch's grouped GEMM on the H200): each measured MoE table refitted with the phases fully
    overlapped (theta 0) fits worse than the shipped profile (theta at the published tables'
    value), and both READMEs quote these RMS log errors."""
    from simspec.params import RooflineParams

    shipped, control = {}, {}
    for name in ("h200-qwen3-30b-a3b", "h200-gpt-oss-120b"):
        data = json.loads((ROOT / "calibration" / f"{name}.json").read_text(encoding="utf-8"))
        meta = data["metadata"]
        refit = assemble_profile(
            bench_model(catalog.get_model(meta["model"]), meta["shapes"]),
            data["tables"],
            metadata=meta,
            peak=data["peak"],
            ceilings=data["ceilings"],
            assumed=RooflineParams(moe_exposed_fraction=0.0),
        )
        shipped[name] = data["fit_details"]["moe_launch_rms_log_error"]
        control[name] = refit["fit_details"]["moe_launch_rms_log_error"]
        assert shipped[name] < 0.85 * control[name], name
    order = ("h200-qwen3-30b-a3b", "h200-gpt-oss-120b")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    two = " and ".join(f"{shipped[n]:.2f}" for n in order)
    before = " and ".join(f"{control[n]:.2f}" for n in order)
    assert f"RMS log errors of {two} instead of {before}" in readme
    calibration = " ".join((ROOT / "calibration" / "README.md").read_text(encoding="utf-8").split())
    three = " / ".join(f"{shipped[n]:.3f}" for n in order)
    assert f"MoE {three} (launch form" in calibration
    assert f"{' / '.join(f'{control[n]:.3f}' for n in order)} with the two phases" in calibration
