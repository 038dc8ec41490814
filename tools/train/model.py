"""model.py - the demo model in PyTorch, with exactly the numerics of particle's and
llama.cpp's qwen3moe graph (docs/ARCHITECTURES.md 3, src/model/qwen3moe.c): RMSNorm (eps 1e-6),
per-head Q/K RMSNorm, NEOX RoPE, causal attention scaled by 1/sqrt(head_dim), a softmax router
whose top-k weights are renormalised to sum 1, SwiGLU experts, untied output."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class Config:
    def __init__(self, **kw):
        self.n_vocab = 4096
        self.n_ctx = 128          # training context; n_ctx_train in the GGUF
        self.n_embd = 128
        self.n_layer = 6
        self.n_head = 2
        self.n_head_kv = 1
        self.head_dim = 64
        self.n_expert = 32
        self.n_expert_used = 4
        self.n_ff_exp = 64
        self.rope_base = 10000.0
        self.eps = 1e-6
        for k, v in kw.items():
            if not hasattr(self, k):
                raise KeyError(k)
            setattr(self, k, v)

    def as_dict(self):
        return dict(self.__dict__)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_neox(x, cos, sin):
    # x: [B, H, T, D]; NEOX pairs dimension i with i + D/2.
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q = nn.Linear(c.n_embd, c.n_head * c.head_dim, bias=False)
        self.k = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.v = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.o = nn.Linear(c.n_head * c.head_dim, c.n_embd, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.eps)
        self.k_norm = RMSNorm(c.head_dim, c.eps)

    def forward(self, x, cos, sin, mask):
        c = self.c
        B, T, _ = x.shape
        q = self.q_norm(self.q(x).view(B, T, c.n_head, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k(x).view(B, T, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.v(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        g = c.n_head // c.n_head_kv
        k = k.repeat_interleave(g, dim=1)   # head h uses kv head h // g (llama.cpp GQA)
        v = v.repeat_interleave(g, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim) + mask
        y = att.softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c.n_embd, c.n_expert, bias=False)
        s = 0.02
        self.gate = nn.Parameter(torch.randn(c.n_expert, c.n_ff_exp, c.n_embd) * s)
        self.up = nn.Parameter(torch.randn(c.n_expert, c.n_ff_exp, c.n_embd) * s)
        self.down = nn.Parameter(torch.randn(c.n_expert, c.n_embd, c.n_ff_exp) * s /
                                 math.sqrt(2 * c.n_layer))

    def forward(self, x):
        c = self.c
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = self.router(x).softmax(-1)
        topv, topi = probs.topk(c.n_expert_used, dim=-1)
        w = topv / topv.sum(-1, keepdim=True)
        flat = topi.reshape(-1)
        order = flat.argsort()
        tok = order // c.n_expert_used
        counts = torch.bincount(flat, minlength=c.n_expert)
        xs = x[tok]
        ws = w.reshape(-1)[order].unsqueeze(1)
        outs, start = [], 0
        for e, n in enumerate(counts.tolist()):
            if n:
                xe = xs[start:start + n]
                h = F.silu(xe @ self.gate[e].t()) * (xe @ self.up[e].t())
                outs.append(h @ self.down[e].t())
            start += n
        ys = torch.cat(outs) * ws
        out = torch.zeros_like(x).index_add_(0, tok, ys)
        # Switch-Transformer load balancing: n_expert * sum_e (share of routed slots) * (mean prob)
        frac = counts.to(x.dtype) / flat.numel()
        aux = c.n_expert * (frac * probs.mean(0)).sum()
        return out.view(shape), aux, counts


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c.n_embd, c.eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.n_embd, c.eps)
        self.moe = MoE(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        m, aux, counts = self.moe(self.ffn_norm(x))
        return x + m, aux, counts


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embd = nn.Embedding(c.n_vocab, c.n_embd)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.eps)
        self.out = nn.Linear(c.n_embd, c.n_vocab, bias=False)
        for n, p in self.named_parameters():
            if n.endswith(("q.weight", "k.weight", "v.weight", "router.weight", "out.weight")):
                nn.init.normal_(p, std=0.02)
            elif n.endswith("o.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.n_layer))
            elif n.endswith("embd.weight"):
                nn.init.normal_(p, std=0.02)
        inv = 1.0 / (c.rope_base ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        ang = torch.arange(c.n_ctx).float()[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embd(idx)
        mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        cos, sin = self.cos[:T], self.sin[:T]
        aux, counts = 0.0, []
        for b in self.blocks:
            x, a, cnt = b(x, cos, sin, mask)
            aux = aux + a
            counts.append(cnt)
        return self.out(self.norm(x)), aux / len(self.blocks), torch.stack(counts)
