#!/usr/bin/python3
"""Scripted models for bench/forward.sh (run with /usr/bin/python3, Debian's torch 1.13):

    make_forward_models.py OUTDIR

  resnet.pt   a ResNet-18-shaped conv net (basic blocks 64-128-256-512, BatchNorm, ReLU), input 1x3x224x224
  gpt.pt      a GPT-shaped decoder (6 blocks, d_model 256, 4 heads, MLP 1024, vocab 8192), input 1x256 token ids
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + self.down(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        a = F.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, h)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=8192, d=256, h=4, n=6, ctx=256):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, h) for _ in range(n)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.ln(self.blocks(x)))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(ResNet().eval()), os.path.join(out, "resnet.pt"))
    torch.jit.save(torch.jit.script(GPT().eval()), os.path.join(out, "gpt.pt"))


if __name__ == "__main__":
    main()
