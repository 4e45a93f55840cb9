"""Real data in the loop: datasets made here follow the published shapes of ImageNet's training set; each rank reads
its own shard (no sample twice in an epoch, across ranks or within one); corrupt, vanished, empty or too-small
datasets are one line or counted and named, never silently skipped; a run reading files reports how long its steps
waited and how it compares with synthetic batches. Datasets here stay a few MB."""

from __future__ import annotations

import os
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
def test_a_sweep_of_layouts_against_synthetic_gives_the_data_path_table(images: Path, tmp_path: Path) -> None:
    """imagenet on 2 CPU ranks, swept: data device|files x data_dir folder|webdataset x data_only, from a cold page
    cache: the synthetic run is made once (the --data files options left off it), the report's
    data path rows pair each layout with it, with the wait share, the loader's rate against training's, the page cache
    and a verdict; the knob table compares the two layouts."""
    from hvdbench.cli import main

    common = ["--model", "resnet50", "--batch-size", "4", "--image-size", "32", "--steps", "6", "--warmup-steps", "2",
              "--device", "cpu", "--threads", "1", "--telemetry-interval", "0", "--loader-workers", "1"]
    sweep = tmp_path / "data.yaml"
    sweep.write_text(f"""name: data
repeats: 1
baseline: false
workloads:
  - benchmark: imagenet
    args: {common}
axes:
  np: [2]
  data: [device, files]
  data_dir: [{images / "folder"}, {images / "wds"}]
  data_only: [false, true]
  data_cache: [cold]
""", encoding="utf-8")
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "r"), "--no-report"]) == 0
    assert main(["report", str(tmp_path / "r"), "-o", str(tmp_path / "out"), "--min-runs", "1"]) == 0
    import pandas as pd

    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert len(runs) == 5 and (runs["data"] == "device").sum() == 1  # the synthetic run once, not once a layout
    reading = runs[runs["data"] == "files"]
    assert (reading["bytes_read"] > 0).all() and (reading["data_corrupt"] == 0).all()
    assert set(reading["data_cache"]) == {"cold"} and set(reading["loader_workers"]) == {1}
    rows = pd.read_csv(tmp_path / "out" / "datapath.csv").sort_values("layout")
    assert list(rows["layout"]) == ["folder", "webdataset"]
    for row in rows.itertuples():
        assert row.np == 2 and row.workers == 1 and row.cache.startswith("cold start")
        assert row.synthetic > 0 and row.files > 0 and row.alone_per_rank > 0 and 0 <= row.wait_share < 1
        assert isinstance(row.verdict, str) and row.verdict
    knobs = pd.read_csv(tmp_path / "out" / "knobs.csv")
    assert {"folder", "wds"} == set(knobs[knobs["knob"] == "data_dir"][["base_value", "value"]].values.ravel())


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
    assert row.per_core == pytest.approx(102.5) and row.gpu_need == (
        "a core decodes 102 images/s: a GPU asking R/s needs R / 102 cores")  # no GPU rank in these results
    gpu = pd.DataFrame([{**base, "system": "h", "args": "--model resnet50", "data": "device", "runs": "g1",
                         "throughput": 8 * 2500.0, "device_name": "NVIDIA H100 80GB HBM3"}])
    cpu = table.assign(device_name="AMD EPYC 7763 64-Core Processor")
    [row] = datapath_table(pd.concat([cpu, gpu], ignore_index=True), runs, draws).itertuples()
    assert row.gpu_need == "NVIDIA H100 80GB HBM3 at 2,500 images/s a rank needs about 24.4 cores"
    from hvdbench.analysis.tables.datapath import cores

    assert (cores(0.034), cores(2.34), cores(24.4), cores(float("nan"))) == ("0.034", "2.3", "24", "n/a")


def test_the_page_cache_is_dropped_warmed_and_measured(tmp_path: Path) -> None:
    """A file's pages dropped (cold) read back as 0% resident, read once (warm) as 100%; a file the kernel would not
    report on (not ours, not writable) is unknown, never a guess; the facts a rank records say so."""
    from hvdbench.core import pagecache

    data = tmp_path / "shard.tar"
    data.write_bytes(np.random.default_rng(0).bytes(4 << 20))
    with open(data, "rb+") as handle:
        os.fsync(handle.fileno())  # dirty pages cannot be dropped
    facts = pagecache.prepare([str(data)], "cold", 4 << 20)
    assert facts["cache"] == "cold" and facts["resident_start"] == pytest.approx(0.0, abs=0.05)
    assert facts["fits_in_memory"] is True and facts["mem_available"] > 0
    assert pagecache.prepare([str(data)], "warm", 4 << 20)["resident_start"] == pytest.approx(1.0)
    assert pagecache.resident_share([]) is None


def test_a_dataset_read_twice_from_memory_is_flagged_served_from_memory() -> None:
    """Planted runs: resident at the start, or smaller than free memory and read 2.5 times on one node: served from
    memory; larger than memory: from storage; a cold start says so and what followed."""
    import pandas as pd

    from hvdbench.analysis.tables.datapath import page_cache

    def runs(cache: str, resident: float, fits: bool, read: int) -> pd.DataFrame:
        return pd.DataFrame([{"data_cache": cache, "data_resident": resident, "data_fits": fits, "data_read": read,
                              "dataset_samples": 100}])

    assert page_cache(runs("as-is", 0.97, True, 50), 1).startswith("served from memory (97% resident")
    assert page_cache(runs("as-is", 0.1, True, 250), 1).startswith("served from memory after its first pass")
    assert page_cache(runs("as-is", 0.1, True, 250), 2).startswith("from storage (10% resident")
    assert page_cache(runs("as-is", 0.84, True, 50), 2).startswith("mostly from memory (84% resident at the start") \
        and "not a storage figure" in page_cache(runs("as-is", 0.84, True, 50), 2)
    assert page_cache(runs("as-is", 0.0, False, 250), 1).startswith("from storage: larger than free memory")
    assert page_cache(runs("cold", 0.0, True, 250), 1) == \
        "cold start (its pages dropped); served from memory after its first pass, 2.5 passes"


