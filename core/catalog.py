"""The benchmarks hvdbench knows: name, framework, script, models, unit and model options.
Importable without any framework, so flags are checked before anything starts."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from .collective_ops import OPS, CommFlags, check_comm_flags
from .errors import UsageError
from .loaders import LOADERS, loaders_of
from .flags import (
    Parser,
    byte_size,
    check_flags,
    int_list,
    non_negative_int,
    parse_or_exit,
    positive_int,
)
from .model_flags import FashionFiles, ImagenetHeldOut, ImageSize, Mlp, ModelFile, Speech, Transformer, Translation
from .train_flags import TrainFlags, benchmark_parser, declared_parser, flag, path_flags
from .quality_flags import ToTarget, quality_check, to_target
from .validate import read_small_text

SUITE_DIR = Path(__file__).resolve().parents[1] / "suite"  # the benchmark scripts: suite/, beside this core package
SUITE_PACKAGE = "hvdbench.suite"


MIN_IMAGE_SIDE = {"inception_v3": 299, "alexnet": 63}  # Inception's auxiliary head needs its 17x17 grid


def _imagenet_check(flags: argparse.Namespace) -> None:
    least = MIN_IMAGE_SIDE.get(flags.model, 32)
    if flags.image_size is not None and flags.image_size < least:
        raise UsageError(f"--image-size {flags.image_size} is too small for {flags.model} (at least {least})")
    if flags.model == "inception_v3" and flags.batch_size < 2:
        raise UsageError("inception_v3 needs --batch-size 2 or more (its auxiliary head's batch norm sees 1x1 maps)")


def _torch_imagenet_check(flags: argparse.Namespace) -> None:
    _imagenet_check(flags)
    quality_check(flags)
    if not to_target(flags):
        if flags.eval_dir:
            raise UsageError("--eval-dir applies with --target-accuracy or --target-loss")
        return
    if flags.data != "files":
        raise UsageError("a quality target on imagenet trains on files: --data files --data-dir DIR (--eval-dir DIR)")
    chosen = LOADERS.get(getattr(flags, "loader", None) or loaders_of("pytorch")[0])
    if chosen is None or not chosen.to_target or flags.data_only:
        able = ", ".join(name for name, loader in LOADERS.items() if loader.to_target and loader.framework == "pytorch")
        raise UsageError(f"a quality target on imagenet reads with --loader {able} and trains (no --data-only)")


TF_MIN_IMAGE_SIDE = {"inception_v3": 75}  # keras.applications' least; ResNet-50 and VGG-16 take 32


def _tf_imagenet_check(flags: argparse.Namespace) -> None:
    least = TF_MIN_IMAGE_SIDE.get(flags.model, 32)
    if flags.image_size is not None and flags.image_size < least:
        raise UsageError(f"--image-size {flags.image_size} is too small for {flags.model} (at least {least})")


FASHION_SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fashion-mnist-sample"  # 1,000 + 200 images


def _fashion_check(flags: argparse.Namespace) -> None:
    if flags.data not in ("device", "host"):
        raise UsageError(f"--data {flags.data}: fashion_mnist holds its dataset in memory, on the device (--data "
                         "device) or on the host, each batch copied (--data host)")
    quality_check(flags)


MODEL_FILE_LIMIT = 1024 * 1024  # a model file is source code: a megabyte is plenty
EXAMPLE_MODEL_FILE = Path(__file__).resolve().parents[1] / "examples" / "model_file.py"


def check_model_file(flags: argparse.Namespace) -> None:
    """Before any rank starts: the model file is a readable regular UTF-8 file of Python source that defines
    ``model`` and ``batch`` at its top level (read, not run: it runs on the ranks, which check its batch fits)."""
    path = Path(flags.model_file).expanduser()
    try:
        source = read_small_text(path, MODEL_FILE_LIMIT, "a model file")
    except ValueError as exc:
        raise UsageError(f"--model-file {exc}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise UsageError(f"--model-file {path}: not Python (line {exc.lineno}: {exc.msg})") from None
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
                if isinstance(target, ast.Name)}
    defined |= {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    missing = [name for name in ("model", "batch") if name not in defined]
    if missing:
        raise UsageError(f"--model-file {path}: defines no {' or '.join(f'{n}()' for n in missing)} at its top level "
                         "(the interface: model() -> nn.Module, batch(batch_size, generator) -> tuple of tensors)")


def _comm_check(flags: argparse.Namespace) -> None:
    check_comm_flags(flags)


@dataclass(frozen=True)
class P2pFlags:
    """The peer-to-peer benchmark's flags, declared once."""

    PROG: ClassVar[str] = "p2p"
    ABOUT: ClassVar[str] = "Peer-to-peer (every GPU pair) and host-device copy bandwidth."

    bytes: int = flag(256 * 2**20, "--bytes", "bytes per copy (default 256M)", parse=byte_size)
    iters: int = flag(20, "--iters", "timed copies per case", parse=positive_int)
    warmup_iters: int = flag(3, "--warmup-iters", None, parse=non_negative_int)
    devices: list[int] | None = flag(None, "--devices", "CUDA devices to measure (default: every visible one)",
                                     parse=int_list("GPU ids", minimum=0))
    log_dir: str | None = flag(None, "--log-dir", None)


