"""Which sweep keys get lines and labels, and which colours policies get (no matplotlib)."""

from __future__ import annotations

from typing import Any, NamedTuple

from simspec.plots.layout import (
    BASELINE_COLOR,
    BATCH,
    ORACLE_COLOR,
    free_keys,
    grid_shape,
    policy_styles,
)


class R(NamedTuple):
    case: str
    values: dict[str, Any]
    policy: str = "fixed-3"
    is_baseline: bool = False
    is_oracle: bool = False


def _batch_table(case: str = "") -> list[R]:
    # An axis of tables: concurrency and num_requests set together.
    return [R(case, {BATCH: b, "workload.num_requests": 2 * b}) for b in (1, 2, 4, 8)]


def test_keys_set_together_with_the_batch_add_no_line():
    assert free_keys(_batch_table("a") + _batch_table("b"), [BATCH]) == []
    # Without the batch given, the first key of the pair carries the label, not both.
    assert free_keys(_batch_table()) == [BATCH]


def test_an_independent_axis_keeps_its_lines():
    rows = [
        R("", {BATCH: b, "workload.num_requests": b, "routing.overlap": o})
        for o in (0.1, 0.4)
        for b in (1, 2)
    ]
    assert free_keys(rows, [BATCH]) == ["routing.overlap"]
    assert free_keys(rows) == [BATCH, "routing.overlap"]


def test_a_key_constant_within_each_case_is_not_free():
    # Differs between cases but is fixed within each: the case already names it.
    rows = [
        R(c, {BATCH: b, "hardware.num_gpus": n}) for c, n in (("x", 1), ("y", 8)) for b in (1, 2)
    ]
    assert free_keys(rows, [BATCH]) == []


def test_baseline_and_oracle_never_share_a_colour():
    # Paper A: the oracle is the 9th row, where an 8-colour cycle wraps to the baseline's colour.
    rows = [R("", {}, "no-spec", is_baseline=True)]
    rows += [R("", {}, f"p{i}") for i in range(7)]
    rows += [R("", {}, "oracle", is_oracle=True)]
    styles = policy_styles(rows)
    assert styles["no-spec"].color == BASELINE_COLOR
    assert styles["oracle"].color == ORACLE_COLOR
    assert BASELINE_COLOR != ORACLE_COLOR
    others = [styles[f"p{i}"] for i in range(7)]
    assert len({s.color for s in others}) == 7
    assert not {s.color for s in others} & {BASELINE_COLOR, ORACLE_COLOR}


def test_policies_past_the_palette_differ_by_hatch():
    styles = policy_styles([R("", {}, f"p{i}") for i in range(10)])
    assert len(set(styles.values())) == 10


def test_grid_shape_holds_every_panel():
    for n in range(1, 30):
        rows, cols = grid_shape(n)
        assert rows * cols >= n > (rows - 1) * cols
        assert cols <= 5
