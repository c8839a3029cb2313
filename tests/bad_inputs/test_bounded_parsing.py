"""Parsing is bounded before allocation (issue 31, 9): integers longer than Python converts,
JSON nested beyond the recursion limit, and ``.npz`` archives whose headers claim more than they
hold are exit 2 naming the file and key, in every format (scenario TOML, ``--set``, config.json,
profile JSON, measurements TOML, routing traces).
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from .rejects import assert_rejected, scenario, toml_text, write_scenario

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "calibration" / "h100-sxm-analytic.json"
#: An integer of 5,000 digits (Python converts at most 4,300 by default).
LONG = "7" * 5000


@pytest.mark.parametrize(
    ("line", "replacement"),
    [
        ("seed = 7", f"seed = {LONG}"),
        ("concurrency = 2", f"concurrency = {LONG}"),
        ("alpha = 0.7", f"alpha = {LONG}"),
        ("draft_tokens = 2", f"draft_tokens = -{LONG}"),
    ],
    ids=["seed", "workload.concurrency", "acceptance.alpha", "negative in policies"],
)
def test_long_integer_in_a_scenario_is_exit_2(tmp_path, capsys, line, replacement):
    path = tmp_path / "case.toml"
    text = toml_text(scenario())
    assert line in text
    path.write_text(text.replace(line, replacement, 1))
    for command in ("validate", "run"):
        assert_rejected(capsys, [command, str(path)], tmp_path, [str(path), "4300 digits"])


@pytest.mark.parametrize(
    "setting", [f"seed={LONG}", f"routing.overlap={LONG}", f"workload.num_requests=[{LONG}]"]
)
def test_long_integer_in_set_is_exit_2(tmp_path, capsys, setting):
    path = write_scenario(tmp_path, scenario())
    argv = ["validate", str(path), "--set", setting]
    assert_rejected(capsys, argv, tmp_path, ["--set", "4300 digits"])


@pytest.mark.parametrize("flag", ["--set", "--grid"])
def test_long_array_index_in_a_key_path_is_exit_2(tmp_path, capsys, flag):
    """An index of 5,000 digits in ``policies[...]`` escaped as Python's int-string limit."""
    path = write_scenario(tmp_path, scenario())
    key = f"policies[{LONG}].draft_tokens"
    if flag == "--set":
        argv = ["validate", str(path), "--set", f"{key}=1"]
    else:
        argv = ["sweep", str(path), "--out", str(tmp_path / "o"), "--grid", f"{key}=1,2"]
    assert_rejected(capsys, argv, tmp_path, ["an index of an existing array", "5000 digits"])


def _config(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(text)
    return write_scenario(tmp_path, scenario({"model.config": "my-model/config.json"}))


def test_long_integer_in_config_json_is_exit_2(tmp_path, capsys):
    path = _config(tmp_path, f'{{"num_hidden_layers": {LONG}}}')
    assert_rejected(capsys, ["validate", str(path)], tmp_path, ["config.json", "4300 digits"])


#: A Qwen3-30B-A3B-shaped config.json (the fields simspec reads for qwen3_moe).
QWEN3_MOE = {
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 768,
    "max_position_embeddings": 40960,
}


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("num_hidden_layers", 10**9, "num_hidden_layers"),
        ("hidden_size", 10**18, "hidden_size"),
        ("num_experts", 10**9, "num_experts"),
        ("moe_intermediate_size", 10**12, "moe_intermediate_size"),
        ("head_dim", 10**9, "head_dim"),
        ("vocab_size", 10**12, "vocab_size"),
        ("num_attention_heads", 10**7, "num_attention_heads"),
    ],
    ids=lambda v: str(v),
)
def test_config_json_sizes_are_bounded_like_a_custom_model(tmp_path, capsys, field, value, named):
    """A config.json is held to the bounds of ``[model.custom]``: ``num_hidden_layers = 10**9``
    used to hang in a per-layer loop, other sizes to allocate or overflow."""
    import time

    path = _config(tmp_path, json.dumps({**QWEN3_MOE, field: value}))
    start = time.monotonic()
    message = assert_rejected(capsys, ["validate", str(path)], tmp_path, ["config.json", named])
    assert str(value) in message and "<=" in message
    assert time.monotonic() - start < 10


def test_an_honest_config_json_still_loads(tmp_path):
    from simspec.cli import main

    path = _config(tmp_path, json.dumps(QWEN3_MOE))
    assert main(["validate", str(path)]) == 0


def test_config_json_nested_100000_deep_is_exit_2(tmp_path, capsys):
    path = _config(tmp_path, "[" * 100_000 + "]" * 100_000)
    assert_rejected(capsys, ["validate", str(path)], tmp_path, ["config.json", "nested at most"])