@dataclass(frozen=True)
class BenchmarkInfo:
    """One benchmark script and the architectures it offers."""

    name: str
    framework: str
    script: str
    models: tuple[str, ...]
    default_model: str
    unit: str
    description: str
    cnn: bool = False
    options: tuple[type, ...] = ()  # the declarations of its model family's options, in order (core/model_flags.py)
    extra_check: Callable[[argparse.Namespace], None] | None = None
    own_flags: type | None = None  # a benchmark that does not train (collectives, p2p): its flags' one declaration
    twin: str | None = None  # TensorFlow: the PyTorch benchmark of the same models (its FLOP counts are used)
    reads: str | None = None  # the dataset kind it reads with --data files (core/datasets.py), None: none
    # argument sets that train it at a tiny size, one per architecture family: the workload tests train each
    # (tests/test_*_workloads_train.py parametrise over the catalog, so a new entry is tested by its smoke)
    smoke: tuple[tuple[str, ...], ...] = ()

    @property
    def path(self) -> Path:
        """Absolute path of the standalone script."""
        return SUITE_DIR / self.script

    @property
    def module(self) -> str:
        """The script as a module of an installed hvdbench (how a rank inside an image runs it)."""
        return f"{SUITE_PACKAGE}.{Path(self.script).stem}"

    def parser(self) -> Parser:
        """The shared flags, with this benchmark's models and model options."""
        if self.own_flags is not None:
            return declared_parser(self.own_flags)
        return benchmark_parser(self.name, self.models, self.default_model, self.unit, self.options, self.framework)

    @property
    def paths(self) -> tuple[str, ...]:
        """Its flags that name a file or folder: made absolute when a run is planned, what they hold hashed into the
        run's identity (launchers/plan.py)."""
        return path_flags(TrainFlags, *self.options) if self.own_flags is None else path_flags(self.own_flags)

    def sizing(self, flags: argparse.Namespace) -> dict[str, Any]:
        """The flags that fix the model and its input shapes (FLOPs per sample depend on these alone): model,
        batch size, seed (synthetic lengths) and this benchmark's model options."""
        dests = [item.name for cls in self.options for item in dataclasses.fields(cls)]
        return {"model": flags.model, "batch_size": flags.batch_size, "seed": flags.seed,
                **{dest: getattr(flags, dest) for dest in dests if hasattr(flags, dest)}}

    @property
    def trains(self) -> bool:
        """A training workload (the shared flags: --steps, --target-ci ...), not collectives or p2p."""
        return self.own_flags is None

    def resolved(self, argv: Sequence[str], base: Path) -> tuple[str, ...]:
        """The arguments with every path flag's value made absolute against ``base``: ranks start in their run's
        folder, where a relative path would name nothing."""
        out = list(argv)
        for i, arg in enumerate(out):
            name, eq, value = arg.partition("=")
            if name in self.paths and eq and value:
                out[i] = f"{name}={(base / Path(value).expanduser()).resolve()}"
            elif arg in self.paths and i + 1 < len(out) and not out[i + 1].startswith("--"):
                out[i + 1] = str((base / Path(out[i + 1]).expanduser()).resolve())
        return tuple(out)

    def check(self, argv: Sequence[str]) -> argparse.Namespace:
        """Parse and check argv; a UsageError names the first problem."""
        flags = self.parser().parse_args(list(argv))
        if self.own_flags is None:
            check_flags(flags, cnn=self.cnn, framework=self.framework, reads=self.reads)
        if self.extra_check is not None:
            self.extra_check(flags)
        return flags

    def parse_or_exit(self, argv: Sequence[str]) -> argparse.Namespace:
        """For scripts: parse and check, or print one line and exit with status 2."""
        return parse_or_exit(lambda: self.check(argv))


