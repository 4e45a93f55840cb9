"""The options that size each model family, declared once as frozen dataclasses of ``flag()`` fields (as the shared
flags are, core/train_flags.py): a benchmark's catalog entry names the declarations its parser adds, in order, and
the flags that name files (``path=True``), what fixes its FLOPs (``BenchmarkInfo.sizing``) and its parser all come
from them; each field is typed as its flag parses. Importable without a framework."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .flags import int_list, positive_int
from .idx import DEBIAN_DIR
from .train_flags import flag
from .validate import finite

RNN_IMPLS = ("fused", "unrolled")


def seconds_distribution(text: str) -> tuple[str, tuple[float, ...]]:
    """argparse type: ``normal:MEAN:STD:MIN:MAX``, ``uniform:MIN:MAX`` or ``fixed:SECONDS``."""
    kind, _, rest = text.partition(":")
    arity = {"normal": 4, "uniform": 2, "fixed": 1}
    try:
        values = tuple(finite(v) for v in rest.split(":")) if rest else ()
    except ValueError:  # not a number, or nan/inf
        values = ()
    if kind not in arity or len(values) != arity[kind] or min(values, default=0) < 0 \
            or (kind != "fixed" and values[-2] > values[-1]) or (kind == "fixed" and values[0] <= 0):
        raise argparse.ArgumentTypeError(
            f"expected normal:MEAN:STD:MIN:MAX, uniform:MIN:MAX or fixed:SECONDS, got {text!r}")
    return kind, values


MLP_WIDTHS = (4096, 4096)


@dataclass(frozen=True)
class Mlp:
    """The fully connected network's shape."""

    mlp_input: int = flag(1024, "--mlp-input", "input features", parse=positive_int)
    mlp_widths: list[int] = flag(MLP_WIDTHS, "--mlp-widths", "hidden widths, e.g. 4096,4096",
                                 parse=int_list("hidden widths"), default_of=lambda _: list(MLP_WIDTHS))
    mlp_classes: int = flag(10, "--mlp-classes", "output classes", parse=positive_int)


@dataclass(frozen=True)
class Speech:
    """DeepSpeech2's recurrent stack and the utterances it hears."""

    rnn_type: str = flag("lstm", "--rnn-type", None, choices=("lstm", "gru"))
    rnn_impl: str = flag("fused", "--rnn-impl", "fused: nn.LSTM/nn.GRU (cuDNN on GPU); unrolled: a cell stepped over "
                         "time", choices=RNN_IMPLS)
    rnn_layers: int = flag(5, "--rnn-layers", None, parse=positive_int)
    rnn_hidden: int = flag(800, "--rnn-hidden", None, parse=positive_int)
    # as parsed (argparse reads its default, a string, through the same parse)
    utt_seconds: tuple[str, tuple[float, ...]] = flag(
        "normal:12.5:5:2:35", "--utt-seconds", "utterance length distribution: normal:MEAN:STD:MIN:MAX, "
        "uniform:MIN:MAX or fixed:SECONDS (100 frames/s; the default resembles LibriSpeech, 2-35 s)",
        parse=seconds_distribution)
    bucketing: bool = flag(False, "--bucketing", "batch utterances of similar length", switch=True)


@dataclass(frozen=True)
class Translation:
    """GNMT's sentence length, vocabulary and LSTM stack."""

    src_max_len: int = flag(100, "--src-max-len", "longest source sentence", parse=positive_int)
    vocab: int = flag(32000, "--vocab", None, parse=positive_int)
    hidden: int = flag(1024, "--hidden", None, parse=positive_int)
    layers: int = flag(4, "--layers", None, parse=positive_int)
    attention: bool = flag(True, "--no-attention", None, switch=True, off=True)
    rnn_impl: str = flag("fused", "--rnn-impl", "fused: nn.LSTM / Keras LSTM (cuDNN on a GPU); unrolled: LSTM cells "
                         "stepped over time, each sentence's state kept past its end (a dynamic RNN)",
                         choices=RNN_IMPLS)


@dataclass(frozen=True)
class ImageSize:
    """The side of an ImageNet CNN's synthetic images."""

    image_size: int | None = flag(None, "--image-size", "side of the synthetic images (default 224; Inception v3: "
                                  "299, its least)", parse=positive_int)


@dataclass(frozen=True)
class ImagenetHeldOut:
    """Where ImageNet's held-out set is, for a run to a quality target."""

    eval_dir: str | None = flag(None, "--eval-dir", "with a quality target: the held-out set's folder in --data-dir's "
                                "layout (ImageNet's val/; default: val/ beside --data-dir's train/); checked to share "
                                "no file or sample with it", metavar="DIR", path=True)


@dataclass(frozen=True)
class FashionFiles:
    """Fashion-MNIST's files: the training set's folder and the held-out set's."""

    idx_dir: str = flag(str(DEBIAN_DIR), "--idx-dir", "the dataset: a folder of MNIST-format files "
                        "(train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-*); default "
                        f"{DEBIAN_DIR}, Debian's dataset-fashion-mnist", metavar="DIR", path=True)
    eval_dir: str | None = flag(None, "--eval-dir", "the held-out set's folder (its t10k-* files; default "
                                "--idx-dir's); checked to share no image with the training set", metavar="DIR",
                                path=True)


@dataclass(frozen=True)
class ModelFile:
    """A model of one's own, from a Python file."""

    model_file: str | None = flag(None, "--model-file", "a Python file defining model() and batch(batch_size, "
                                  "generator), optionally loss(model, batch) and UNIT (examples/model_file.py "
                                  "documents the interface)", metavar="PATH", required=True, path=True)


@dataclass(frozen=True)
class Transformer:
    """The language model's depth, width, heads, context and vocabulary (GPT-2 small by default)."""

    layers: int = flag(12, "--layers", None, parse=positive_int)
    width: int = flag(768, "--width", None, parse=positive_int)
    heads: int = flag(12, "--heads", None, parse=positive_int)
    context: int = flag(1024, "--context", "tokens per sequence", parse=positive_int)
    vocab: int = flag(50257, "--vocab", None, parse=positive_int)
