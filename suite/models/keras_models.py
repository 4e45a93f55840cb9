"""The TensorFlow suite's Keras models (functional, so every variable exists once built): the CIFAR
ResNets, the MLP, DeepSpeech2-style speech, the LSTM sequence-to-sequence model. ImageNet CNNs come
from ``keras.applications``. Shapes follow the PyTorch models of the same names."""

from __future__ import annotations

from typing import Sequence

import keras
from keras import layers, ops

from ..synthetic import CHARS, FREQ_BINS, PAD, front_end_frames


def _channel_axis() -> int:
    return 1 if keras.config.image_data_format() == "channels_first" else -1


def _shortcut(x: keras.KerasTensor, planes: int, stride: int) -> keras.KerasTensor:
    """Option A: stride-2 subsampling and zero-padded channels, no parameters."""
    first = keras.config.image_data_format() == "channels_first"
    pad = planes - x.shape[_channel_axis()]

    def shortcut(t: keras.KerasTensor) -> keras.KerasTensor:
        t = t[:, :, ::stride, ::stride] if first else t[:, ::stride, ::stride, :]
        widths = [[0, 0], [pad // 2, pad - pad // 2], [0, 0], [0, 0]] if first else \
            [[0, 0], [0, 0], [0, 0], [pad // 2, pad - pad // 2]]
        return ops.pad(t, widths)

    return layers.Lambda(shortcut)(x)


def cifar_resnet(depth: int, input_shape: tuple[int, int, int], num_classes: int = 10) -> keras.Model:
    """ResNet-(6n+2) of He et al. 2016 for 32x32 inputs (16/32/64 filters, option-A shortcuts)."""
    if (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
    axis = _channel_axis()

    def conv_bn(t: keras.KerasTensor, planes: int, stride: int) -> keras.KerasTensor:
        t = layers.Conv2D(planes, 3, strides=stride, padding="same", use_bias=False,
                          kernel_initializer="he_normal")(t)
        return layers.BatchNormalization(axis=axis)(t)

    inputs = keras.Input(input_shape)
    x = layers.ReLU()(conv_bn(inputs, 16, 1))
    planes_in = 16
    for planes, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range((depth - 2) // 6):
            s = stride if i == 0 else 1
            out = conv_bn(layers.ReLU()(conv_bn(x, planes, s)), planes, 1)
            short = _shortcut(x, planes, s) if s != 1 or planes != planes_in else x
            x = layers.ReLU()(layers.Add()([out, short]))
            planes_in = planes
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")


def imagenet_cnn(name: str, input_shape: tuple[int, int, int], num_classes: int = 1000) -> keras.Model:
    """ResNet-50, Inception v3 or VGG-16 from keras.applications, random weights, classifier on top,
    logits out (no softmax)."""
    make = {"resnet50": keras.applications.ResNet50, "inception_v3": keras.applications.InceptionV3,
            "vgg16": keras.applications.VGG16}[name]
    return make(weights=None, include_top=True, input_shape=input_shape, classes=num_classes,
                classifier_activation=None)


def mlp(input_size: int, widths: Sequence[int], num_classes: int) -> keras.Model:
    """input -> hidden widths (ReLU) -> classes."""
    inputs = keras.Input((input_size,))
    x = inputs
    for width in widths:
        x = layers.Dense(width, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(num_classes, dtype="float32")(x), name="mlp")


def _bidirectional(rnn_type: str, rnn_impl: str, hidden: int) -> layers.Layer:
    if rnn_impl == "fused":  # Keras' LSTM/GRU layers (cuDNN kernels on a GPU where eligible)
        layer = {"lstm": layers.LSTM, "gru": layers.GRU}[rnn_type](hidden, return_sequences=True)
    else:  # a cell stepped over time by the generic RNN loop
        layer = layers.RNN({"lstm": layers.LSTMCell, "gru": layers.GRUCell}[rnn_type](hidden), return_sequences=True)
    return layers.Bidirectional(layer, merge_mode="sum")


def deepspeech2(rnn_type: str = "lstm", rnn_impl: str = "fused", rnn_layers: int = 5, hidden: int = 800) -> keras.Model:
    """Spectrogram (batch, frames, 161, 1) and frame counts in; per-step character logits and their
    lengths out. Two convolutions (clipped ReLU), bidirectional RNNs (directions summed, padding masked)."""
    spect = keras.Input((None, FREQ_BINS, 1), name="spectrogram")
    frames = keras.Input((), dtype="int32", name="frames")
    x = layers.ZeroPadding2D(((5, 5), (20, 20)), data_format="channels_last")(spect)
    x = layers.Conv2D(32, (11, 41), strides=(2, 2), data_format="channels_last")(x)
    x = layers.ReLU(max_value=20)(layers.BatchNormalization()(x))
    x = layers.ZeroPadding2D(((5, 5), (10, 10)), data_format="channels_last")(x)
    x = layers.Conv2D(32, (11, 21), strides=(1, 2), data_format="channels_last")(x)
    x = layers.ReLU(max_value=20)(layers.BatchNormalization()(x))
    freq = ((FREQ_BINS + 40 - 41) // 2 + 1 + 20 - 21) // 2 + 1
    x = layers.Reshape((-1, 32 * freq))(x)
    lengths = layers.Lambda(front_end_frames)(frames)
    mask = layers.Lambda(lambda a: ops.arange(ops.shape(a[0])[1])[None, :] < a[1][:, None],
                         output_shape=lambda shapes: tuple(shapes[0][:2]))([x, lengths])
    for _ in range(rnn_layers):
        x = _bidirectional(rnn_type, rnn_impl, hidden)(x, mask=mask)
    logits = layers.Dense(CHARS, dtype="float32")(x)
    return keras.Model([spect, frames], [logits, lengths], name="deepspeech2")


def _lstm(hidden: int, rnn_impl: str) -> layers.Layer:
    if rnn_impl == "fused":  # Keras' LSTM layer (cuDNN's kernel on a GPU where eligible)
        return layers.LSTM(hidden, return_sequences=True)
    return layers.RNN(layers.LSTMCell(hidden), return_sequences=True)  # a cell stepped by the generic loop


def seq2seq(vocab: int, hidden: int, num_layers: int, attention: bool, rnn_impl: str = "fused") -> keras.Model:
    """Source tokens and shifted target tokens in, target logits out: a bidirectional LSTM encoder
    (directions concatenated), an LSTM decoder with teacher forcing, optional dot-product attention; the LSTMs
    fused layers or cells stepped over time (``rnn_impl``)."""
    if hidden % 2:
        raise ValueError(f"hidden size must be even (two encoder directions), got {hidden}")
    src = keras.Input((None,), dtype="int32", name="source")
    tgt_in = keras.Input((None,), dtype="int32", name="target_in")
    src_mask = layers.Lambda(lambda s: ops.not_equal(s, PAD))(src)
    memory = layers.Embedding(vocab, hidden)(src)
    for _ in range(num_layers):
        memory = layers.Bidirectional(_lstm(hidden // 2, rnn_impl))(memory, mask=src_mask)
    out = layers.Embedding(vocab, hidden)(tgt_in)
    for _ in range(num_layers):
        out = _lstm(hidden, rnn_impl)(out)
    if attention:
        context = layers.Attention()([out, memory], mask=[None, src_mask])
        out = layers.Dense(hidden, activation="tanh")(layers.Concatenate()([out, context]))
    logits = layers.Dense(vocab, dtype="float32")(out)
    return keras.Model([src, tgt_in], logits, name="gnmt")
