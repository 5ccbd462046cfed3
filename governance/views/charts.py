"""Geometry for the console's inline SVG bar charts (no chart library, no CDN).

Plain numbers in, rectangles out; the template draws them. Labels are fixed
vocabulary (reasons, token ranges) and are auto-escaped by the template anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Category labels are slanted this much (degrees) in the template; ~6 px a character at 11 px.
LABEL_ANGLE = 25
LABEL_CHAR_WIDTH = 6


@dataclass(frozen=True)
class Bar:
    series: str
    x: float
    y: float
    width: float
    height: float
    value: int


@dataclass(frozen=True)
class Group:
    label: str
    label_x: float
    bars: tuple[Bar, ...]


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class BarChart:
    title: str
    width: int
    height: int
    plot_left: int
    plot_bottom: float
    groups: tuple[Group, ...]
    ticks: tuple[Tick, ...]
    series: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not any(bar.value for group in self.groups for bar in group.bars)


def grouped_bars(
    title: str,
    categories: Sequence[str],
    series: Mapping[str, Sequence[int]],
    *,
    width: int = 720,
    height: int = 240,
) -> BarChart:
    """One group per category, one bar per series, on a shared scale from zero.

    Labels are drawn slanted under their group: the margins grow with the longest
    label so that none is cut off at the left or bottom edge."""
    longest = max((len(label) for label in categories), default=0) * LABEL_CHAR_WIDTH
    top = 12
    bottom = min(height // 2, max(40, round(longest * math.sin(math.radians(LABEL_ANGLE))) + 18))
    left = 44
    slot = (width - left - 8) / max(1, len(categories))
    # The first label reaches left of its group's centre by its slanted width.
    left = max(left, round(longest * math.cos(math.radians(LABEL_ANGLE)) - slot / 2) + 4)
    left = min(left, width // 3)
    plot_height = height - top - bottom
    names = tuple(series)
    # The scale tops out at a multiple of four, so the four gridlines sit on whole numbers.
    step = math.ceil(max([1, *(v for values in series.values() for v in values)]) / 4)
    peak = step * 4
    slot = (width - left - 8) / max(1, len(categories))
    bar_width = max(2.0, slot * 0.8 / max(1, len(names)))
    groups = []
    for index, label in enumerate(categories):
        start = left + index * slot + slot * 0.1
        bars = []
        for position, name in enumerate(names):
            value = int(series[name][index])
            bar_height = plot_height * value / peak
            bars.append(
                Bar(
                    series=name,
                    x=round(start + position * bar_width, 1),
                    y=round(top + plot_height - bar_height, 1),
                    width=round(bar_width - 1, 1),
                    height=round(bar_height, 1),
                    value=value,
                )
            )
        groups.append(Group(label=label, label_x=round(left + index * slot + slot / 2, 1), bars=tuple(bars)))
    ticks = tuple(Tick(value=step * i, y=round(top + plot_height - plot_height * i / 4, 1)) for i in range(5))
    return BarChart(
        title=title,
        width=width,
        height=height,
        plot_left=left,
        plot_bottom=top + plot_height,
        groups=tuple(groups),
        ticks=ticks,
        series=names,
    )


@dataclass(frozen=True)
class Segment:
    series: int  # index into StackedChart.series, for its colour class
    name: str
    y: float
    height: float
    value: int


@dataclass(frozen=True)
class Stack:
    label: str
    x: float
    width: float
    label_x: float
    total: int
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class StackedChart:
    title: str
    width: int
    height: int
    plot_left: int
    plot_bottom: float
    stacks: tuple[Stack, ...]
    ticks: tuple[Tick, ...]
    series: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not any(stack.total for stack in self.stacks)


def stacked_bars(
    title: str,
    categories: Sequence[str],
    series: Mapping[str, Sequence[int]],
    *,
    width: int = 720,
    height: int = 200,
) -> StackedChart:
    """One bar per category (a day), split by series (finding categories), on a scale from zero.
    Labels are horizontal and short (a date), so none is cut off."""
    left, top, bottom = 44, 12, 28
    plot_height = height - top - bottom
    names = tuple(series)
    totals = [sum(int(series[name][i]) for name in names) for i in range(len(categories))]
    step = math.ceil(max([1, *totals]) / 4)
    peak = step * 4
    slot = (width - left - 8) / max(1, len(categories))
    stacks = []
    for index, label in enumerate(categories):
        base: float = top + plot_height
        segments = []
        for position, name in enumerate(names):
            value = int(series[name][index])
            if not value:
                continue
            segment_height = plot_height * value / peak
            base -= segment_height
            segments.append(
                Segment(
                    series=position, name=name, y=round(base, 1), height=round(segment_height, 1), value=value
                )
            )
        stacks.append(
            Stack(
                label=label,
                x=round(left + index * slot + slot * 0.2, 1),
                width=round(slot * 0.6, 1),
                label_x=round(left + index * slot + slot / 2, 1),
                total=totals[index],
                segments=tuple(segments),
            )
        )
    ticks = tuple(Tick(value=step * i, y=round(top + plot_height - plot_height * i / 4, 1)) for i in range(5))
    return StackedChart(
        title=title,
        width=width,
        height=height,
        plot_left=left,
        plot_bottom=top + plot_height,
        stacks=tuple(stacks),
        ticks=ticks,
        series=names,
    )


@dataclass(frozen=True)
class Row:
    label: str
    value: int
    y: float  # top of the row; the label sits on it, the bar under it
    width: float


@dataclass(frozen=True)
class RowChart:
    """Horizontal bars, each labelled above its bar: long labels stay readable on a phone."""

    title: str
    width: int
    height: int
    rows: tuple[Row, ...]

    @property
    def empty(self) -> bool:
        return not any(row.value for row in self.rows)


def labelled_rows(title: str, rows: Sequence[tuple[str, int]], *, width: int = 360) -> RowChart:
    """One bar per (label, value), scaled to the largest; the value is written after the bar."""
    step, bar_room = 34, width - 60
    peak = max([1, *(value for _, value in rows)])
    drawn = tuple(
        Row(label=label, value=int(value), y=float(index * step), width=round(bar_room * value / peak, 1))
        for index, (label, value) in enumerate(rows)
    )
    return RowChart(title=title, width=width, height=max(step, len(drawn) * step), rows=drawn)