_IMG = ("--batch-size", "2", "--image-size", "64")
_TF_IMG = ("--batch-size", "2", "--image-size", "32")
_MLP = ("--batch-size", "4", "--mlp-input", "32", "--mlp-widths", "64,64")
_SPEECH = ("--batch-size", "2", "--rnn-layers", "2", "--rnn-hidden", "16")
# TensorFlow's speech gets two intra-op threads: with one, oneDNN's backward of its 11x41 convolution takes seconds
_TF_SPEECH = ("--batch-size", "2", "--rnn-layers", "1", "--rnn-hidden", "16", "--utt-seconds", "uniform:0.3:0.8",
              "--threads", "2")
_TRANSLATION = ("--batch-size", "3", "--hidden", "16", "--vocab", "50", "--src-max-len", "8")
_CIFAR = ("resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "densenet40_k12", "densenet100_k12")
_IMAGENET = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "inception_v3", "vgg16", "alexnet")
_TF_CIFAR = _CIFAR[:5]
_TF_IMAGENET = ("resnet50", "inception_v3", "vgg16")

BENCHMARKS: dict[str, BenchmarkInfo] = {
    info.name: info
    for info in (
        BenchmarkInfo("cifar10", "pytorch", "cifar10.py", _CIFAR, "resnet20", "images",
                      "CIFAR-10 ResNets (He et al. 2016) and DenseNets (Huang et al. 2017, non-BC), "
                      "synthetic 32x32x3 images, 10 classes", cnn=True,
                      smoke=(("--model", "resnet20", "--batch-size", "2"),
                             ("--model", "densenet40_k12", "--batch-size", "2"))),
        BenchmarkInfo("imagenet", "pytorch", "imagenet.py", _IMAGENET, "resnet50", "images",
                      "ImageNet CNNs, synthetic 224x224x3 images (Inception v3: 299x299), 1000 classes", cnn=True,
                      options=(ImageSize, ImagenetHeldOut, ToTarget), extra_check=_torch_imagenet_check,
                      reads="imagenet",
                      smoke=tuple(("--model", m, *_IMG) for m in ("resnet50", "resnet101", "resnet152", "vgg16",
                                                                  "alexnet"))
                      + (("--model", "inception_v3", "--batch-size", "2"),)),
        BenchmarkInfo("mlp", "pytorch", "mlp.py", ("mlp",), "mlp", "samples",
                      "a large fully connected network on synthetic vectors", options=(Mlp,), smoke=(_MLP,)),
        BenchmarkInfo("speech", "pytorch", "speech.py", ("deepspeech2",), "deepspeech2", "utterances",
                      "DeepSpeech2-style recognition with CTC on synthetic utterances of varying length",
                      options=(Speech,), reads="speech",
                      smoke=((*_SPEECH, "--utt-seconds", "uniform:0.3:1"),
                             (*_SPEECH, "--rnn-type", "gru", "--rnn-impl", "unrolled",
                              "--utt-seconds", "uniform:0.3:0.6"))),
        BenchmarkInfo("translation", "pytorch", "translation.py", ("gnmt",), "gnmt", "words",
                      "GNMT-like LSTM sequence-to-sequence translation; words = target tokens",
                      options=(Translation,), reads="translation",
                      smoke=((*_TRANSLATION, "--layers", "2"),
                             (*_TRANSLATION, "--layers", "1", "--rnn-impl", "unrolled"))),
        BenchmarkInfo("lm", "pytorch", "lm.py", ("gpt2",), "gpt2", "tokens",
                      "Transformer language model, GPT-2 small shape by default", options=(Transformer,),
                      smoke=(("--batch-size", "2", "--layers", "2", "--width", "32", "--heads", "4", "--context", "16",
                              "--vocab", "64"),)),
        BenchmarkInfo("custom", "pytorch", "custom.py", ("custom",), "custom", "samples",
                      "a model of your own from --model-file (examples/model_file.py: the interface)",
                      options=(ModelFile,), extra_check=check_model_file,
                      smoke=(("--batch-size", "2", "--model-file", str(EXAMPLE_MODEL_FILE)),)),
        BenchmarkInfo("fashion_mnist", "pytorch", "fashion_mnist.py", ("cnn", "mlp"), "cnn", "images",
                      "a small CNN (or an MLP) on Fashion-MNIST's real 28x28 images, 10 classes, held in memory; "
                      "to a quality target with --target-accuracy", options=(FashionFiles, ToTarget),
                      extra_check=_fashion_check,
                      smoke=(("--batch-size", "8", "--idx-dir", str(FASHION_SAMPLE)),
                             ("--batch-size", "8", "--idx-dir", str(FASHION_SAMPLE), "--model", "mlp",
                              "--data", "host"))),
        BenchmarkInfo("collectives", "pytorch", "collectives.py", ("collectives",), "collectives", "GB/s",
                      f"{', '.join(OPS)} bandwidth through Horovod and raw MPI",
                      own_flags=CommFlags, extra_check=_comm_check),
        BenchmarkInfo("p2p", "pytorch", "p2p.py", ("p2p",), "p2p", "GB/s",
                      "device-to-device copies between every GPU pair and host-device copies, one process",
                      own_flags=P2pFlags),
        BenchmarkInfo("tf_cifar10", "tensorflow", "tf_cifar10.py", _TF_CIFAR, "resnet20", "images",
                      "CIFAR-10 ResNets in Keras, synthetic 32x32x3 images, 10 classes", cnn=True,
                      twin="cifar10", smoke=(("--model", "resnet20", "--batch-size", "2"),)),
        BenchmarkInfo("tf_imagenet", "tensorflow", "tf_imagenet.py", _TF_IMAGENET, "resnet50", "images",
                      "keras.applications ResNet-50, Inception v3, VGG-16 (weights=None, with top), "
                      "synthetic 224x224x3 images (Inception v3: 299x299), 1000 classes", cnn=True,
                      options=(ImageSize,), extra_check=_tf_imagenet_check, twin="imagenet", reads="imagenet",
                      smoke=(("--model", "resnet50", *_TF_IMG), ("--model", "vgg16", *_TF_IMG),
                             ("--model", "inception_v3", "--batch-size", "2", "--image-size", "75"))),
        BenchmarkInfo("tf_mlp", "tensorflow", "tf_mlp.py", ("mlp",), "mlp", "samples",
                      "the MLP in Keras on synthetic vectors", options=(Mlp,), twin="mlp", smoke=(_MLP,)),
        BenchmarkInfo("tf_speech", "tensorflow", "tf_speech.py", ("deepspeech2",), "deepspeech2", "utterances",
                      "DeepSpeech2-style recognition in Keras (conv, bidirectional LSTM/GRU) with tf.nn.ctc_loss",
                      options=(Speech,), twin="speech",
                      smoke=(_TF_SPEECH, (*_TF_SPEECH, "--rnn-type", "gru", "--rnn-impl", "unrolled"))),
        BenchmarkInfo("tf_translation", "tensorflow", "tf_translation.py", ("gnmt",), "gnmt", "words",
                      "the LSTM sequence-to-sequence model in Keras; words = target tokens",
                      options=(Translation,), twin="translation", smoke=((*_TRANSLATION, "--layers", "1"),)),
    )
}


def get_benchmark(name: str) -> BenchmarkInfo:
    """The benchmark of that name; an unknown name is a UsageError listing the known ones."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}") from None
