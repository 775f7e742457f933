#!/usr/bin/env python3
"""torch_gpt.py: the benchmark's GPT (models/gpt.mdl) written in plain PyTorch.

Pre-norm decoder: learned positions, LayerNorm with bias, causal attention,
GELU (tanh), biases on every projection, tied embeddings; AdamW (betas
0.9/0.95, weight decay 0.1 on matrices, eps 1e-8) after clipping the gradient
norm to 1, as ptdc's generated trainer does. Synthetic tokens. Prints one line
per step, "step N: T ms", then "startup S ms" (import to first step) -- the
format bench/codegen/run.sh parses.

  torch_gpt.py --layers 4 --d-model 384 --heads 6 --vocab 8192 --seq 256 \\
               --batch 8 --steps 6 --threads 1
"""
import argparse
import math
import os
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402  (timed as part of start-up)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads, d_ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d_ff)
        self.fc_proj = nn.Linear(d_ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(mask[:, :, :s, :s] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, s, d)
        x = x + self.proj(y)
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, layers, d, heads, d_ff, vocab, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, d_ff) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        s = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(s))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--d-ff", type=int, default=0, help="default 4 d_model")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.d_model, a.heads, a.d_ff or 4 * a.d_model, a.vocab, a.seq)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1)
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=gen)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    print("startup %.1f ms" % ((time.perf_counter() - T0) * 1e3), flush=True)
    for step in range(1, a.steps + 1):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t
        print("step %d: %.1f ms loss %.4f" % (step, dt * 1e3, loss.item()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
