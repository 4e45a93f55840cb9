"""GNMT-like LSTM translation: a 4-layer bidirectional encoder, a 4-layer decoder with teacher forcing,
optional dot-product attention over the encoder's outputs, a projection onto the target vocabulary."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..synthetic import PAD


class Seq2Seq(nn.Module):
    """Source tokens (with lengths) and shifted target tokens in, target logits out."""

    def __init__(self, vocab: int = 32000, hidden: int = 1024, layers: int = 4, attention: bool = True) -> None:
        super().__init__()
        if hidden % 2:
            raise ValueError(f"hidden size must be even (two encoder directions), got {hidden}")
        self.src_embed = nn.Embedding(vocab, hidden, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(vocab, hidden, padding_idx=PAD)
        self.encoder = nn.LSTM(hidden, hidden // 2, num_layers=layers, bidirectional=True, batch_first=True)
        self.decoder = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True)
        self.attend = nn.Linear(2 * hidden, hidden) if attention else None
        self.classifier = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.src_embed(src), src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        memory, _ = pad_packed_sequence(self.encoder(packed)[0], batch_first=True, total_length=src.shape[1])
        out, _ = self.decoder(self.tgt_embed(tgt_in))
        if self.attend is not None:
            scores = out @ memory.transpose(1, 2)
            scores = scores.masked_fill((src == PAD).unsqueeze(1), float("-inf"))
            context = torch.softmax(scores, dim=-1) @ memory
            out = torch.tanh(self.attend(torch.cat([out, context], dim=-1)))
        return self.classifier(out)
