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
class Scale:
    """The value axis, from zero at the plot's bottom. It tops out at a multiple of four,
    so the four gridlines sit on whole numbers."""

    top: int
    plot_height: int
    step: int

    @classmethod
    def fitting(cls, largest: int, *, top: int, plot_height: int) -> Scale:
        return cls(top=top, plot_height=plot_height, step=math.ceil(max(1, largest) / 4))

    @property
    def bottom(self) -> int:
        return self.top + self.plot_height

    def height(self, value: int) -> float:
        """How tall ``value`` is drawn."""
        return self.plot_height * value / (self.step * 4)

    def ticks(self) -> tuple[Tick, ...]:
        return tuple(
            Tick(value=self.step * i, y=round(self.bottom - self.plot_height * i / 4, 1)) for i in range(5)
        )


@dataclass(frozen=True)
class Chart:
    """What a vertical bar chart's template draws around the bars: the box, the value
    axis with its gridlines, and the series' names."""

    title: str
    width: int
    height: int
    plot_left: int
    scale: Scale
    series: tuple[str, ...]

    @property
    def plot_bottom(self) -> int:
        return self.scale.bottom

    @property
    def ticks(self) -> tuple[Tick, ...]:
        return self.scale.ticks()


@dataclass(frozen=True)
class BarChart(Chart):
    groups: tuple[Group, ...]

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
    names = tuple(series)
    scale = Scale.fitting(
        max((v for values in series.values() for v in values), default=0),
        top=top,
        plot_height=height - top - bottom,
    )
    slot = (width - left - 8) / max(1, len(categories))
    bar_width = max(2.0, slot * 0.8 / max(1, len(names)))
    groups = []
    for index, label in enumerate(categories):
        start = left + index * slot + slot * 0.1
        bars = []
        for position, name in enumerate(names):
            value = int(series[name][index])
            bar_height = scale.height(value)
            bars.append(
                Bar(
                    series=name,
                    x=round(start + position * bar_width, 1),
                    y=round(scale.bottom - bar_height, 1),
                    width=round(bar_width - 1, 1),
                    height=round(bar_height, 1),
                    value=value,
                )
            )
        groups.append(Group(label=label, label_x=round(left + index * slot + slot / 2, 1), bars=tuple(bars)))
    return BarChart(title, width, height, left, scale, names, groups=tuple(groups))


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
class StackedChart(Chart):
    stacks: tuple[Stack, ...]

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
    names = tuple(series)
    totals = [sum(int(series[name][i]) for name in names) for i in range(len(categories))]
    scale = Scale.fitting(max(totals, default=0), top=top, plot_height=height - top - bottom)
    slot = (width - left - 8) / max(1, len(categories))
    stacks = []
    for index, label in enumerate(categories):
        base: float = scale.bottom
        segments = []
        for position, name in enumerate(names):
            value = int(series[name][index])
            if not value:
                continue
            segment_height = scale.height(value)
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
    return StackedChart(title, width, height, left, scale, names, stacks=tuple(stacks))


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
