"""Inline SVG bar chart geometry for the replay result page."""

from __future__ import annotations

from governance.views.charts import grouped_bars, labelled_rows


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


def test_labelled_rows_scale_to_the_largest_and_keep_every_label():
    chart = labelled_rows(
        "Left out, by reason", [("Replaced", 4), ("Over the token budget", 2), ("Expired", 0)]
    )
    assert [row.label for row in chart.rows] == ["Replaced", "Over the token budget", "Expired"]
    assert [row.width for row in chart.rows] == [300.0, 150.0, 0.0]
    assert [row.y for row in chart.rows] == [0.0, 34.0, 68.0] and chart.height == 102
    assert not chart.empty and labelled_rows("Nothing", [("Replaced", 0)]).empty