def test_long_integer_in_a_profile_is_exit_2(tmp_path, capsys):
    text = PROFILE.read_text().replace('"schema_version": 1', f'"schema_version": {LONG}', 1)
    assert LONG in text
    (tmp_path / "p.json").write_text(text)
    path = write_scenario(tmp_path, scenario({"costs.profile": "p.json"}))
    assert_rejected(capsys, ["validate", str(path)], tmp_path, ["p.json", "4300 digits"])


def test_long_integer_in_measurements_toml_is_exit_2(tmp_path, capsys):
    shutil.copy(PROFILE, tmp_path / "keep.json")
    rows = f"[[measurements]]\nbatch = {LONG}\nquantity = 'tpot_ms'\nvalue = 5.0\n"
    (tmp_path / "m.toml").write_text(rows)
    argv = ["fit", str(tmp_path / "m.toml"), "--out", str(tmp_path / "keep.json")]
    assert_rejected(capsys, argv, tmp_path, ["m.toml", "4300 digits"])


# -- .npz traces ---------------------------------------------------------------------------------
def _npy(shape: tuple[int, ...], dtype: str, payload: bytes) -> bytes:
    buffer = io.BytesIO()
    header = {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)
    return path


def _num_experts() -> bytes:
    return _npy((), "<i8", np.array(8, dtype="<i8").tobytes())


@pytest.mark.parametrize(
    ("shape", "payload"),
    [((2**40, 32, 2), b"\0" * 64), ((3, 1, 2), b"\0" * 8), ((1, 1, 1), b"\0" * 4096)],
    ids=["claims 64 TiB", "claims more than it holds", "holds more than it claims"],
)
def test_trace_whose_header_lies_is_exit_2_before_allocating(tmp_path, capsys, shape, payload):
    path = _archive(
        tmp_path / "lie.npz",
        {"expert_ids": _npy(shape, "<i8", payload), "num_experts": _num_experts()},
    )
    assert path.stat().st_size < 2000
    argv = ["routing", "stats", str(path)]
    assert_rejected(capsys, argv, tmp_path, [str(path), "expert_ids", "header", str(shape[0])])


def test_trace_whose_header_lies_is_exit_2_from_a_scenario(tmp_path, capsys):
    _archive(
        tmp_path / "lie.npz",
        {"expert_ids": _npy((2**40, 48, 8), "<i8", b"\0" * 64), "num_experts": _num_experts()},
    )
    data = scenario({"routing.mode": "trace", "routing.trace": "lie.npz"}, drop=["routing.overlap"])
    path = write_scenario(tmp_path, data)
    assert_rejected(capsys, ["validate", str(path)], tmp_path, ["lie.npz", "expert_ids", "header"])


def test_trace_that_inflates_beyond_the_limit_is_exit_2(tmp_path, capsys, monkeypatch):
    import simspec.inputs as inputs

    monkeypatch.setattr(inputs, "MAX_NPZ_BYTES", 1 << 20)  # the class of a deflate bomb, small
    ids = np.zeros((4096, 48, 8), dtype=np.int64)  # 12 MiB of zeros deflate to ~12 KiB
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, expert_ids=ids, num_experts=np.array(128))
    assert path.stat().st_size < 1 << 20
    argv = ["routing", "stats", str(path)]
    assert_rejected(capsys, argv, tmp_path, [str(path), "uncompressed", "GiB"])


def test_an_honest_trace_still_loads(tmp_path):
    from simspec.routing.trace import load_trace

    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]]], dtype=np.int64)
    path = tmp_path / "ok.npz"
    np.savez_compressed(path, expert_ids=ids, num_experts=np.array(8, dtype=np.int64))
    assert load_trace(path).expert_ids.shape == (3, 1, 2)


def test_json_helper_names_the_limit():
    from simspec.errors import InputError
    from simspec.inputs import load_json

    with pytest.raises(InputError, match="4300 digits"):
        load_json(json.dumps({"a": 1}).replace("1", LONG), "x.json", "")


@pytest.mark.parametrize("value", [0, -3, 20_000, 2.5, "30"])
def test_a_scheduler_recv_interval_outside_one_to_ten_thousand_steps_is_refused(
    tmp_path, capsys, value
):
    path = write_scenario(tmp_path, scenario({"engine.scheduler_recv_interval": value}))
    assert_rejected(
        capsys,
        ["run", str(path), "--json", str(tmp_path / "o.json")],
        tmp_path,
        [str(path), "engine.scheduler_recv_interval", repr(value)],
    )
