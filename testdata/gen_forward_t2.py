#!/usr/bin/env python3
"""Write the torch 2.x fixtures for `ckpt summary FILE --example-input SPEC` (attention through
F.scaled_dot_product_attention and torch 2.x's TransformerEncoderLayer) and what PyTorch measures in
one forward pass: per-module input / output sizes, call counts and FLOPs.

The counterpart of gen_forward.py (torch 1.13, testdata/forward/) for what torch 1.13 does not have.
Debian 12 only ships torch 1.13, so this runs in the Debian 13 (trixie) chroot, which ships
python3-torch 2.6, from the chroot's copy of the tree (/src/ckpt):

    mount -t proc proc /work/chroot-trixie/proc
    cp testdata/gen_forward.py testdata/gen_forward_t2.py /work/chroot-trixie/src/ckpt/testdata/
    chroot /work/chroot-trixie bash -c 'cd /src/ckpt && python3 testdata/gen_forward_t2.py'
    cp /work/chroot-trixie/src/ckpt/testdata/t26/forward/* testdata/t26/forward/
    umount /work/chroot-trixie/proc

    gen_forward_t2.py [OUTDIR]      # OUTDIR defaults to testdata/t26/forward

Writes into OUTDIR:

  sdpa.pt         torch.jit.script of SdpaNet: qkv = Linear(32, 96), attn = SDPA (forward(q, k, v)
                  returns F.scaled_dot_product_attention(q, k, v)), proj = Linear(32, 32);
                  forward(x [B, T, 32]) splits qkv(x) into q, k, v of [B, 4, T, 8], calls attn,
                  merges the heads back to [B, T, 32] and returns proj of that
  mha.pt          torch.jit.script of MhaNet: layer = TransformerEncoderLayer(32, 4, 64,
                  dropout=0.0, batch_first=True); forward(x [B, T, 32]) returns layer(x)
  expected.json   the cases below

expected.json: the format of testdata/forward/expected.json (see gen_forward.py): {"generator",
"torch", "cases"}, a case {"name", "file", "model", "inputs", "input_file", "modules", "forward"},
and two more fields per case:

  attention_op        the aten op the dispatch mode saw for the attention: for sdpa the SDPA kernel
                      F.scaled_dot_product_attention dispatched to (torch 2.6 on CPU:
                      aten._scaled_dot_product_flash_attention_for_cpu); for mha
                      aten._transformer_encoder_layer_fwd when TransformerEncoderLayer took its
                      fast path (torch 2.6, eval, no grad, batch_first: it does), else the SDPA
                      kernel MultiheadAttention used
  flop_counter_total  torch.utils.flop_counter.FlopCounterMode(display=False).get_total_flops()
                      over the same forward of the eager model (no recorder), as a cross-check.
                      torch 2.6's FlopCounterMode registers no formula for
                      _scaled_dot_product_flash_attention_for_cpu nor _transformer_encoder_layer_fwd,
                      so it counts 0 for those: it is below "forward"."flops" for sdpa, and 0 for
                      mha's fast path.

Cases:

  sdpa   file sdpa.pt, inputs ["2x16x32"]
  mha    file mha.pt, inputs ["2x16x32"]

The recorder is gen_forward.py's (imported from this file's folder): forward wrappers for module
in / out sizes and calls, a TorchDispatchMode for FLOPs, with torch.utils.flop_counter's formulas
for aten.mm, addmm, bmm, baddbmm, convolution, _convolution, PLUS attention: for
aten._scaled_dot_product_flash_attention_for_cpu, _scaled_dot_product_efficient_attention,
_scaled_dot_product_flash_attention and _scaled_dot_product_cudnn_attention (q, k, v = args 0, 1, 2,
shapes [B, H, S, D]): 2*B*H*Sq*Sk*Dq + 2*B*H*Sq*Sk*Dv (flop_counter's sdpa_flop_count).
aten.scaled_dot_product_attention itself is CompositeImplicitAutograd: the dispatch mode sees the
kernel it chose, never it. A fused op the mode sees as one (aten._transformer_encoder_layer_fwd)
counts 0, whatever it runs inside: the mode does not see the ops it calls.

Checks (assertions): each TorchScript file loaded back runs on the same input to the same output
(sizes and values); sdpa's FLOPs equal a hand-derived count and its dispatch mode saw exactly one
attention kernel; mha's path is logged with the FLOPs the recorder measures when the MHA fast path
is disabled (torch.backends.mha.set_fastpath_enabled(False): addmm / SDPA kernel), which must equal
the hand-derived count of the unfused layer.

Everything is seeded, and the script re-executes itself with PYTHONHASHSEED=0, so a rerun writes
byte-identical fixtures and expected.json, as long as it runs from the same path: the TorchScript
files' .debug_pkl records hold this file's name.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_forward as g  # noqa: E402  (the recorder, sizes(), Out, case(), checks)

warnings.filterwarnings("ignore")  # nested-tensor / fast-path chatter

MAX_TOTAL = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

class SDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class SdpaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = 4
        self.qkv = nn.Linear(32, 96)
        self.attn = SDPA()
        self.proj = nn.Linear(32, 32)

    def forward(self, x):
        b, t, c = x.size(0), x.size(1), x.size(2)
        d = c // self.heads
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                        # [B, H, T, D]
        y = self.attn(q, k, v)                                  # [B, H, T, D]
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class MhaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


# ---------------------------------------------------------------------------------------------
# Recorder: gen_forward.py's, with attention FLOPs
# ---------------------------------------------------------------------------------------------

ATTENTION_KERNELS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention")
FUSED = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")


def op_name(func):
    return str(func.overloadpacket)            # "aten.addmm"


def op_flops(func, args, out):
    """gen_forward.op_flops (flop_counter's formulas) plus the SDPA kernels; None for other ops."""
    if op_name(func) in ["aten." + k for k in ATTENTION_KERNELS]:
        bq, hq, sq, dq = args[0].shape
        bk, hk, sk, dk = args[1].shape
        bv, hv, sv, dv = args[2].shape
        assert bq == bk == bv and hq == hk == hv and sk == sv and dq == dk
        return 2 * bq * hq * sq * sk * dq + 2 * bq * hq * sq * sk * dv
    return g.op_flops(func, args, out)


class Recorder(g.Recorder):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.all_ops[op_name(func)] += 1
        f = op_flops(func, args, out)
        if f is not None:
            self.total += f
            for path in self.stack:
                if path != "":
                    self.rec[path]["flops"] += f
            inner = self.stack[-1] if self.stack else ""
            self.ops[(self.types[inner], op_name(func))] += 1
        return out


def record(model, args):
    r = Recorder(model)
    out, err = r.run(args, {})
    return r, out, err


def flop_counter_total(model, args):
    fc = FlopCounterMode(display=False)
    with torch.no_grad(), fc:
        model(*args)
    return fc.get_total_flops(), {str(op): n for op, n in fc.get_flop_counts().get("Global", {}).items()}


def attention_op(r):
    seen = [op for op in r.all_ops if op[len("aten."):] in ATTENTION_KERNELS + FUSED]
    assert len(seen) >= 1, dict(r.all_ops)
    fused = [op for op in seen if op[len("aten."):] in FUSED]
    return fused[0] if fused else seen[0]


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

def sdpa_hand_flops(b, t):
    e, h = 32, 4
    d = e // h
    return 2 * b * t * e * 3 * e + (2 * b * h * t * t * d + 2 * b * h * t * t * d) + 2 * b * t * e * e


def layer_hand_flops(b, t):
    """The unfused TransformerEncoderLayer(32, 4, 64): in-proj, q k^T, att v, out-proj, linear1, linear2."""
    e, ff, h = 32, 64, 4
    d = e // h
    return 2 * b * t * e * 3 * e + 2 * (2 * b * h * t * t * d) + 2 * b * t * e * e + 2 * (2 * b * t * e * ff)


def log_ops(label, r, fc_total, fc_ops):
    g.report_ops(label, r)
    g.log("    all aten ops: %s" % ", ".join("%s x%d" % kv for kv in sorted(r.all_ops.items())))
    g.log("    FlopCounterMode: total %d %s" % (fc_total, fc_ops))


def case_sdpa(out):
    net = g.build(SdpaNet, 10)
    out.script("sdpa.pt", net)
    torch.manual_seed(110)
    x = torch.randn(2, 16, 32)
    r, y, err = record(net, (x,))
    assert err is None, err
    fc_total, fc_ops = flop_counter_total(net, (x,))
    log_ops("sdpa", r, fc_total, fc_ops)
    kernels = [op for op in r.all_ops if op[len("aten."):] in ATTENTION_KERNELS]
    assert len(kernels) == 1 and r.all_ops[kernels[0]] == 1, dict(r.all_ops)
    hand = sdpa_hand_flops(2, 16)
    g.log("    hand-derived sdpa flops %d: %s" % (hand, "OK" if hand == r.total else "MISMATCH"))
    assert hand == r.total
    g.check_scripted(out.path("sdpa.pt"), (x,), {}, y)
    mods, fwd = g.case_result(r, y)
    return g.case("sdpa", "sdpa.pt", None, ["2x16x32"], None, modules=mods, forward=fwd,
                  attention_op=attention_op(r), flop_counter_total=fc_total)


def case_mha(out):
    net = g.build(MhaNet, 11)
    out.script("mha.pt", net)
    torch.manual_seed(111)
    x = torch.randn(2, 16, 32)
    r, y, err = record(net, (x,))
    assert err is None, err
    fc_total, fc_ops = flop_counter_total(net, (x,))
    log_ops("mha", r, fc_total, fc_ops)
    op = attention_op(r)
    g.log("    path: %s (%s)" % (op, "TransformerEncoderLayer fast path" if op.endswith(FUSED[0]) else "not the fast path"))

    # For reference: the same forward with the MHA fast path off (the modules run one by one).
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        r2, y2, err2 = record(net, (x,))
    finally:
        torch.backends.mha.set_fastpath_enabled(was)
    assert err2 is None and g.same_output(y, y2)
    hand = layer_hand_flops(2, 16)
    g.log("    fast path off: flops %d (hand-derived unfused layer %d: %s); ops %s" % (
        r2.total, hand, "OK" if hand == r2.total else "MISMATCH",
        ", ".join("%s x%d" % kv for kv in sorted(r2.all_ops.items()) if op_flops_named(kv[0]))))
    assert hand == r2.total

    g.check_scripted(out.path("mha.pt"), (x,), {}, y)
    mods, fwd = g.case_result(r, y)
    # ckpt counts the matmul family inside fused kernels too (it observes every operator LibTorch runs):
    # for the fused layer that is the unfused forward's count, measured here with the fast path off.
    return g.case("mha", "mha.pt", None, ["2x16x32"], None, modules=mods, forward=fwd,
                  attention_op=op, flop_counter_total=fc_total, unfused_flops=r2.total)


def op_flops_named(name):
    return name[len("aten."):] in ("mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution") + ATTENTION_KERNELS


ORDER = ["sdpa", "mha"]


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":   # TorchScript code/ may list constants in set order
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(HERE, "t26", "forward"))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out = g.Out(args.outdir)

    cases = [case_sdpa(out), case_mha(out)]
    assert [c["name"] for c in cases] == ORDER

    doc = collections.OrderedDict()
    doc["generator"] = "testdata/gen_forward_t2.py"
    doc["torch"] = torch.__version__
    doc["cases"] = cases
    text = json.dumps(doc, indent=1, sort_keys=False)
    # lists of numbers / strings (shapes, path lists) on one line each
    text = re.sub(r"\[\s*((?:-?\d+|\"[^\"\n]*\")(?:,\s*(?:-?\d+|\"[^\"\n]*\"))*)\s*\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    assert json.loads(text) == json.loads(json.dumps(doc))
    jp = out.path("expected.json")
    with open(jp, "w") as f:
        f.write(text + "\n")
    out.note("expected.json")

    total = 0
    for name, size in out.written:
        total += size
        with open(out.path(name), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        print("%-20s %7d bytes  sha256 %s" % (name, size, digest))
    assert total < MAX_TOTAL, total
    for c in cases:
        print("  %-20s flops %d, FlopCounterMode %d, attention %s" % (
            c["name"], c["forward"]["flops"], c["flop_counter_total"], c["attention_op"]))
    print("%d files, %d bytes; %d cases; torch %s -> %s" % (len(out.written), total, len(cases),
                                                           torch.__version__, args.outdir))


if __name__ == "__main__":
    main()
