"""A stand-in for torchvision where none is installed (a CPU machine, an offline GPU node): just
``torchvision.models``, built from hvdbench's own models, so that Horovod's
examples/pytorch/pytorch_synthetic_benchmark.py runs. benchmarks/vs_horovod.py puts it on that script's
PYTHONPATH only where ``import torchvision`` fails, and says so in its output."""
