"""torchvision.models' constructors as Horovod's synthetic benchmark calls them (``getattr(models, name)(...)``),
returning hvdbench's models of the same architectures (tests/test_models_match_references.py). A
``norm_layer`` (hvd.SyncBatchNorm in Horovod's newer script) is ignored: the model keeps plain BatchNorm, as
hvdbench trains, which at one rank is what SyncBatchNorm computes."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from hvdbench.suite.models.imagenet import imagenet_model


def _constructor(name: str) -> Callable[..., nn.Module]:
    def build(norm_layer: Any = None, num_classes: int = 1000, **_: Any) -> nn.Module:
        return imagenet_model(name, num_classes)
    build.__name__ = name
    return build


resnet50 = _constructor("resnet50")
resnet101 = _constructor("resnet101")
resnet152 = _constructor("resnet152")
vgg16 = _constructor("vgg16")
alexnet = _constructor("alexnet")
inception_v3 = _constructor("inception_v3")
