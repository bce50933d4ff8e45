#!/usr/bin/env python3
"""Remote inputs (not part of CI): requests, bytes and wall time of `ckpt summary` / `ckpt check` of a file
served by nginx on 127.0.0.1 (tests/remote/servers.py), against the same command on the local file.

  bench/remote.py                     # builds what is missing under $BENCH_DIR, prints the table and the goals
  CKPT=build/ckpt RUNS=5 bench/remote.py

Inputs (written once under BENCH_DIR, default /tmp/ckpt-bench, by Debian's torch 1.13 in /usr/bin/python3):
- gpt2-large.pt: bench/make_gpt2_large.py, the 3.1 GB GPT-2-large state dict (437 entries, data.pkl 74 kB);
- gpt2-large.safetensors: its twin as transformers saves it (lm_head.weight, tied to transformer.wte.weight,
  left out), written here with the format's own layout (8-byte length, JSON header, data);
- gpt2-large-sharded/: the twin cut in name order into shards of at most ~780 MB (5), with
  model.safetensors.index.json and GPT-2-large's config.json, served as a Hub repo (hf://bench/gpt2-large).

Goals (issues 29 and 41): a torch.save zip of any size with a 74 kB data.pkl in <= 3 requests and <= 1 MiB
(tests/remote/remote_cases.py holds any data.pkl to 3); a safetensors file in 1 request of 100,000 bytes (as
huggingface_hub's get_safetensors_metadata asks) when its header is under it; a sharded repo in shards + 2
requests (the listing, the index, a header per shard; its config.json is one more); `check` reads nothing
but the pickles. Each row's requests and bytes come from ckpt's JSON `remote` object and nginx's log.
"""
import json
import os
import struct
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
import servers  # noqa: E402

CKPT = os.path.join(ROOT, os.environ.get("CKPT", "build/ckpt"))
BENCH_DIR = os.environ.get("BENCH_DIR", "/tmp/ckpt-bench")
RUNS = int(os.environ.get("RUNS", "3"))
TORCH_PY = os.environ.get("TORCH_PY", "/usr/bin/python3")
SHARDS = 4

WRITE_TWIN = r'''
import json, struct, sys, torch
sd = torch.load(sys.argv[1], map_location="cpu")
sd = {k: v for k, v in sd.items() if k != "lm_head.weight"}  # tied to transformer.wte.weight: transformers drops it
names = sorted(sd)
def write(path, names, meta):
    header, off = {}, 0
    for n in names:
        t = sd[n].contiguous()
        nb = t.numel() * t.element_size()
        header[n] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + nb]}
        off += nb
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for n in names:
            f.write(sd[n].contiguous().numpy().tobytes())
    import os; os.replace(path + ".tmp", path)
write(sys.argv[2], names, {"format": "pt"})
total = sum(sd[n].numel() * 4 for n in names)
shards, cur, size = [], [], 0
for n in names:
    nb = sd[n].numel() * 4
    if cur and size + nb > total / int(sys.argv[4]) * 1.01:
        shards.append(cur); cur, size = [], 0
    cur.append(n); size += nb
shards.append(cur)
wm = {}
for i, s in enumerate(shards):
    fn = f"model-{i+1:05d}-of-{len(shards):05d}.safetensors"
    write(sys.argv[3] + "/" + fn, s, {"format": "pt"})
    wm.update({n: fn for n in s})
json.dump({"metadata": {"total_size": total}, "weight_map": wm}, open(sys.argv[3] + "/model.safetensors.index.json", "w"), indent=2)
'''

GPT2_LARGE_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256,
    "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 1280, "n_head": 20, "n_layer": 36, "n_positions": 1024, "resid_pdrop": 0.1,
    "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "vocab_size": 50257}


def prepare():
    os.makedirs(BENCH_DIR, exist_ok=True)
    pt = os.path.join(BENCH_DIR, "gpt2-large.pt")
    if not os.path.exists(pt):
        subprocess.run([TORCH_PY, os.path.join(ROOT, "bench", "make_gpt2_large.py"), pt], check=True)
    st = os.path.join(BENCH_DIR, "gpt2-large.safetensors")
    sharded = os.path.join(BENCH_DIR, "gpt2-large-sharded")
    if not os.path.exists(st) or not os.path.exists(os.path.join(sharded, "model.safetensors.index.json")):
        os.makedirs(sharded, exist_ok=True)
        subprocess.run([TORCH_PY, "-c", WRITE_TWIN, pt, st, sharded, str(SHARDS)], check=True)
    with open(os.path.join(sharded, "config.json"), "w") as f:
        json.dump(GPT2_LARGE_CONFIG, f, indent=2)
    return pt, st, sharded


def timed(args, env):
    best, out = None, None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
        dt = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
        best = dt if best is None else min(best, dt)
        out = p
    return best, out


