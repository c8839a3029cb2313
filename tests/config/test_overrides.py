"""Overrides: the data copy they start from shares nothing a later change could reach."""

from __future__ import annotations

import copy
import datetime

from simspec.config.overrides import apply_overrides, copy_data, parse_value


def _ids_of_containers(value, out=None):
    """id() of every dict, list and set inside ``value``."""
    out = set() if out is None else out
    if isinstance(value, dict | list | set):
        out.add(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            _ids_of_containers(item, out)
    return out


def test_copy_data_equals_deepcopy_and_shares_no_container():
    data = {
        "model": {"target": "qwen3-30b-a3b", "layers": [1, 2, [3, {"x": 4.5}]]},
        "when": datetime.date(2026, 12, 3),
        "flags": [True, None, "s"],
        "other": {1, 2},  # not TOML: deep-copied like anything unexpected
        "empty": {},
    }
    copied = copy_data(data)
    assert copied == copy.deepcopy(data)
    assert not _ids_of_containers(copied) & _ids_of_containers(data)
    copied["model"]["layers"][2][1]["x"] = 0
    copied["other"].add(3)
    assert data["model"]["layers"][2][1]["x"] == 4.5 and data["other"] == {1, 2}


def test_parsed_values_are_cached_but_each_caller_gets_its_own():
    first = parse_value("[1, {a = [2]}]")
    first[1]["a"].append(3)
    assert parse_value("[1, {a = [2]}]") == [1, {"a": [2]}]


def test_applied_overrides_share_nothing_with_the_input():
    data = {"workload": {"concurrency": 4, "lengths": [1, 2]}, "policies": [{"name": "fixed"}]}
    before = copy.deepcopy(data)
    out = apply_overrides(data, {"workload.concurrency": 8})
    out["workload"]["lengths"].append(3)
    out["policies"][0]["name"] = "other"
    assert data == before
    assert out["workload"]["concurrency"] == 8
