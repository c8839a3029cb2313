"""How a sweep's rows map onto a figure: panels, lines, groups, colours (no matplotlib here).

A sweep point is named by its case and its axis values. Not every axis deserves a line or a
label of its own: an axis of tables sets several keys together (``workload.concurrency`` and
``workload.num_requests`` of one batch), so once one of them is on the x axis the others add
nothing. :func:`free_keys` keeps, in grid order, only the keys whose value is not already fixed
by the case, the given keys and the keys kept before it; the rest vary *together* with those.

Colours: the k = 0 baseline is always grey and the hindsight oracle always black, whatever
their position in the list, so the two reference bars can never share a colour with each other
or with a policy; the other policies take the Okabe-Ito colours in order (and a hatch once the
seven colours are used up).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from simspec.plots import PALETTE

BATCH = "workload.concurrency"
BASELINE_COLOR = "#999999"
ORACLE_COLOR = "#000000"
#: Policy colours: the Okabe-Ito palette without its black (reserved for the oracle).
POLICY_COLORS = PALETTE[:-1]
#: Further distinct colours (Paul Tol's "muted" scheme) for figures with more lines than
#: :data:`POLICY_COLORS`: :func:`line_colors`.
MORE_COLORS = ("#882255", "#44AA99", "#999933", "#AA4499", "#117733", "#332288", "#DDCC77")


def line_colors(n: int) -> tuple[str, ...]:
    """``n`` colours, all distinct while ``n`` is at most 14, then repeating."""
    colors = POLICY_COLORS + MORE_COLORS
    return tuple(colors[i % len(colors)] for i in range(n))


_HATCHES = ("", "//", "..", "xx")


class Row(Protocol):
    """What the layout needs of a summary row (:class:`simspec.sweep.summary.PolicySummary`)."""

    @property
    def case(self) -> str: ...
    @property
    def values(self) -> Mapping[str, Any]: ...
    @property
    def policy(self) -> str: ...
    @property
    def is_baseline(self) -> bool: ...
    @property
    def is_oracle(self) -> bool: ...


class Style(NamedTuple):
    """How one policy is drawn."""

    color: str
    hatch: str


def axis_keys(rows: Iterable[Row]) -> list[str]:
    """The axis keys the rows set, in grid order."""
    return list(dict.fromkeys(k for r in rows for k in r.values))


def _text(row: Row, key: str) -> str:
    return str(row.values.get(key, ""))


def free_keys(rows: Sequence[Row], given: Sequence[str] = ()) -> list[str]:
    """Axis keys (not in ``given``) that vary independently of the case, ``given`` and each other.

    A key is dropped when, over ``rows``, its value is a function of the case, the ``given``
    keys and the keys already kept: it is then constant or tied to them (e.g. set by the same
    axis of tables).
    """
    kept: list[str] = []
    for key in axis_keys(rows):
        if key in given:
            continue
        seen: dict[tuple[str, ...], str] = {}
        for row in rows:
            where = (row.case, *(_text(row, k) for k in (*given, *kept)))
            if seen.setdefault(where, _text(row, key)) != _text(row, key):
                kept.append(key)
                break
    return kept


def describe(row: Row, keys: Sequence[str], *, case: bool = True) -> str:
    """A short name of the row's point: its case (when ``case``) and ``key=value`` per key."""
    parts = ([row.case] if case and row.case else []) + [
        f"{k.split('.')[-1]}={_text(row, k)}" for k in keys
    ]
    return " · ".join(parts)


def cases(rows: Iterable[Row]) -> list[str]:
    """The cases of the rows, in the sweep's order."""
    return list(dict.fromkeys(r.case for r in rows))


def policy_styles(rows: Iterable[Row]) -> dict[str, Style]:
    """Colour (and hatch) per policy label, in first-seen order; baseline grey, oracle black."""
    styles: dict[str, Style] = {}
    n = 0
    for row in rows:
        if row.policy in styles:
            continue
        if row.is_baseline:
            styles[row.policy] = Style(BASELINE_COLOR, "")
        elif row.is_oracle:
            styles[row.policy] = Style(ORACLE_COLOR, "")
        else:
            hatch = _HATCHES[(n // len(POLICY_COLORS)) % len(_HATCHES)]
            styles[row.policy] = Style(POLICY_COLORS[n % len(POLICY_COLORS)], hatch)
            n += 1
    return styles


def grid_shape(panels: int, max_columns: int = 5) -> tuple[int, int]:
    """(rows, columns) of a grid of ``panels`` small multiples."""
    columns = max(1, min(max_columns, panels))
    return -(-panels // columns), columns
