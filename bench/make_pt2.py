#!/usr/bin/python3
"""Write a torch.export .pt2 of an MLP whose weights are WIDTH x WIDTH float32 (LAYERS of them), for
bench/pt2.sh: the same graph at two widths shows whether `ckpt summary` stays flat in weight size.

    python3 bench/make_pt2.py OUT.pt2 WIDTH [LAYERS]

Needs torch >= 2.6 (e.g. the Debian 13 chroot's 2.6 or sid's 2.14); weights are torch.empty (no
values needed), the file is written atomically.
"""

import os
import sys

import torch


def main():
    out, width = sys.argv[1], int(sys.argv[2])
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    mlp = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    ep = torch.export.export(mlp, (torch.zeros(2, width),))
    tmp = out + ".tmp"
    torch.export.save(ep, tmp)
    os.replace(tmp, out)
    print(out, os.path.getsize(out), torch.__version__)


if __name__ == "__main__":
    main()
