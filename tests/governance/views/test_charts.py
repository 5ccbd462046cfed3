"""Inline SVG bar chart geometry for the replay result page."""

from __future__ import annotations

from governance.views.charts import grouped_bars, labelled_rows, stacked_bars


def test_bars_share_one_scale_from_zero_with_whole_number_gridlines():
    chart = grouped_bars("t", ["a", "b"], {"before": [6, 0], "after": [3, 1]}, width=400, height=200)
    [a, b] = chart.groups
    assert [bar.series for bar in a.bars] == ["before", "after"]
    assert [t.value for t in chart.ticks] == [0, 2, 4, 6, 8]  # 6 rounds up to a multiple of four
    tallest, half = a.bars
    assert tallest.height == round(2 * half.height, 1)
    assert tallest.y + tallest.height == chart.plot_bottom == half.y + half.height
    assert b.bars[0].height == 0
    assert a.label_x < b.label_x
    assert not chart.empty


def test_an_all_zero_chart_is_empty_but_still_drawable():
    chart = grouped_bars("t", ["a"], {"before": [0], "after": [0]})
    assert chart.empty
    assert [t.value for t in chart.ticks] == [0, 1, 2, 3, 4]


def test_stacked_bars_pile_each_days_categories_on_one_scale():
    chart = stacked_bars(
        "t", ["2026-11-29", "2026-11-30"], {"injection": [3, 0], "markup": [1, 2]}, width=400, height=200
    )
    first, second = chart.stacks
    assert first.total == 4 and second.total == 2
    assert [t.value for t in chart.ticks] == [0, 1, 2, 3, 4]
    lower, upper = first.segments
    # Stacked from the axis up, without gaps; a zero value draws nothing.
    assert lower.y + lower.height == chart.plot_bottom
    assert round(upper.y + upper.height, 1) == lower.y
    assert lower.height == round(3 * upper.height, 1)
    assert [s.name for s in second.segments] == ["markup"] and second.segments[0].series == 1
    assert not chart.empty
    assert stacked_bars("t", ["a"], {"x": [0]}).empty


def test_long_labels_get_room_so_none_is_cut_off():
    labels = ["Below the authority floor", "Too old to inject", "Over the token budget"]
    chart = grouped_bars("t", labels, {"before": [1, 2, 3], "after": [3, 2, 1]})
    longest = len(labels[0]) * 6
    first = chart.groups[0]
    # Slanted 25 degrees: the first label must fit left of its group, all of them above the bottom edge.
    assert first.label_x - longest * 0.906 >= 0
    assert chart.plot_bottom + longest * 0.423 <= chart.height


def test_labelled_rows_scale_to_the_largest_and_keep_every_label():
    chart = labelled_rows(
        "Left out, by reason", [("Replaced", 4), ("Over the token budget", 2), ("Expired", 0)]
    )
    assert [row.label for row in chart.rows] == ["Replaced", "Over the token budget", "Expired"]
    assert [row.width for row in chart.rows] == [300.0, 150.0, 0.0]
    assert [row.y for row in chart.rows] == [0.0, 34.0, 68.0] and chart.height == 102
    assert not chart.empty and labelled_rows("Nothing", [("Replaced", 0)]).empty
