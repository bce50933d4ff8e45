#!/usr/bin/python3
"""Write the checkpoint pair bench/diff.sh times `ckpt diff --values` on (not part of CI).

    /usr/bin/python3 bench/make_diff_pair.py OUTDIR [--mib 1024]

writes three torch.save files of about MIB MiB each (run with /usr/bin/python3, Debian's torch 1.13):

- a.pt     a transformer-shaped state dict, half of its bytes float32, half bfloat16, plus small
           float32 / int64 tensors (layer norms, biases, a step counter);
- b.pt     every floating tensor of a.pt moved a little (a + 1e-3 * randn, in the tensor's dtype), as
           two training steps apart are: every element differs, the slow case;
- same.pt  a.pt's tensors cloned and saved again: every element equal, the common "did the
           conversion keep every weight" case.

Values are random (torch.manual_seed(0)); they are not the point, but every element of b.pt differs
so the numeric path is timed, not only a byte comparison. Files are written under a temporary name
and renamed once complete, so a reused file in the scratch dir is never a torn one.
"""
import argparse
import collections
import os

import torch


def state_dict(mib):
    torch.manual_seed(0)
    sd = collections.OrderedDict()
    d = 2048
    layer = 4 * d * d * 4 + 2 * d * 4 * d * 2 + 6 * d * 4  # float32 attn, bf16 mlp, float32 norms / biases
    layers = max(1, mib * 2**20 // layer)
    for i in range(layers):
        p = "layers.%d." % i
        sd[p + "attn.qkv.weight"] = torch.randn(3 * d, d)
        sd[p + "attn.out.weight"] = torch.randn(d, d)
        sd[p + "attn.out.bias"] = torch.randn(d)
        sd[p + "mlp.up.weight"] = torch.randn(4 * d, d).to(torch.bfloat16)
        sd[p + "mlp.down.weight"] = torch.randn(d, 4 * d).to(torch.bfloat16)
        for n in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "mlp.up.bias"):
            sd[p + n] = torch.randn(d)
    sd["step"] = torch.tensor(1000, dtype=torch.int64)
    return sd


def save(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)
    print("%s: %d bytes" % (path, os.path.getsize(path)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--mib", type=int, default=1024)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    a = state_dict(args.mib)
    save(a, os.path.join(args.outdir, "a.pt"))
    save(collections.OrderedDict((k, v.clone()) for k, v in a.items()), os.path.join(args.outdir, "same.pt"))
    torch.manual_seed(1)
    b = collections.OrderedDict()
    for k, v in a.items():
        b[k] = (v.float() + 1e-3 * torch.randn(v.shape)).to(v.dtype) if v.is_floating_point() else v.clone()
    save(b, os.path.join(args.outdir, "b.pt"))


if __name__ == "__main__":
    main()
