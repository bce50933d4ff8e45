#!/usr/bin/python3
"""Write benchmark checkpoints for bench/run.sh (not part of CI).

Run with /usr/bin/python3 (Debian's torch 1.13); the python3 first on PATH has no torch.

  /usr/bin/python3 bench/make_gpt2_large.py OUT.pt
      A GPT-2-large-shaped state dict, keys exactly as Hugging Face GPT2LMHeadModel.state_dict()
      returns them in transformers versions where attn.bias / attn.masked_bias are not persistent:
      36 layers, d_model 1280, vocab 50257, n_positions 1024, lm_head.weight tied to
      transformer.wte.weight (same tensor, so torch.save writes one storage).
      437 entries, 774,030,080 unique float32 values, about 3.1 GB.

  /usr/bin/python3 bench/make_gpt2_large.py --mask-buffers OUT.pt
      Also the per-layer attn.bias ([1,1,1024,1024] bool causal mask) and attn.masked_bias (scalar)
      buffers that older transformers versions saved: 509 entries.

  /usr/bin/python3 bench/make_gpt2_large.py --entries 100000 OUT.pt
      A state dict of 100,000 small float32 tensors (one storage each, so the zip has > 65,535
      members and needs zip64): the "linear in tensor count" case.

Values come from torch.empty: they are whatever the allocator returned (they are not the point);
every byte is still written by torch.save. The file is written under a temporary name and renamed
only after its size has been checked, so a reused file in bench's scratch dir is never a torn one.
"""
import argparse
import collections
import os
import sys
import time

import torch

N_LAYER = 36
D_MODEL = 1280
VOCAB = 50257
N_POSITIONS = 1024


def with_metadata(sd, module_names):
    # nn.Module.state_dict() attaches `_metadata` (module name -> {"version": N}) to the
    # OrderedDict, and torch.save pickles it as the dict's state (BUILD). Readers must cope.
    sd._metadata = collections.OrderedDict((name, {"version": 1}) for name in module_names)
    return sd


def gpt2_large(mask_buffers):
    d = D_MODEL
    e = torch.empty
    sd = collections.OrderedDict()
    modules = ["", "transformer", "transformer.wte", "transformer.wpe", "transformer.drop"]
    wte = e(VOCAB, d)
    sd["transformer.wte.weight"] = wte
    sd["transformer.wpe.weight"] = e(N_POSITIONS, d)
    for i in range(N_LAYER):
        p = "transformer.h.%d." % i
        modules += [p[:-1], p + "ln_1", p + "attn", p + "attn.c_attn", p + "attn.c_proj",
                    p + "attn.attn_dropout", p + "attn.resid_dropout", p + "ln_2", p + "mlp",
                    p + "mlp.c_fc", p + "mlp.c_proj", p + "mlp.act", p + "mlp.dropout"]
        sd[p + "ln_1.weight"] = e(d)
        sd[p + "ln_1.bias"] = e(d)
        if mask_buffers:
            # One mask per layer, as each GPT2Attention registers its own buffer.
            sd[p + "attn.bias"] = torch.tril(torch.ones(N_POSITIONS, N_POSITIONS, dtype=torch.bool)).view(
                1, 1, N_POSITIONS, N_POSITIONS)
            sd[p + "attn.masked_bias"] = torch.tensor(-1e4)
        # HF Conv1D stores weight as [in_features, out_features].
        sd[p + "attn.c_attn.weight"] = e(d, 3 * d)
        sd[p + "attn.c_attn.bias"] = e(3 * d)
        sd[p + "attn.c_proj.weight"] = e(d, d)
        sd[p + "attn.c_proj.bias"] = e(d)
        sd[p + "ln_2.weight"] = e(d)
        sd[p + "ln_2.bias"] = e(d)
        sd[p + "mlp.c_fc.weight"] = e(d, 4 * d)
        sd[p + "mlp.c_fc.bias"] = e(4 * d)
        sd[p + "mlp.c_proj.weight"] = e(4 * d, d)
        sd[p + "mlp.c_proj.bias"] = e(d)
    sd["transformer.ln_f.weight"] = e(d)
    sd["transformer.ln_f.bias"] = e(d)
    sd["lm_head.weight"] = wte  # tied: same tensor, same storage
    modules += ["transformer.ln_f", "lm_head"]
    return with_metadata(sd, modules)


def many_entries(n):
    # Realistic-looking names: blocks of 4 entries, shapes vary a little so records differ.
    sd = collections.OrderedDict()
    names = ("weight", "bias", "running_mean", "running_var")
    modules = [""]
    for i in range(n):
        block, kind = divmod(i, len(names))
        if kind == 0:
            modules.append("blocks.%d" % block)
            sd["blocks.%d.weight" % block] = torch.empty(8, 1 + block % 4)
        else:
            sd["blocks.%d.%s" % (block, names[kind])] = torch.empty(8)
    return with_metadata(sd, modules)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--entries", type=int, default=0,
                    help="write N small tensors instead of the GPT-2-large state dict")
    ap.add_argument("--mask-buffers", action="store_true",
                    help="GPT-2: also save per-layer attn.bias / attn.masked_bias (509 entries)")
    a = ap.parse_args()

    t0 = time.perf_counter()
    sd = many_entries(a.entries) if a.entries else gpt2_large(a.mask_buffers)

    seen = {}
    numel_all = 0
    for v in sd.values():
        numel_all += v.numel()
        s = v.storage()
        seen[s.data_ptr()] = s.nbytes() if hasattr(s, "nbytes") else s.size() * s.element_size()
    storage_bytes = sum(seen.values())

    # Same basename in a private temporary folder: torch.save names the archive's top folder after
    # the file's stem, so the archive reads "gpt2-large/data.pkl" as a direct save would.
    tmpdir = os.path.join(os.path.dirname(os.path.abspath(a.out)), ".tmp-make-%d" % os.getpid())
    tmp = os.path.join(tmpdir, os.path.basename(a.out))
    os.mkdir(tmpdir)
    try:
        torch.save(sd, tmp)  # zip format (the default since torch 1.6)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        size = os.path.getsize(tmp)
        if size < storage_bytes:
            sys.exit("make_gpt2_large: %s is %d bytes, less than the %d storage bytes" % (tmp, size, storage_bytes))
        os.replace(tmp, a.out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        os.rmdir(tmpdir)
    print("%s: %d entries, %d storages, numel %d (all entries), %d storage bytes, file %d bytes, %.1f s"
          % (a.out, len(sd), len(seen), numel_all, storage_bytes, size, time.perf_counter() - t0))


if __name__ == "__main__":
    main()
