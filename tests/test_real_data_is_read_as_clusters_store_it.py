"""Real data in the loop: datasets made here follow the published shapes of ImageNet's training set; each rank reads
its own shard (no sample twice in an epoch, across ranks or within one); corrupt, vanished, empty or too-small
datasets are one line or counted and named, never silently skipped; a run reading files reports how long its steps
waited and how it compares with synthetic batches. Datasets here stay a few MB."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from hvdbench.suite.datamake import IMAGENET, MEAN_FILE_BYTES, make_dataset
from hvdbench.core.datasets import MANIFEST, check_enough, index, shard_ids
from hvdbench.core.errors import UsageError


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet")
    make_dataset("imagenet", root / "folder", "folder", 120, 7)
    make_dataset("imagenet", root / "wds", "webdataset", 40, 7)
    return root


def test_made_imagenet_follows_ilsvrc_2012s_pixel_and_byte_sizes(images: Path) -> None:
    """120 images: mean pixel size within 5% of ILSVRC-2012's 469 x 387, mean file within 20% of its 115 kB; the
    manifest counts what was made; the same seed makes the same bytes (the webdataset's first 40 are the folder's)."""
    from PIL import Image

    idx = index(images / "folder", "imagenet")
    sizes = [Image.open(p.path).size for p in idx.places]
    width, height = np.mean([s[0] for s in sizes]), np.mean([s[1] for s in sizes])
    assert abs(width / IMAGENET["mean_width"] - 1) < 0.05 and abs(height / IMAGENET["mean_height"] - 1) < 0.05
    mean_bytes = idx.bytes / len(idx)
    assert abs(mean_bytes / MEAN_FILE_BYTES - 1) < 0.20, mean_bytes
    assert len(idx) == 120 and idx.layout == "folder" and idx.classes == 15
    import json

    manifest = json.loads((images / "folder" / MANIFEST).read_text())
    assert manifest["samples"] == 120 and manifest["bytes"] >= idx.bytes and len(manifest["sha256"]) == 64
    shards = index(images / "wds", "imagenet")
    assert shards.layout == "webdataset" and len(shards) == 40 and all(p.label >= 0 for p in shards.places)


def test_no_sample_is_read_twice_in_an_epoch_across_ranks() -> None:
    for count, size in ((1000, 4), (997, 3), (8, 8)):
        for epoch in range(3):
            shards = [shard_ids(count, rank, size, epoch, seed=5) for rank in range(size)]
            together = np.concatenate(shards)
            assert len(set(together.tolist())) == len(together) == size * (count // size)
            assert {len(s) for s in shards} == {count // size}
    assert not np.array_equal(shard_ids(100, 0, 2, 0, 5), shard_ids(100, 0, 2, 1, 5))  # a new order each epoch


def test_each_rank_and_worker_reads_its_own_samples(images: Path) -> None:
    """Two ranks, two workers each, one epoch of the webdataset through the dataset itself: every sample once."""
    from hvdbench.suite.filedata import Samples

    idx = index(images / "wds", "imagenet")
    seen: list[str] = []
    for rank in range(2):
        for worker in range(2):
            samples = Samples(idx, rank, 2, 1, 3, lambda data, _, label, g: len(data), lambda s: s)
            import torch.utils.data as tud

            class Info:
                id, num_workers = worker, 2
            original = tud.get_worker_info
            tud.get_worker_info = lambda: Info()  # type: ignore[assignment]
            try:
                stream = iter(samples)
                for _ in range(len(shard_ids(len(idx), rank, 2, 0, 3)[worker::2])):
                    batch, tally = next(stream)
                    seen.append(str(batch[0]))
                    assert tally.read == 1 and tally.corrupt == 0
            finally:
                tud.get_worker_info = original
    assert len(seen) == 40


@pytest.mark.bad_input
def test_corrupt_vanished_empty_and_small_datasets_are_said(images: Path, tmp_path: Path) -> None:
    from hvdbench.suite.filedata import Samples, decode_image

    bad = tmp_path / "bad"
    subprocess.run(["cp", "-r", str(images / "folder"), str(bad)], check=True)
    idx = index(bad, "imagenet")
    Path(idx.places[0].path).write_bytes(b"x" * idx.places[0].size)  # as long as it was: no JPEG
    Path(idx.places[1].path).unlink()  # vanished after it was indexed
    stream = iter(Samples(idx, 0, 1, 4, 1, decode_image(32), lambda s: len(s)))
    corrupt, named = 0, []
    for _ in range(60):  # two epochs: each bad file met twice, counted each time
        _, tally = next(stream)
        corrupt += tally.corrupt
        named += tally.named
    assert corrupt == 4 and any("corrupt (UnidentifiedImageError" in n for n in named), named
    assert any("unreadable (No such file or directory)" in n for n in named)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no files"):
        index(tmp_path / "empty", "imagenet")
    with pytest.raises(UsageError, match="fewer than 8 rank"):
        check_enough(index(images / "wds", "imagenet"), 8, 8)
    with pytest.raises(UsageError, match="no speech samples"):
        index(images / "folder", "speech")
    with pytest.raises(UsageError, match="exists and is not empty"):
        make_dataset("imagenet", images / "folder", "folder", 2, 0)
    with pytest.raises(UsageError, match="imagenet only"):
        make_dataset("speech", tmp_path / "tf", "tfrecord", 2, 0)


@pytest.mark.bad_input
@pytest.mark.parametrize("args, said", [
    (("--data", "files"), "--data files needs --data-dir"),
    (("--data-dir", "/x"), "--data-dir applies with --data files"),
    (("--data-only",), "--data-only applies with --data files"),
])
def test_data_flags_are_checked_before_any_rank_starts(args: tuple[str, ...], said: str) -> None:
    from hvdbench.core.catalog import get_benchmark

    with pytest.raises(UsageError, match=said):
        get_benchmark("imagenet").check(args)
    with pytest.raises(UsageError, match="reads no dataset"):
        get_benchmark("mlp").check(("--data", "files", "--data-dir", "/x"))


@pytest.mark.slow
def test_files_against_synthetic_on_two_ranks_gives_the_data_path_table(images: Path, tmp_path: Path) -> None:
    """imagenet on 2 CPU ranks: synthetic, files (folder, 1 worker) and the pipeline alone: the report's data path
    row pairs them, with the wait share, the loader's rate against training's and a verdict."""
    from hvdbench.cli import main

    common = ("--model", "resnet50", "--batch-size", "4", "--image-size", "32", "--steps", "6", "--warmup-steps", "2",
              "--device", "cpu", "--threads", "1", "--telemetry-interval", "0")
    files = ("--data", "files", "--data-dir", str(images / "folder"), "--loader-workers", "1")
    for extra in ((), files, (*files, "--data-only")):
        assert main(["run", "imagenet", "--np", "2", "-o", str(tmp_path / "r"), "--no-report", "--",
                     *common, *extra]) == 0
    assert main(["report", str(tmp_path / "r"), "-o", str(tmp_path / "out"), "--min-runs", "1"]) == 0
    import pandas as pd

    row = pd.read_csv(tmp_path / "out" / "datapath.csv").iloc[0]
    assert row["np"] == 2 and row["workers"] == 1 and row["layout"] == "folder"
    assert row["synthetic"] > 0 and row["files"] > 0 and row["alone_per_rank"] > 0 and 0 <= row["wait_share"] < 1
    assert isinstance(row["verdict"], str) and row["verdict"]
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    reading = runs[runs["data"] == "files"]
    assert (reading["bytes_read"] > 0).all() and (reading["data_corrupt"] == 0).all()


@pytest.mark.slow
@pytest.mark.tf
def test_tf_data_reads_tfrecord_shards_each_rank_its_records(tmp_path: Path) -> None:
    """tf_imagenet on 2 CPU ranks from TFRecord shards (ImageNet's own layout): every step waited and read bytes."""
    pytest.importorskip("tensorflow")
    from hvdbench.cli import main

    make_dataset("imagenet", tmp_path / "tfr", "tfrecord", 24, 3)
    assert main(["run", "tf_imagenet", "--np", "2", "-o", str(tmp_path / "r"), "--no-report", "--", "--model",
                 "resnet50", "--batch-size", "2", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
                 "--device", "cpu", "--telemetry-interval", "0", "--data", "files", "--data-dir",
                 str(tmp_path / "tfr"), "--loader-workers", "1"]) == 0
    from hvdbench.analysis.collect import collect

    run = collect([tmp_path / "r"]).runs.iloc[0]
    assert run["status"] == "ok" and run["data_layout"] == "tfrecord" and run["bytes_read"] > 0


@pytest.mark.slow
def test_dalis_cpu_pipeline_feeds_imagenet_where_dali_is_installed(images: Path, tmp_path: Path) -> None:
    """--loader dali on one CPU rank (DALI's CPU pipeline runs without a GPU); skipped where its wheel is absent."""
    pytest.importorskip("nvidia.dali")
    from hvdbench.cli import main

    assert main(["run", "imagenet", "--np", "1", "-o", str(tmp_path / "r"), "--no-report", "--", "--model",
                 "resnet50", "--batch-size", "4", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
                 "--device", "cpu", "--telemetry-interval", "0", "--data", "files", "--data-dir",
                 str(images / "folder"), "--loader", "dali", "--loader-workers", "1"]) == 0


def test_the_data_path_says_input_bound_where_the_loader_gives_less_than_training_asks() -> None:
    """Planted: training asks 950 images/s a rank (synthetic), the loader alone gives 410 with 4 workers, reading files
    trains at 400 with 55% of step time waiting: input-bound, 2.3x short; 2.3 cores a GPU per worker's 102.5/s; the
    storage a node needs at the GPUs' rate from the dataset's bytes a sample; utilization 45%, below MLPerf's 90%."""
    import pandas as pd

    from hvdbench.analysis.tables.datapath import datapath_table

    base = {"system": "s", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "inputs": "",
            "nodes": 1, "np": 8, "repeats": 3, "unit": "images"}
    rows = [{**base, "args": "--model resnet50", "data": "device", "runs": "a1,a2,a3", "throughput": 7600.0},
            {**base, "args": "--model resnet50 --data files --data-dir /d --loader-workers 4", "data": "files",
             "runs": "b1,b2,b3", "throughput": 3200.0},
            {**base, "args": "--model resnet50 --data files --data-dir /d --loader-workers 4 --data-only",
             "data": "files", "runs": "c1,c2,c3", "throughput": 3280.0}]
    runs = pd.DataFrame([{"run_id": f"{k}{i}", "input_wait_s": 55.0 if k == "b" else 0.0, "step_time_s": 100.0,
                          "bytes_read": 1e9, "dataset_bytes": 115e9, "dataset_samples": 1e6, "data_only": k == "c",
                          "loader_workers": 4 if k != "a" else None, "data_layout": "folder" if k != "a" else None,
                          "data_loader": "torch" if k != "a" else None} for k in "abc" for i in (1, 2, 3)])
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rows)
    draws = {f"{k}{i}": thr / 3 * (1 + 0.01 * rng.standard_normal(500)) for k, thr in
             (("a", 7600.0), ("b", 3200.0), ("c", 3280.0)) for i in (1, 2, 3)}
    [row] = datapath_table(table, runs, draws).itertuples()
    assert row.verdict == "input-bound: the loader gives 410.0/s a rank, training asks 950.0: 2.3× short"
    assert row.wait_share == pytest.approx(0.55) and row.au == pytest.approx(0.45)
    assert row.cores_per_gpu == pytest.approx(950 / (410 / 4))
    assert row.node_mb_s == pytest.approx(115e3 * 7600 / 1e6) and row.cluster_mb_s == pytest.approx(16 * row.node_mb_s)
    assert row.ratio_high < 1 and row.loader == "torch" and row.workers == 4
