"""DeepSpeech2-style recognition: two 2-D convolutions over the spectrogram, a stack of bidirectional
recurrent layers (LSTM or GRU; directions summed), a linear classifier over characters, for CTC.

``rnn_impl="fused"`` uses nn.LSTM / nn.GRU (cuDNN on a GPU); ``"unrolled"`` runs a cell step by step
over time, updating each utterance's state only inside its length (a "dynamic RNN")."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..synthetic import CHARS, FREQ_BINS, TIME_KERNEL, TIME_PADDING, TIME_STRIDE, front_end_frames


class _Unrolled(nn.Module):
    """One bidirectional layer built from two cells, stepped over time."""

    def __init__(self, cell: type[nn.Module], size_in: int, hidden: int) -> None:
        super().__init__()
        self.forward_cell, self.backward_cell = cell(size_in, hidden), cell(size_in, hidden)
        self.lstm = cell is nn.LSTMCell

    def _run(self, cell: nn.Module, x: torch.Tensor, lengths: torch.Tensor, order: range) -> torch.Tensor:
        batch, _, _ = x.shape
        hidden: int = getattr(cell, "hidden_size")
        h = x.new_zeros(batch, hidden)
        c = x.new_zeros(batch, hidden)
        outputs: list[torch.Tensor] = [x.new_empty(0)] * x.shape[1]
        for t in order:
            inside = (t < lengths).unsqueeze(1)
            if self.lstm:
                new_h, new_c = cell(x[:, t], (h, c))
                c = torch.where(inside, new_c, c)
            else:
                new_h = cell(x[:, t], h)
            h = torch.where(inside, new_h, h)
            outputs[t] = h * inside
        return torch.stack(outputs, dim=1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        steps = x.shape[1]
        return (self._run(self.forward_cell, x, lengths, range(steps))
                + self._run(self.backward_cell, x, lengths, range(steps - 1, -1, -1)))


class _Fused(nn.Module):
    """One bidirectional nn.LSTM / nn.GRU layer over packed sequences."""

    def __init__(self, rnn: type[nn.Module], size_in: int, hidden: int) -> None:
        super().__init__()
        self.rnn = rnn(size_in, hidden, bidirectional=True, batch_first=True)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=x.shape[1])
        return out.view(x.shape[0], x.shape[1], 2, self.hidden).sum(dim=2)


class DeepSpeech2(nn.Module):
    """Spectrogram (batch, 1, 161, frames) and frame counts in; (time, batch, chars) log-probabilities out."""

    def __init__(self, rnn_type: str = "lstm", rnn_impl: str = "fused", layers: int = 5, hidden: int = 800) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, TIME_KERNEL), stride=(2, TIME_STRIDE), padding=(20, TIME_PADDING)),
            nn.BatchNorm2d(32), nn.Hardtanh(0, 20),
            nn.Conv2d(32, 32, (21, 11), stride=(2, 1), padding=(10, 5)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20))
        freq = (FREQ_BINS + 2 * 20 - 41) // 2 + 1
        freq = (freq + 2 * 10 - 21) // 2 + 1
        make: Callable[[int], nn.Module]
        if rnn_impl == "fused":
            kinds = {"lstm": nn.LSTM, "gru": nn.GRU}
            make = lambda size_in: _Fused(kinds[rnn_type], size_in, hidden)  # noqa: E731
        elif rnn_impl == "unrolled":
            cells = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}
            make = lambda size_in: _Unrolled(cells[rnn_type], size_in, hidden)  # noqa: E731
        else:
            raise ValueError(f"unknown rnn_impl {rnn_impl!r}")
        self.rnns = nn.ModuleList(make(32 * freq if i == 0 else hidden) for i in range(layers))
        self.classifier = nn.Linear(hidden, CHARS)

    def forward(self, spectrogram: torch.Tensor, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.conv(spectrogram)
        batch, channels, freq, steps = x.shape
        x = x.view(batch, channels * freq, steps).transpose(1, 2)
        lengths = front_end_frames(frames)
        for rnn in self.rnns:
            x = rnn(x, lengths)
        return self.classifier(x).log_softmax(-1).transpose(0, 1), lengths
