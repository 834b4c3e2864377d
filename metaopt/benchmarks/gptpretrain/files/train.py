"""Baseline GPT pretraining script. Edit anything here to lower the bits per byte.

A small modern GPT (RMSNorm, rotary embeddings, QK-norm, ReLU^2 MLP, untied embeddings) trained
with AdamW under a time budget: prepare.TIME_BUDGET seconds of training by prepare.clock() (wall
seconds on GPU, CPU seconds in smoke mode), the first steps (compilation) not counted. The model must be saved with prepare.save_checkpoint(model);
the summary after the '---' line is for you to read (it is not used for scoring).
Works with torch 1.13 (the CPU image) and 2.x (GPU images: bf16 autocast and torch.compile).
"""

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import prepare as P

# ---- hyperparameters -------------------------------------------------------------------------
SMOKE = P.MODE == "smoke"
DEPTH = 2 if SMOKE else 8
D_MODEL = 64 if SMOKE else 512
N_HEAD = 4 if SMOKE else 8
BATCH_SIZE = 16 if SMOKE else 64      # sequences per micro-batch
GRAD_ACCUM = 1 if SMOKE else 4        # micro-batches per optimizer step
LR = 1e-3                             # peak AdamW learning rate
WEIGHT_DECAY = 0.1
WARMUP_FRAC = 0.05                    # of the time budget
COOLDOWN_FRAC = 0.3                   # linear decay to 10% over the last part of the budget
UNTIMED_STEPS = 0 if SMOKE else 3     # first steps (compilation) are not counted in the budget
SEED = 1337


class RMSNorm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def rotary_tables(seq_len, head_dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(torch.arange(seq_len).float(), inv)
    return freqs.cos()[None, None], freqs.sin()[None, None]


def rotate(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = D_MODEL // N_HEAD
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.proj = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.norm = RMSNorm()
        cos, sin = rotary_tables(P.SEQ_LEN, self.head_dim)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.ones(P.SEQ_LEN, P.SEQ_LEN, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, N_HEAD, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:, :, :T], self.sin[:, :, :T]
        q, k = rotate(self.norm(q), cos, sin), rotate(self.norm(k), cos, sin)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.13
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(D_MODEL, 4 * D_MODEL, bias=False)
        self.down = nn.Linear(4 * D_MODEL, D_MODEL, bias=False)

    def forward(self, x):
        return self.down(F.relu(self.up(x)).square())


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = RMSNorm(), Attention(), RMSNorm(), MLP()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(P.VOCAB_SIZE, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
        self.norm = RMSNorm()
        self.head = nn.Linear(D_MODEL, P.VOCAB_SIZE, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            if name.endswith(("proj.weight", "down.weight")):
                nn.init.zeros_(p)  # residual branches start as identity

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)).float()


def lr_factor(progress):
    if progress < WARMUP_FRAC:
        return (progress + 1e-3) / WARMUP_FRAC
    if progress > 1 - COOLDOWN_FRAC:
        return 0.1 + 0.9 * (1 - progress) / COOLDOWN_FRAC
    return 1.0


def main():
    t_start = time.time()  # wall clock, for the summary only
    torch.manual_seed(SEED)
    device = P.DEVICE
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT().to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2 and p is not model.embed.weight]
    no_decay = [p for p in model.parameters() if p.dim() != 2 or p is model.embed.weight]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    fwd = torch.compile(model) if device == "cuda" and hasattr(torch, "compile") else model
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    data = P.batches(BATCH_SIZE)
    tokens_per_step = BATCH_SIZE * P.SEQ_LEN * GRAD_ACCUM
    trained_s, step, loss_val = 0.0, 0, float("nan")
    while trained_s < P.TIME_BUDGET:
        t0 = P.clock()
        progress = trained_s / P.TIME_BUDGET
        for g in opt.param_groups:
            g["lr"] = LR * lr_factor(progress)
        for _ in range(GRAD_ACCUM):
            x, y = next(data)
            with autocast:
                logits = fwd(x)
                loss = F.cross_entropy(logits.view(-1, P.VOCAB_SIZE), y.reshape(-1))
            (loss / GRAD_ACCUM).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_val = loss.item()  # also synchronizes the GPU, so the step time is real
        if not math.isfinite(loss_val):
            print(f"step {step}: loss is {loss_val}; stopping")
            raise SystemExit(1)
        step += 1
        if step > UNTIMED_STEPS:
            trained_s += P.clock() - t0
        if step % 50 == 0:
            print(f"step {step} loss {loss_val:.4f} lr {opt.param_groups[0]['lr']:.2e} trained {trained_s:.1f}s", flush=True)
    timed_steps = max(step - UNTIMED_STEPS, 1)
    tok_per_s = timed_steps * tokens_per_step / max(trained_s, 1e-9)
    # MFU: 6 flops per parameter per token plus attention, against a bf16 dense peak (H100/H200).
    flops_per_token = 6 * n_params + 12 * DEPTH * D_MODEL * P.SEQ_LEN
    mfu = 100 * tok_per_s * flops_per_token / 989e12 if device == "cuda" else 0.0
    P.save_checkpoint(model)
    peak_mb = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else 0.0
    print("---")
    print(f"training_seconds: {trained_s:.1f}")
    print(f"total_seconds: {time.time() - t_start:.1f}")
    print(f"steps: {step}")
    print(f"tokens_per_second: {tok_per_s:.0f}")
    print(f"mfu_percent: {mfu:.2f}")
    print(f"num_params: {n_params}")
    print(f"peak_memory_mb: {peak_mb:.0f}")
    print(f"final_train_loss: {loss_val:.4f}")


if __name__ == "__main__":
    main()
