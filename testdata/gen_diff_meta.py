#!/usr/bin/env python3
"""Pairs for `ckpt diff` beyond the tensors (issue 30, point 4), with their truth from torch itself.

Run with torch 2.x (the sid chroot's 2.14; the inputs and outputs are copied in and out of it):

    chroot ROOT python3 /gen/gen_diff_meta.py /gen/testdata /gen/testdata/diff_meta

reads, from the repository's testdata:

- t211/lightning_fit.ckpt (written by Lightning 2.6.6's Trainer.fit);
- hf211/gpt2_tiny/ (a GPT-2 with tied embeddings written by transformers 5.17 save_pretrained: sharded
  safetensors, which keep transformer.wte.weight and drop the tied lm_head.weight);
- formats/diff/a.pt (a small state dict);

and writes into diff_meta/:

- fit.ckpt: lightning_fit.ckpt as torch.load(map_location="cpu") gives it, saved again (the reference);
- fit_later.ckpt: the same training further on: epoch 1 -> 3, global_step 8 -> 24, the fit loop's
  epoch progress moved, the optimizer's lr 1e-05 -> 0.1, hyper_parameters lr 0.001 -> 0.01, the
  scheduler's last_epoch 2 -> 4, every optimizer state tensor (step, exp_avg, exp_avg_sq) changed;
  the model's weights equal;
- fit_optstate.ckpt: fit.ckpt with one element of one exp_avg moved by 0.5: only the optimizer's
  state values differ (their dtypes and shapes do not);
- gpt2_bin/: config.json (copied) and pytorch_model.bin, gpt2_tiny's tensors in one torch.save state
  dict with lm_head.weight tied to transformer.wte.weight (one tensor, as GPT2LMHeadModel.state_dict()
  has it and torch.save keeps it);
- gpt2_untied_bin/: the same with lm_head.weight a clone (not tied: a key safetensors did not drop);
- a_bf16.pt: a.pt with every float32 tensor cast to bfloat16 (for --ignore-dtype);
- ints.pt / ints_half.pt: int16 / int32 tensors and their float16 / bfloat16 casts (promotion rounds);

and expected.json: what torch says about each pair (read back with torch.load).
"""

import json
import os
import shutil
import sys

import torch


