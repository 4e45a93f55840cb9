"""A line of a plot against GPU count is one configuration: runs that differ in knobs, or that reach the
same GPU count on a different number of nodes, are separate lines (never one zig-zag)."""

from __future__ import annotations

from pathlib import Path

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.plots import SERIES, series, throughput_plot
from hvdbench.analysis.tables.scaling import scaling_table
from hvdbench.core.spec import RunSpec


def test_knob_and_node_sweeps_draw_one_line_per_configuration(tmp_path: Path) -> None:
    for knob in ("1", "5"):
        env = (("HOROVOD_CYCLE_TIME", knob),)
        for np_, nodes in ((1, 1), (2, 1), (2, 2), (4, 2)):
            write_run(tmp_path, RunSpec(benchmark="cifar10", np=np_, nodes=nodes, env=env), [[0.1] * 25] * np_)
    table = scaling_table(collect([tmp_path]))
    lines = series(table)
    assert len(table) == 8
    for _, line in lines:
        assert line["np"].is_unique  # a GPU count appears once on a line
        assert line["knobs"].nunique() == 1
    labels = sorted((key[SERIES.index("knobs")], key[-1], tuple(line["np"])) for key, line in lines)
    assert labels == [("HOROVOD_CYCLE_TIME=1", "1 GPUs/node", (2,)), ("HOROVOD_CYCLE_TIME=1", "1 node", (1, 2)),
                      ("HOROVOD_CYCLE_TIME=1", "2 GPUs/node", (4,)),
                      ("HOROVOD_CYCLE_TIME=5", "1 GPUs/node", (2,)), ("HOROVOD_CYCLE_TIME=5", "1 node", (1, 2)),
                      ("HOROVOD_CYCLE_TIME=5", "2 GPUs/node", (4,))]
    svg = throughput_plot(table)
    assert svg is not None and svg.count("HOROVOD_CYCLE_TIME=5") >= 1



def test_twelve_lines_are_told_apart_and_a_wide_interval_leaves_the_scale_to_the_points(tmp_path: Path) -> None:
    """Every one of the twelve lines a plot holds has its own colour and marker (no grey, no colour twice), and an
    interval reaching far above the points runs off the top rather than flattening every line to the floor."""
    import re

    from hvdbench.analysis.report.plots import HEADROOM, PALETTE

    for knob in range(12):
        env = (("HOROVOD_CYCLE_TIME", str(knob + 1)),)
        for np_ in (1, 2):
            write_run(tmp_path, RunSpec(benchmark="cifar10", np=np_, env=env), [[0.1] * 25] * np_)
    table = scaling_table(collect([tmp_path]))
    top = float(table["throughput"].max())
    table.loc[table.index[0], "ci_high"] = 1750 * top  # one run's interval, as a stalled baseline gives
    svg = throughput_plot(table)
    assert svg is not None
    drawn = {colour for colour in PALETTE if f"stroke: {colour}" in svg}
    assert len(drawn) == 12 and "#7f7f7f" not in svg
    ticks = [float(t.replace(",", "")) for t in re.findall(r"<!-- ([\d,.]+) -->", svg)]
    assert ticks and max(ticks) <= HEADROOM * 2 * top * 1.2  # the scale is the points' and ideals', not 1,750×
