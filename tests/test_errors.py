"""Input errors cross process boundaries intact: a sweep or study worker's bad input reaches
the parent as the same error with the same message, not as a broken process pool."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from simspec.errors import FieldError, InputError, ScenarioError


def _raise_scenario_error(_: int) -> None:
    raise ScenarioError("s.toml", "costs.top_p", "one of the keys ...", "an unknown key", "Hint.")


@pytest.mark.parametrize(
    "error",
    [
        InputError("m.csv", "row 2, column value", "a number", "'fast'"),
        ScenarioError("s.toml", "offload.cache_gb", "at most 24", "30", "Use less."),
        FieldError("overlap", "a number in [0, 1)", 1.5),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_survive_pickling(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)


def test_a_workers_input_error_reaches_the_parent():
    with ProcessPoolExecutor(1) as pool, pytest.raises(ScenarioError) as caught:
        list(pool.map(_raise_scenario_error, [0]))
    assert caught.value.key_path == "costs.top_p"
    assert str(caught.value).endswith("found an unknown key. Hint.")