def main():
    if not os.access(CKPT, os.X_OK):
        sys.exit(f"bench/remote.py: no ckpt binary at {CKPT} (build it, or set CKPT)")
    pt, st, sharded = prepare()
    shard_files = sorted(f for f in os.listdir(sharded) if f.endswith(".safetensors"))
    ng = servers.NginxServers()
    ng.add_file("gpt2-large.pt", pt)
    ng.add_file("gpt2-large.safetensors", st)
    files = {f: os.path.join(sharded, f) for f in os.listdir(sharded)}
    ng.add_hf_repo("bench", "gpt2-large", "main", files)
    rows = []
    with ng:
        env = dict(os.environ, HF_ENDPOINT=ng.hub_url, SSL_CERT_FILE=ng.cert, CURL_CA_BUNDLE=ng.cert, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "HF_TOKEN"):
            env.pop(k, None)
        cases = [
            ("summary", "torch.save zip, 3.1 GB", f"{ng.http_url}/gpt2-large.pt", pt),
            ("check", "torch.save zip, 3.1 GB", f"{ng.http_url}/gpt2-large.pt", pt),
            ("summary", "safetensors, 3.1 GB", f"{ng.http_url}/gpt2-large.safetensors", st),
            ("check", "safetensors, 3.1 GB", f"{ng.http_url}/gpt2-large.safetensors", st),
            ("summary", f"hf:// sharded repo, {len(shard_files)} shards", "hf://bench/gpt2-large", sharded),
            ("check", f"hf:// sharded repo, {len(shard_files)} shards", "hf://bench/gpt2-large", sharded),
        ]
        for cmd, what, url, local in cases:
            ng.clear_log()
            t_remote, p = timed([CKPT, "summary", "--json", url], env) if cmd == "summary" else timed([CKPT, cmd, url], env)
            logged = ng.requests()
            per_run = len(logged) // RUNS
            sent = sum(int(r.get("bytes", 0) or 0) for r in logged) // RUNS
            if cmd == "summary":
                remote = json.loads(p.stdout)["remote"]
                reqs, got = remote["requests"], remote["bytes"]
            else:
                reqs, got = per_run, sent
            t_local, _ = timed([CKPT, cmd, local] + (["--json"] if cmd == "summary" else []), env)
            full_get = [r for r in logged if not r.get("range")]
            redirects = sum(1 for r in logged if int(r.get("status", 0)) in (301, 302, 303, 307, 308)) // RUNS
            if os.environ.get("VERBOSE"):
                for r in logged[:per_run]:
                    print(f"  {r['server']:<5} {r['status']} {r['uri'][:90]} range={r.get('range')!r}")
            rows.append((cmd, what, reqs, redirects, got, len(full_get) // RUNS, t_remote, t_local))
    print(f"ckpt over HTTP on 127.0.0.1 (nginx), best of {RUNS}; local = the same command on the local file\n")
    print("requests: HTTP requests ckpt sent (its JSON `remote`, equal to nginx's log), redirects among them (the Hub's")
    print("resolve/ to its CDN); no-range: requests without a Range header (the Hub's tree listing)\n")
    print(f"{'command':<8} {'input':<30} {'requests':>8} {'redirects':>9} {'bytes':>10} {'no-range':>8} {'remote s':>9} {'local s':>8} {'ratio':>6}")
    for cmd, what, reqs, redirects, got, full, tr, tl in rows:
        print(f"{cmd:<8} {what:<30} {reqs:>8} {redirects:>9} {got:>10} {full:>8} {tr:>9.3f} {tl:>8.3f} {tr / tl:>6.2f}")
    zip_sum = rows[0]
    st_sum = rows[2]
    shard_sum = rows[4]
    print("\ngoals:")
    print(f"  torch.save zip summary <= 3 requests and <= 1 MiB: {zip_sum[2]} requests, {zip_sum[4]} bytes: "
          f"{'met' if zip_sum[2] <= 3 and zip_sum[4] <= 1 << 20 else 'NOT met'}")
    print(f"  torch.save zip check <= 3 requests and <= 1 MiB: {rows[1][2]} requests, {rows[1][4]} bytes: "
          f"{'met' if rows[1][2] <= 3 and rows[1][4] <= 1 << 20 else 'NOT met'}")
    print(f"  safetensors summary in 1 request of <= 100,000 bytes: {st_sum[2]}, {st_sum[4]} bytes: "
          f"{'met' if st_sum[2] == 1 and st_sum[4] <= 100_000 else 'NOT met'}")
    n = len(shard_files)
    gets = shard_sum[2] - shard_sum[3]
    print(f"  sharded repo summary in shards + 2 = {n + 2} requests (+1 for its config.json = {n + 3}), redirects apart: "
          f"{gets} (+{shard_sum[3]} redirects): {'met' if gets <= n + 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
