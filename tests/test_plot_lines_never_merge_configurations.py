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

