"""Parameter servers on ``P`` of ``N`` nodes (tf_cnn_benchmarks' EC2 tables ran 4 servers on 8 instances for
ResNet-152 and ResNet-50 at batch 32, 6 for Inception-v3) load most a node that holds one: its worker pushes
``(P-1)/P`` of the gradients to the other servers and its server answers ``N-1`` workers with ``1/P`` of the
parameters, ``(N+P-2)/P`` of the gradients each way, not a ring's ``2(N-1)/N``. Figures the model made with fewer
servers than nodes at the largest size are predicted back as made; with a server taken on every node they come out
high, as the published 8-node ResNet-152 did."""
from __future__ import annotations

import math

import pytest

from hvdbench.analysis.projection.backtest import Calibration, Family, Point, predict
from hvdbench.analysis.projection.exchange_model import SERVERS, Links, exchange_s, exchange_terms

GRAD = 241e6  # ResNet-152's 32-bit gradients
INTRA, INTER = 4e9, 2e9
PER_NODE, BATCH, COMPUTE_S = 8, 32, 1.65


def test_a_servers_node_moves_n_plus_p_minus_2_over_p_of_the_gradients_each_way() -> None:
    moved = {(n, p): exchange_terms(GRAD, n * PER_NODE, n, 5e-6, SERVERS, servers=p)[1] / GRAD
             for n, p in ((2, 2), (4, 4), (8, 8), (8, 6), (8, 4), (8, 1))}
    assert moved == pytest.approx({(2, 2): 1.0, (4, 4): 1.5, (8, 8): 1.75, (8, 6): 2.0, (8, 4): 2.5, (8, 1): 7.0})
    assert exchange_terms(GRAD, 64, 8, 5e-6, SERVERS)[1] == exchange_terms(GRAD, 64, 8, 5e-6, SERVERS, servers=8)[1]
    # on one node no server crosses a NIC: the count given for it changes nothing
    assert exchange_terms(GRAD, 8, 1, 5e-6, SERVERS, servers=1) == exchange_terms(GRAD, 8, 1, 5e-6, SERVERS)


def _family(at_eight: int | None) -> Family:
    """Figures at 1 GPU, one node of 8 and 2, 4, 8 nodes, each compute plus the model's exchange, with 4 servers on
    the 8 nodes; the family says ``at_eight`` servers there."""
    truth = Links(INTRA, INTER)
    points = []
    for nodes, ranks in ((1, 1), (1, PER_NODE), (2, 2 * PER_NODE), (4, 4 * PER_NODE), (8, 8 * PER_NODE)):
        step = COMPUTE_S + exchange_s(GRAD, ranks, nodes, truth, SERVERS, 4 if nodes == 8 else nodes)
        said = at_eight if nodes == 8 else nodes
        points.append(Point(nodes, ranks, BATCH, ranks * BATCH / step, servers=said))
    return Family("made", "published resnet152", "resnet152", tuple(points), GRAD, Links(None, None),
                  "distributed_replicated")


def test_figures_with_fewer_servers_than_nodes_are_predicted_back_as_made() -> None:
    rows = {row["nodes"]: row for row in predict(_family(4), calibrated=Calibration(0.0, 0.0))}
    assert sorted(rows) == [4, 8]
    for row in rows.values():
        assert row["algorithm"] == SERVERS
        assert math.isclose(row["predicted"], row["measured"], rel_tol=1e-6), row
    assert "8 nodes: 4 parameter servers, as the figure ran" in rows[8]["note"]
    assert "parameter servers, as the figure ran" not in rows[4]["note"]
    unsaid = {row["nodes"]: row for row in predict(_family(None), calibrated=Calibration(0.0, 0.0))}
    assert math.isclose(unsaid[4]["error"], 0.0, abs_tol=1e-9) and unsaid[8]["error"] > 0.04  # a server a node: high