def test_loader_and_layout_are_sweep_axes_each_framework_its_own_loaders(images: Path, tmp_path: Path) -> None:
    """loader torch|dali|tfdata x data device|files over imagenet and tf_imagenet: PyTorch runs torch and dali,
    TensorFlow tf.data (each other pairing left out with a line), the synthetic runs once a framework."""
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.sweep import load_sweep

    sweep = tmp_path / "loaders.yaml"
    sweep.write_text(f"""baseline: false
workloads:
  - {{benchmark: imagenet, args: [--device, cpu]}}
  - {{benchmark: tf_imagenet, args: [--device, cpu]}}
axes:
  np: [2]
  data: [device, files]
  loader: [torch, dali, tfdata]
  data_dir: [{images / "folder"}]
""", encoding="utf-8")
    made = plan(load_sweep(sweep))
    runs = sorted((r.benchmark, " ".join(a for a in r.args if a in ("files", "dali", "tfdata", "device")))
                  for r in made.specs)
    assert runs == [("imagenet", "device"), ("imagenet", "files"), ("imagenet", "files dali"),
                    ("tf_imagenet", "device"), ("tf_imagenet", "files")]
    assert any("loader dali on tensorflow workloads: theirs are tfdata" in line for line in made.skipped)
    assert any("loader tfdata on pytorch workloads" in line for line in made.skipped)


def test_translation_reads_sentence_pairs_as_its_synthetic_batches_are_shaped(tmp_path: Path) -> None:
    """Sentence pairs of token ids (WebDataset) through the trainer's reader: source ids and lengths cut at
    --src-max-len, decoder inputs behind BOS, targets padded with PAD, ids folded into the model's vocabulary."""
    from hvdbench.core.catalog import get_benchmark
    import torch

    from hvdbench.suite.filedata import FileBatches
    from hvdbench.suite.synthetic import BOS, PAD

    make_dataset("translation", tmp_path / "wds", "webdataset", 16, 2)
    flags = get_benchmark("translation").check(["--batch-size", "4", "--vocab", "50", "--src-max-len", "8",
                                                "--data", "files", "--data-dir", str(tmp_path / "wds"),
                                                "--loader-workers", "0"])
    (src, src_len, tgt_in, tgt), read = FileBatches("translation", flags, 0, 2, torch.device("cpu")).next()
    assert src.shape[0] == 4 and src.shape[1] == int(src_len.max()) <= 8 and read["bytes_read"] > 0
    assert (tgt_in[:, 0] == BOS).all() and tgt_in.shape == tgt.shape and (tgt[:, 0] != PAD).all()
    assert int(src.max()) < 50 and int(tgt.max()) < 50
    assert ((tgt != PAD).sum(1) == (tgt_in != PAD).sum(1)).all()


def test_the_summary_names_the_data_path_and_reading_files_is_no_tuning_choice() -> None:
    """The executive summary carries each files configuration's ratio and verdict; the best configuration sets
    synthetic runs against each other (files are other work, said in the data path), a workload measured only from
    files says so; run details say where each run's batches came from."""
    import pandas as pd

    from hvdbench.analysis.tables.datapath import datapath_summary
    from hvdbench.analysis.tables.details import batches_said
    from hvdbench.analysis.tables.summary import best_configurations, describe

    path = pd.DataFrame([{"system": "s", "benchmark": "imagenet", "model": "resnet50", "np": 8, "ratio": 0.42,
                          "ratio_low": 0.41, "ratio_high": 0.43, "verdict": "input-bound: 2.3× short"}])
    assert datapath_summary(path) == ["  Data path: s imagenet resnet50 at 8 rank(s) reading files: 0.42 [0.41–0.43]× "
                                      "synthetic; input-bound: 2.3× short (see Data path)."]
    base = {"system": "s", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "np": 8,
            "independent": False, "launcher": "horovodrun", "controller": "gloo", "data_only": False}
    table = pd.DataFrame([{**base, "data": "device", "throughput": 7600.0, "runs": "a"},
                          {**base, "data": "files", "throughput": 7700.0, "runs": "b"},
                          {**base, "model": "resnet18", "data": "files", "throughput": 9000.0, "runs": "c"}])
    best = best_configurations(table).set_index("model")
    assert best.loc["resnet50", "runs"] == "a" and best.loc["resnet18", "runs"] == "c"
    assert "reading files" in describe(best.loc["resnet18"]) and "data" not in describe(best.loc["resnet50"])

    class Run:
        data, data_loader, loader_workers, data_layout, data_only = "files", "torch", 4, "folder", False

    assert batches_said(Run()) == "files (folder, torch, 4 workers)"
    Run.data_only = True
    assert batches_said(Run()) == "pipeline alone: files (folder, torch, 4 workers), no model"
    Run.data, Run.data_loader = "host", None
    assert batches_said(Run()) == "synthetic (host)"
