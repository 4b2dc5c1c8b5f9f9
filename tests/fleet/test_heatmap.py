"""The per-node heat map: an unfit GPU never looks green, and every label fits, none overlapping
(checked on the figure's text extents, not on pixels)."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

from gpu_audit.fleet.judge import judge_fleet
from gpu_audit.fleet.nodes import node_from_document
from gpu_audit.fleet.render import OWN, SATURATION, heatmap_figure, node_scores
from tests.fleet.synth import node_document

A100 = "NVIDIA A100-SXM4-80GB"


def report_of(documents):
    nodes = [node_from_document(d, f"docs/n{i}.json") for i, d in enumerate(documents)]
    return judge_fleet(nodes, source="merge")


def lone_unfit_gpu():
    """Three healthy H100 nodes and one node whose only GPU, the fleet's one A100, is unfit."""
    docs = [node_document(i, gpus=2) for i in range(3)]
    docs.append(node_document(3, gpus=1, status="CRITICAL", hostname="gpu00000",
                              gpu_changes={0: {"name": A100,
                                               "ecc_errors_uncorrected_volatile": 4}}))
    return report_of(docs)


def test_an_unfit_gpu_without_peers_is_not_green():
    report = lone_unfit_gpu()
    scores, values = node_scores(report)
    assert scores.columns[0] == OWN
    assert scores.loc["gpu00000", OWN] == SATURATION and values.loc["gpu00000", OWN] == \
        "gpu-health"
    # No same-model peer: no distance at all (grey), never "at the median" (0, green).
    assert scores.drop(columns=OWN).loc["gpu00000"].isna().all()
    assert (scores.drop(index="gpu00000")[OWN] == 0).all()
    fig = heatmap_figure(report)
    try:
        image = fig.axes[0].images[0]
        row = list(scores.index).index("gpu00000")
        red, green, _, _ = image.to_rgba(image.get_array()[row, 0])
        assert red > 0.5 and green < 0.3  # the own-verdict cell is red
        cells = image.get_array()[row, 1:]
        assert cells.mask.all()  # drawn in the "no reading" grey
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_sixty_four_nodes_fit_every_label_without_overlap():
    docs = [node_document(i, gpus=2, hostname=f"gpu-node-with-a-long-name-{i:05d}")
            for i in range(64)]
    docs[5]["snapshot"]["gpus"][0]["temperature_c"] = 90
    fig = heatmap_figure(report_of(docs))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        ax = fig.axes[0]
        colorbar = fig.axes[1]
        texts = [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.title,
                 colorbar.yaxis.label, *colorbar.get_yticklabels()]
        assert colorbar.yaxis.label.get_text().startswith("distance on the bad side")
        for text in texts:
            if not text.get_text():
                continue
            extent = text.get_window_extent(renderer)
            assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1, text.get_text()
            assert extent.y0 >= box.y0 - 1 and extent.y1 <= box.y1 + 1, text.get_text()
        labels = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert len(labels) == 7
        for one, other in itertools.combinations(labels, 2):
            assert not one.overlaps(other)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
