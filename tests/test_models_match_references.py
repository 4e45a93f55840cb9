"""Architectures equal their references: parameter counts match exactly; synthetic data behaves."""

from __future__ import annotations

import pytest
import torch

from hvdbench.suite.models.densenet_cifar import densenet_cifar
from hvdbench.suite.models.imagenet import imagenet_model
from hvdbench.suite.models.mlp import mlp
from hvdbench.suite.models.resnet_cifar import resnet_cifar
from hvdbench.suite.models.seq2seq import Seq2Seq
from hvdbench.suite.synthetic import PAD
from hvdbench.suite.models.transformer import TransformerLM
from hvdbench.suite.speech import make_batch as speech_batch
from hvdbench.suite.translation import make_batch as translation_batch


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name, params", [
    ("resnet18", 11_689_512), ("resnet34", 21_797_672), ("resnet50", 25_557_032), ("resnet101", 44_549_160),
    ("resnet152", 60_192_808),
    ("inception_v3", 27_161_264), ("vgg16", 138_357_544), ("alexnet", 61_100_840),
])
def test_imagenet_parameter_counts(name: str, params: int) -> None:
    assert count(imagenet_model(name)) == params


@pytest.mark.parametrize("name, params", [  # He et al. 2016 Table 6: 0.27M, 0.46M, 0.66M, 0.85M, 1.7M
    ("resnet20", 269_722), ("resnet32", 464_154), ("resnet44", 658_586), ("resnet56", 853_018),
    ("resnet110", 1_727_962),
])
def test_cifar_resnet_parameter_counts(name: str, params: int) -> None:
    assert count(resnet_cifar(name)) == params


@pytest.mark.parametrize("name, params", [("densenet40_k12", 1_019_722), ("densenet100_k12", 6_979_642)])
def test_cifar_densenet_parameter_counts(name: str, params: int) -> None:  # Huang et al. 2017: 1.0M, 7.0M
    assert count(densenet_cifar(name)) == params


def test_mlp_and_gpt2_small_parameter_counts() -> None:
    assert count(mlp()) == 21_020_682
    assert count(TransformerLM()) == 124_439_808


def test_inception_trains_with_its_auxiliary_head() -> None:
    model = imagenet_model("inception_v3").train()
    logits, aux = model(torch.randn(2, 3, 299, 299))
    assert logits.shape == aux.shape == (2, 1000)


def test_speech_batches_vary_in_length_and_bucketing_narrows_them() -> None:
    g = torch.Generator().manual_seed(0)
    dist = ("normal", (12.5, 5.0, 2.0, 35.0))
    batches = [speech_batch(16, dist, False, g) for _ in range(8)]
    frames = torch.cat([b[1] for b in batches]).float()
    assert frames.min() >= 200 and frames.max() <= 3500 and frames.std() > 200
    assert len({b[0].shape[-1] for b in batches}) > 1  # padded length differs from batch to batch
    spread = [(b[1].max() - b[1].min()).item() for b in batches]
    bucketed = [(b[1].max() - b[1].min()).item() for b in (speech_batch(16, dist, True, g) for _ in range(8))]
    assert sum(bucketed) < sum(spread) / 3
    spect, frames, targets, target_lengths, seconds = batches[0]
    assert spect[0, 0, :, frames[0]:].abs().sum() == 0  # nothing past an utterance's end
    assert torch.allclose(frames.float() / 100, seconds, atol=0.01)


def test_unrolled_translation_computes_what_the_fused_lstm_does() -> None:
    """--rnn-impl unrolled is the same model: nn.LSTM's weights copied into the cells give the same logits."""
    torch.manual_seed(0)
    fused, unrolled = Seq2Seq(50, 16, 2, True, "fused"), Seq2Seq(50, 16, 2, True, "unrolled")
    assert count(fused) == count(unrolled)
    state = dict(fused.state_dict())
    for side, lstm in (("encoder", fused.encoder), ("decoder", fused.decoder)):
        for layer in range(lstm.num_layers):
            for suffix, cells in (("", "forward_cells"), ("_reverse", "backward_cells")):
                if suffix and not lstm.bidirectional:
                    continue
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    state[f"{side}.{cells}.{layer}.{name}"] = state.pop(f"{side}.{name}_l{layer}{suffix}")
    unrolled.load_state_dict(state)
    src, lengths = torch.randint(1, 50, (3, 7)), torch.tensor([7, 4, 2])
    src[1, 4:], src[2, 2:] = PAD, PAD
    target = torch.randint(1, 50, (3, 6))
    assert torch.allclose(fused(src, lengths, target), unrolled(src, lengths, target), atol=1e-5)


def test_translation_counts_target_tokens_not_padding() -> None:
    g = torch.Generator().manual_seed(0)
    src, src_len, tgt_in, tgt = translation_batch(32, 100, 32000, g)
    words = int((tgt != PAD).sum())
    assert words < tgt.numel()  # padding exists and is not counted
    assert int((src != PAD).sum(dim=1).eq(src_len).all()) == 1
    assert (tgt_in[:, 0] == 1).all() and ((tgt_in != PAD) == (tgt != PAD)).all()
    assert 25 <= src_len.min() and src_len.max() <= 100


@pytest.mark.tf
@pytest.mark.parametrize("name, side, params", [  # keras.applications with top, 1000 classes
    ("resnet50", 224, 25_636_712), ("inception_v3", 299, 23_851_784), ("vgg16", 224, 138_357_544),
])
def test_keras_imagenet_parameter_counts(name: str, side: int, params: int) -> None:
    from hvdbench.suite.models.keras_models import imagenet_cnn

    assert imagenet_cnn(name, (side, side, 3)).count_params() == params


@pytest.mark.tf
@pytest.mark.parametrize("name, params", [("resnet20", 269_722), ("resnet56", 853_018), ("resnet110", 1_727_962)])
def test_keras_cifar_resnets_have_the_pytorch_trainable_parameters(name: str, params: int) -> None:
    from hvdbench.suite.models.keras_models import cifar_resnet, mlp as keras_mlp

    model = cifar_resnet(int(name.removeprefix("resnet")), (32, 32, 3))
    assert sum(int(v.numpy().size) for v in model.trainable_variables) == params == count(resnet_cifar(name))
    assert keras_mlp(1024, [4096, 4096], 10).count_params() == count(mlp()) == 21_020_682
