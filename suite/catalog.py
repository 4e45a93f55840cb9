"""The benchmarks hvdbench knows: name, framework, script and models; importable without any framework."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .flags import Parser, benchmark_parser

SUITE_DIR = Path(__file__).resolve().parent


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

    @property
    def path(self) -> Path:
        """Absolute path of the standalone script."""
        return SUITE_DIR / self.script

    def parser(self) -> Parser:
        """The shared flags, with this benchmark's models."""
        return benchmark_parser(self.name, self.models, self.default_model, self.unit)


BENCHMARKS: dict[str, BenchmarkInfo] = {
    info.name: info
    for info in (
        BenchmarkInfo(
            name="cifar10",
            framework="pytorch",
            script="cifar10.py",
            models=("resnet20", "resnet32", "resnet44", "resnet56", "resnet110"),
            default_model="resnet20",
            unit="images",
            description="CIFAR-10 ResNets (He et al. 2016), synthetic 32x32x3 images, 10 classes",
        ),
    )
}


def get_benchmark(name: str) -> BenchmarkInfo:
    """The benchmark of that name; an unknown name is a UsageError listing the known ones."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}") from None
