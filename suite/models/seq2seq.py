"""GNMT-like LSTM translation: a 4-layer bidirectional encoder, a 4-layer decoder with teacher forcing,
optional dot-product attention over the encoder's outputs, a projection onto the target vocabulary.

``rnn_impl="fused"`` runs nn.LSTM (cuDNN's fused kernel on a GPU); ``"unrolled"`` the same layers as LSTM
cells stepped over time, each sentence's state updated only inside its length (a "dynamic RNN"): the
comparison of the LSTM scaling notes (fused cudnn_lstm against a dynamic RNN)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..synthetic import PAD


def _steps(cell: nn.Module, x: torch.Tensor, lengths: torch.Tensor, order: range) -> torch.Tensor:
    """One direction of one layer: the LSTM cell stepped over ``order``, state kept past each sentence's end."""
    hidden: int = getattr(cell, "hidden_size")
    h = x.new_zeros(x.shape[0], hidden)
    c = x.new_zeros(x.shape[0], hidden)
    outputs: list[torch.Tensor] = [x.new_empty(0)] * x.shape[1]
    for t in order:
        inside = (t < lengths).unsqueeze(1)
        new_h, new_c = cell(x[:, t], (h, c))
        h, c = torch.where(inside, new_h, h), torch.where(inside, new_c, c)
        outputs[t] = h * inside
    return torch.stack(outputs, dim=1)


class UnrolledLSTM(nn.Module):
    """A stack of LSTM layers (bidirectional: the two directions' outputs side by side, as nn.LSTM's) built from
    cells stepped over time; the same parameters as nn.LSTM of the same shape."""

    def __init__(self, size_in: int, hidden: int, layers: int, bidirectional: bool = False) -> None:
        super().__init__()
        width = hidden * (2 if bidirectional else 1)
        self.forward_cells = nn.ModuleList(nn.LSTMCell(size_in if i == 0 else width, hidden) for i in range(layers))
        self.backward_cells = nn.ModuleList(nn.LSTMCell(size_in if i == 0 else width, hidden)
                                            for i in range(layers)) if bidirectional else None

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        steps = x.shape[1]
        lengths = lengths.to(x.device)
        for i, cell in enumerate(self.forward_cells):
            out = _steps(cell, x, lengths, range(steps))
            if self.backward_cells is not None:
                out = torch.cat([out, _steps(self.backward_cells[i], x, lengths, range(steps - 1, -1, -1))], dim=-1)
            x = out
        return x


class Seq2Seq(nn.Module):
    """Source tokens (with lengths) and shifted target tokens in, target logits out."""

    def __init__(self, vocab: int = 32000, hidden: int = 1024, layers: int = 4, attention: bool = True,
                 rnn_impl: str = "fused") -> None:
        super().__init__()
        if hidden % 2:
            raise ValueError(f"hidden size must be even (two encoder directions), got {hidden}")
        if rnn_impl not in ("fused", "unrolled"):
            raise ValueError(f"unknown rnn_impl {rnn_impl!r}")
        self.src_embed = nn.Embedding(vocab, hidden, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(vocab, hidden, padding_idx=PAD)
        self.unrolled = rnn_impl == "unrolled"
        self.encoder: nn.Module
        self.decoder: nn.Module
        if self.unrolled:
            self.encoder = UnrolledLSTM(hidden, hidden // 2, layers, bidirectional=True)
            self.decoder = UnrolledLSTM(hidden, hidden, layers)
        else:
            self.encoder = nn.LSTM(hidden, hidden // 2, num_layers=layers, bidirectional=True, batch_first=True)
            self.decoder = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True)
        self.attend = nn.Linear(2 * hidden, hidden) if attention else None
        self.classifier = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        if self.unrolled:
            memory = self.encoder(self.src_embed(src), src_lengths)
            out = self.decoder(self.tgt_embed(tgt_in), torch.full_like(src_lengths, tgt_in.shape[1]))
        else:
            packed = pack_padded_sequence(self.src_embed(src), src_lengths.cpu(), batch_first=True,
                                          enforce_sorted=False)
            memory, _ = pad_packed_sequence(self.encoder(packed)[0], batch_first=True, total_length=src.shape[1])
            out, _ = self.decoder(self.tgt_embed(tgt_in))
        if self.attend is not None:
            scores = out @ memory.transpose(1, 2)
            scores = scores.masked_fill((src == PAD).unsqueeze(1), float("-inf"))
            context = torch.softmax(scores, dim=-1) @ memory
            out = torch.tanh(self.attend(torch.cat([out, context], dim=-1)))
        return self.classifier(out)