def read_safetensors(path):
    """Tensors of a safetensors file (header JSON + little-endian data), in header order."""
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=dtypes[info["dtype"]]) if e > b else torch.empty(0)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def plain(v):
    if isinstance(v, torch.Tensor):
        return v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def leaves(v, path=""):
    """(path, value) of every leaf of a plain dict / list tree."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield from leaves(x, f"{path}.{k}" if path else str(k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, f"{path}[{i}]")
    else:
        yield path, v


def outside_storages(ck):
    """Each storage of a checkpoint's tensors outside state_dict, once, in the order torch.save pickles
    them, as a flat tensor of its dtype (what ckpt compares: storages, not views)."""
    out, seen = [], set()

    def walk(v):
        if isinstance(v, torch.Tensor):
            s = v.untyped_storage()
            if s.data_ptr() not in seen:
                seen.add(s.data_ptr())
                out.append(torch.tensor([], dtype=v.dtype).set_(s))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for k, v in ck.items():
        if k != "state_dict":
            walk(v)
    return out


def lightning_pair(ref, other):
    """What torch says changed between two Lightning checkpoints (both read back with torch.load)."""
    weights_equal = list(ref["state_dict"]) == list(other["state_dict"]) and all(
        torch.equal(ref["state_dict"][k], other["state_dict"][k]) for k in ref["state_dict"])
    ta, tb = outside_storages(ref), outside_storages(other)
    assert len(ta) == len(tb) and all(a.dtype == b.dtype and a.shape == b.shape for a, b in zip(ta, tb))
    changed = [(a, b) for a, b in zip(ta, tb) if not torch.equal(a, b)]
    la, lb = dict(leaves(plain(ref["loops"]))), dict(leaves(plain(other["loops"])))
    return {
        "weights_equal": weights_equal,
        "epoch": [ref["epoch"], other["epoch"]],
        "global_step": [ref["global_step"], other["global_step"]],
        "hyper_parameters_lr": [ref["hyper_parameters"]["lr"], other["hyper_parameters"]["lr"]],
        "param_group_lr": [ref["optimizer_states"][0]["param_groups"][0]["lr"],
                           other["optimizer_states"][0]["param_groups"][0]["lr"]],
        "scheduler_last_epoch": [ref["lr_schedulers"][0]["last_epoch"], other["lr_schedulers"][0]["last_epoch"]],
        "loops_leaves_changed": sum(1 for k in la if la[k] != lb.get(k)),
        "outside_storages": len(ta),
        "outside_storages_changed": len(changed),
        "outside_max_abs_diff": max([float((a.double() - b.double()).abs().max()) for a, b in changed], default=0.0),
    }


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    expected = {"torch_version": torch.__version__}

    # Lightning
    ck = torch.load(os.path.join(src, "t211", "lightning_fit.ckpt"), map_location="cpu", weights_only=True)
    torch.save(ck, os.path.join(out, "fit.ckpt"))
    later = torch.load(os.path.join(out, "fit.ckpt"), weights_only=True)
    later["epoch"] = 3
    later["global_step"] = 24
    ep = later["loops"]["fit_loop"]["epoch_progress"]
    for part in ("total", "current"):
        ep[part].update({"ready": 4, "started": 4, "processed": 4, "completed": 3})
    later["optimizer_states"][0]["param_groups"][0]["lr"] = 0.1
    later["hyper_parameters"]["lr"] = 0.01
    later["lr_schedulers"][0]["last_epoch"] = 4
    for st in later["optimizer_states"][0]["state"].values():
        st["step"] = st["step"] * 3
        st["exp_avg"] = st["exp_avg"] * 2
        st["exp_avg_sq"] = st["exp_avg_sq"] * 2
    torch.save(later, os.path.join(out, "fit_later.ckpt"))
    opt = torch.load(os.path.join(out, "fit.ckpt"), weights_only=True)
    ea = opt["optimizer_states"][0]["state"][0]["exp_avg"]
    ea.view(-1)[0] += 0.5
    torch.save(opt, os.path.join(out, "fit_optstate.ckpt"))
    ref = torch.load(os.path.join(out, "fit.ckpt"), weights_only=True)
    expected["fit_later.ckpt"] = lightning_pair(ref, torch.load(os.path.join(out, "fit_later.ckpt"), weights_only=True))
    expected["fit_optstate.ckpt"] = lightning_pair(ref, torch.load(os.path.join(out, "fit_optstate.ckpt"), weights_only=True))

    # GPT-2 with tied embeddings: one torch.save state dict from the safetensors shards
    hf = os.path.join(src, "hf211", "gpt2_tiny")
    index = json.load(open(os.path.join(hf, "model.safetensors.index.json")))
    st = {}
    for shard in sorted(set(index["weight_map"].values())):
        st.update(read_safetensors(os.path.join(hf, shard)))
    truth = json.load(open(os.path.join(src, "hf211", "truth.json")))["gpt2_tiny"]
    order = []  # GPT2LMHeadModel.state_dict() order: each module's own tensors, modules in order
    for module in truth["module_types"]:
        for leaf in ("weight", "bias"):
            if f"{module}.{leaf}" in st:
                order.append(f"{module}.{leaf}")
    assert sorted(order) == sorted(st), "every safetensors key placed"
    for name, tied in (("gpt2_bin", True), ("gpt2_untied_bin", False)):
        sd = {k: st[k] for k in order}
        sd["lm_head.weight"] = st["transformer.wte.weight"] if tied else st["transformer.wte.weight"].clone()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(hf, "config.json"), os.path.join(d, "config.json"))
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        back = torch.load(os.path.join(d, "pytorch_model.bin"), weights_only=True)
        ties = {k: j for k in back for j in back if k != j and j in index["weight_map"] and k not in index["weight_map"]
                and back[k].data_ptr() == back[j].data_ptr() and back[k].shape == back[j].shape}
        expected[name] = {
            "tie_word_embeddings": truth["config"]["tie_word_embeddings"],
            "keys_not_in_safetensors": sorted(set(back) - set(index["weight_map"])),
            "keys_not_in_bin": sorted(set(index["weight_map"]) - set(back)),
            "tied": ties,
            "shared_keys_equal": all(torch.equal(back[k], st[k]) for k in index["weight_map"]),
            "paired": len(set(back) & set(index["weight_map"])),
        }

    # float32 against bfloat16, as torch.testing.assert_close(check_dtype=False) compares them
    a = torch.load(os.path.join(src, "formats", "diff", "a.pt"), weights_only=True)
    b = {k: v.to(torch.bfloat16) if v.dtype == torch.float32 else v.clone() for k, v in a.items()}
    torch.save(b, os.path.join(out, "a_bf16.pt"))
    b = torch.load(os.path.join(out, "a_bf16.pt"), weights_only=True)
    pairs = {}
    for k in a:
        p = torch.promote_types(a[k].dtype, b[k].dtype)
        x, y = a[k].to(p).double(), b[k].to(p).double()
        rel = ((x - y).abs() / y.abs())[y != 0]
        pairs[k] = {"dtype_a": str(a[k].dtype)[6:], "dtype_b": str(b[k].dtype)[6:],
                    "max_abs_diff": float((x - y).abs().max()) if x.numel() else 0.0,
                    "max_rel_diff": float(rel.max()) if rel.numel() else 0.0}
    close = {}
    for atol in (1e-2, 1e-4):
        ok = True
        for k in a:
            try:
                torch.testing.assert_close(a[k], b[k], check_dtype=False, atol=atol, rtol=0)
            except AssertionError:
                ok = False
        close[str(atol)] = ok
    expected["a_bf16.pt"] = {"a": "../formats/diff/a.pt", "tensors": pairs, "assert_close_check_dtype_false_rtol0": close}

    # An integer tensor against its float16 / bfloat16 cast: promote_types gives the float dtype, in
    # which the integers round to what the other side holds, so assert_close(check_dtype=False) passes
    # at zero tolerance while the values differ in float64.
    ints = torch.tensor([2049, 2051, 4097, -30001, 257, 259, 12345], dtype=torch.int16)
    torch.save({"x": ints, "y": ints.to(torch.int32)}, os.path.join(out, "ints.pt"))
    torch.save({"x": ints.to(torch.float16), "y": ints.to(torch.int32).to(torch.bfloat16)}, os.path.join(out, "ints_half.pt"))
    ia = torch.load(os.path.join(out, "ints.pt"), weights_only=True)
    ib = torch.load(os.path.join(out, "ints_half.pt"), weights_only=True)
    res = {}
    for k in ia:
        try:
            torch.testing.assert_close(ia[k], ib[k], check_dtype=False, atol=0, rtol=0)
            res[k] = True
        except AssertionError:
            res[k] = False
    expected["ints_half.pt"] = {
        "a": "ints.pt",
        "assert_close_check_dtype_false_exact": res,
        "float64_equal": {k: bool(torch.equal(ia[k].double(), ib[k].double())) for k in ia},
        "promoted": {k: str(torch.promote_types(ia[k].dtype, ib[k].dtype))[6:] for k in ia},
    }
    # Casts as torch rounds them (round to nearest even, overflow to inf), for value_diff's round_to_dtype.
    xs = [0.1, 1e-8, 6e-8, 257.0, 259.0, 2049.0, 2051.0, 4097.0, 65504.0, 65519.0, 65520.0, 70000.0, 16777217.0,
          3.3e38, 3.4e38, -12345.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -9]
    t = torch.tensor(xs, dtype=torch.float64)
    def js(x):  # JSON has no inf
        return x if x == x and abs(x) != float("inf") else str(x)
    expected["casts"] = {"inputs": xs, **{name: [js(x) for x in t.to(getattr(torch, name)).double().tolist()]
                                          for name in ("float32", "float16", "bfloat16")}}

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
