#!/usr/bin/python3
"""Write the fixtures for `ckpt summary FILE --example-input SPEC` and what PyTorch measures in one
forward pass: per-module input / output sizes, call counts and FLOPs.

Run with Debian's Python, which has torch 1.13 (with torch 2.x it writes the cases of "torch 2.x" below):

    /usr/bin/python3 testdata/gen_forward.py [OUTDIR]      # OUTDIR defaults to testdata/forward

Writes into OUTDIR:

  convnet.pt            torch.jit.script of ConvNet: features = Sequential(Conv2d(3,8,3,padding=1),
                        BatchNorm2d(8), ReLU, MaxPool2d(2), Conv2d(8,16,3,stride=2,groups=2), ReLU),
                        up = ConvTranspose2d(16,4,2,stride=2), pool = AdaptiveAvgPool2d(1),
                        head = Linear(4,10); input N x 3 x 32 x 32
  convnet_input.pt      torch.save of one float32 2x3x32x32 tensor (for --example-input-file)
  transformer.pt        torch.jit.script of TinyTransformer: tok = Embedding(50,32), pos =
                        Embedding(16,32), encoder = TransformerEncoder(TransformerEncoderLayer(32, 4,
                        64, dropout=0.0, batch_first=False), 2), attn = MatmulAttention (qkv / proj
                        Linears, 4-D q @ k^T, softmax, @ v), norm = LayerNorm(32), lm_head =
                        Linear(32,50); input int64 ids [B, T], T <= 16, values in [0, 50)
  bad_ids.pt            torch.save of an int64 2x16 tensor with values in [0, 1000): the ids that
                        make `tok` fail (index out of range)
  multi.pt              torch.jit.script of MultiIO.forward(x [4,8], y [4,6]) -> Tuple[Dict[str,
                        Tensor], Tensor]: pair = PairNet (forward(x, y) -> Tuple[Tensor, Tensor]),
                        heads = DictHeads (forward(x) -> Dict[str, Tensor]), act = ReLU called twice
                        ([4,8], then [4,3]), blocks = ModuleList of two Linear(8,8) iterated,
                        sub = Sequential(Linear(8,8), Sequential(Tanh, Linear(8,2))), and
                        unused = Linear(4,4) that forward never calls
  multi_inputs.pt       torch.save((x, y)): a tuple, i.e. positional arguments
  multi_kwargs.pt       torch.save({"y": y, "x": x}): a dict, i.e. keyword arguments (other order)
  lazy_sd.pt            state_dict() of LazyModel (stem = LazyConv2d(8,3), bn = LazyBatchNorm2d,
                        head = LazyLinear(10); stem -> bn -> relu -> flatten -> head) before any
                        forward: UninitializedParameter / UninitializedBuffer entries
  lazy_arch.pt          the same LazyModel after one dry-run forward with a 1x3x8x8 input,
                        torch.jit.script'ed: the architecture that resolves lazy_sd.pt
  lit_convnet.ckpt      a Lightning-style dict (epoch, global_step, pytorch-lightning_version,
                        hyper_parameters) whose 'state_dict' is a differently seeded ConvNet's
                        state dict under 'model.'
  expected.json         the cases below

expected.json: {"generator", "torch": torch.__version__, "cases": [case, ...]}, written with
indent=1 (lists of numbers / strings on one line). A case:

  name        convnet, convnet_input_file, transformer, multi, multi_tuple_file, multi_dict_file,
              lazy, lit_convnet, bad_channels, bad_token_ids, bad_multi
  file        the file given to `ckpt summary`
  model       the --model architecture (TorchScript) or null when `file` is itself TorchScript
  inputs      --example-input SPECs, one per positional argument: dims joined by 'x', then
              optionally ':dtype' (float32 when omitted) and ':LOW..HIGH' (values drawn like
              torch.randint(LOW, HIGH): HIGH exclusive), e.g. "2x3x32x32", "2x16:int64:0..50".
              [] when input_file is set.
  input_file  the --example-input-file (a tensor, a tuple = positional arguments, or a dict =
              keyword arguments), or null
  modules     (not in error cases) every non-root path of the eager model's named_modules(), in
              that order: {"in_sizes", "out_sizes", "flops", "calls"}
  forward     (not in error cases) {"out_sizes": sizes of the root's return value, "flops": total}
  resolved    (lazy only) {state-dict entry: shape} for every uninitialized entry of lazy_sd.pt,
              shapes from the initialized model's state_dict()
  totals      (lazy only) of the initialized model: parameters (sum of numel of parameters()),
              trainable (those with requires_grad), buffers (sum of numel of buffers(),
              num_batches_tracked included), parameter_bytes (sum of numel * element_size)
  error       (error cases only) {"module": innermost module path on the call stack when the
              exception was raised ("" = the root), "completed": paths whose forward returned
              before the failure, in order of return, "message": first line of str(exception)
              as the EAGER model raises it (TorchScript wraps it in more text)}

The recorder (what ckpt implements): every module instance except the root gets its forward
replaced by a wrapper that binds the call to inspect.signature(forward), applies the defaults,
takes the arguments in signature order and drops trailing ones whose value equals the
parameter's default (None == None, or bool / int / float / str and equal; stops at the first
one that differs or is a tensor). One argument left: in_sizes = sizes(it); otherwise the list
of sizes(arg). out_sizes = sizes(return value). sizes(): Tensor -> list(shape) ([] for 0-dim),
tuple / list -> [sizes(e), ...], dict -> {str(k): sizes(v)} in insertion order, anything else
(None, bool, int, ...) -> "?". A module called more than once keeps its LAST call's sizes
(like Lightning's ModelSummary hooks); calls counts the calls. Never-called modules: "?", "?",
flops 0, calls 0.

FLOPs: a TorchDispatchMode counts aten.mm, addmm, bmm, baddbmm, convolution and _convolution
with the formulas of torch.utils.flop_counter (torch 2.x): mm 2*m*n*k; addmm = mm of args 1, 2
(bias ignored); bmm 2*b*m*n*k; baddbmm = bmm of args 1, 2; convolution(x, w, bias, stride,
padding, dilation, transposed, ...): prod((x.shape if transposed else out.shape)[2:]) *
prod(w.shape[2:]) * x.shape[0] * w.shape[0] * w.shape[1] * 2 (w.shape[0], w.shape[1] even for
transposed convs, whose weight is [in, out/groups, ...], as flop_counter does). Each counted op
adds to every module on the call stack (inclusive counts) and to forward.flops. In torch 1.13
conv2d reaches the dispatch mode as aten.convolution (never also as _convolution), Linear as
addmm (or mm), 4-D matmul as bmm, MultiheadAttention's scores as bmm.

Shapes and FLOPs do not depend on the input values; the eager run uses seeded random inputs.
Every model is checked: the TorchScript file is loaded back and run on the same inputs (same
output sizes and values as the eager model; the error cases fail there too). For transformer.pt
the run is checked not to take TransformerEncoderLayer's fast path
(aten._transformer_encoder_layer_fwd) nor the nested-tensor path (batch_first=False rules both
out in 1.13): the dispatch mode sees aten.addmm / bmm instead.

Everything is seeded, and the script re-executes itself with PYTHONHASHSEED=0, so a rerun writes
byte-identical fixtures and expected.json, as long as it runs from the same path and the model classes
keep their lines: the TorchScript files' .debug_pkl records hold this file's name and line numbers.
"""

import argparse
import collections
import hashlib
import inspect
import json
import math
import os
import sys
import warnings
from typing import Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from genlib import SET, T2, UNINIT, one_line_lists  # testdata/genlib.py, beside this script

warnings.filterwarnings("ignore")  # lazy-module / nested-tensor chatter

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_FILE = 200 * 1024
MAX_TOTAL = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, groups=2), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 4, 2, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        x = self.features(x)
        x = self.up(x)
        x = self.pool(x)
        return self.head(x.flatten(1))


class MatmulAttention(nn.Module):
    def __init__(self, dim: int, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.size(0), x.size(1), x.size(2)
        d = c // self.heads
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                        # [B, H, T, D]
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.softmax(dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(50, 32)
        self.pos = nn.Embedding(16, 32)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=False), num_layers=2)
        self.attn = MatmulAttention(32)
        self.norm = nn.LayerNorm(32)
        self.lm_head = nn.Linear(32, 50)

    def forward(self, ids):
        t = ids.size(1)
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        x = self.encoder(x.transpose(0, 1)).transpose(0, 1)    # encoder wants [T, B, E]
        x = self.attn(x)
        return self.lm_head(self.norm(x))


class PairNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fx = nn.Linear(8, 8)
        self.fy = nn.Linear(6, 8)

    def forward(self, x, y) -> Tuple[Tensor, Tensor]:
        return self.fx(x), self.fy(y)


class DictHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 4)

    def forward(self, x) -> Dict[str, Tensor]:
        return {"cls": self.cls(x), "box": self.box(x)}


class MultiIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.pair = PairNet()
        self.heads = DictHeads()
        self.act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.sub = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.Tanh(), nn.Linear(8, 2)))
        self.unused = nn.Linear(4, 4)

    def forward(self, x, y) -> Tuple[Dict[str, Tensor], Tensor]:
        a, b = self.pair(x, y)
        h = self.act(a + b)                 # [4, 8]
        for blk in self.blocks:
            h = blk(h)
        d = self.heads(h)
        c = self.act(d["cls"])              # [4, 3]: act's last call
        s = self.sub(h)
        return {"cls": c, "box": d["box"]}, s


class LazyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.LazyConv2d(8, 3)
        self.bn = nn.LazyBatchNorm2d()
        self.head = nn.LazyLinear(10)

    def forward(self, x):
        return self.head(F.relu(self.bn(self.stem(x))).flatten(1))


def build(cls, seed):
    torch.manual_seed(seed)
    m = cls()
    m.eval()
    return m


# ---------------------------------------------------------------------------------------------
# Recorder
# ---------------------------------------------------------------------------------------------

def sizes(v):
    if isinstance(v, torch.Tensor):
        return list(v.shape)
    if isinstance(v, (tuple, list)):
        return [sizes(e) for e in v]
    if isinstance(v, dict):
        return collections.OrderedDict((str(k), sizes(e)) for k, e in v.items())
    return "?"


SCALAR = (bool, int, float, str)


def equals_default(value, default):
    if default is inspect.Parameter.empty or isinstance(value, torch.Tensor):
        return False
    if value is None and default is None:
        return True
    return isinstance(value, SCALAR) and isinstance(default, SCALAR) and value == default


def call_args(sig, args, kwargs):
    """The arguments in signature order, trailing ones equal to their defaults dropped."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    vals, defaults = [], []
    for name, p in sig.parameters.items():
        v = bound.arguments[name]
        if p.kind == p.VAR_POSITIONAL:
            vals += list(v)
            defaults += [inspect.Parameter.empty] * len(v)
        elif p.kind == p.VAR_KEYWORD:
            vals += list(v.values())
            defaults += [inspect.Parameter.empty] * len(v)
        else:
            vals.append(v)
            defaults.append(p.default)
    while vals and equals_default(vals[-1], defaults[-1]):
        vals.pop()
        defaults.pop()
    return vals


def prod(xs):
    r = 1
    for x in xs:
        r *= int(x)
    return r


# The kernels F.scaled_dot_product_attention dispatches to (torch 2.x; torch 1.13 has none of them).
ATTENTION_KERNELS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention")


def op_flops(func, args, out):
    """torch.utils.flop_counter's formulas (torch 2.x); None for ops it does not count."""
    p = func.overloadpacket
    A = torch.ops.aten
    if str(p) in ["aten." + k for k in ATTENTION_KERNELS]:   # flop_counter's sdpa_flop_count
        bq, hq, sq, dq = args[0].shape
        bk, hk, sk, dk = args[1].shape
        bv, hv, sv, dv = args[2].shape
        assert bq == bk == bv and hq == hk == hv and sk == sv and dq == dk
        return 2 * bq * hq * sq * sk * dq + 2 * bq * hq * sq * sk * dv
    if p is A.mm:
        m, k = args[0].shape
        k2, n = args[1].shape
        assert k == k2
        return 2 * m * n * k
    if p is A.addmm:
        m, k = args[1].shape
        k2, n = args[2].shape
        assert k == k2
        return 2 * m * n * k
    if p is A.bmm or p is A.baddbmm:
        a, b = (args[0], args[1]) if p is A.bmm else (args[1], args[2])
        bs, m, k = a.shape
        bs2, k2, n = b.shape
        assert bs == bs2 and k == k2
        return 2 * bs * m * n * k
    if p is A.convolution or p is A._convolution:
        x, w, transposed = args[0], args[1], bool(args[6])
        batch = x.shape[0]
        conv_shape = (x.shape if transposed else out.shape)[2:]
        c_out, c_in = w.shape[0], w.shape[1]
        return prod(conv_shape) * prod(w.shape[2:]) * batch * c_out * c_in * 2
    return None


class Recorder(TorchDispatchMode):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.paths = [n for n, _ in model.named_modules() if n != ""]
        self.types = {n: type(m).__name__ for n, m in model.named_modules()}
        self.rec = collections.OrderedDict(
            (n, collections.OrderedDict(in_sizes="?", out_sizes="?", flops=0, calls=0)) for n in self.paths)
        self.stack = []
        self.total = 0
        self.completed = []
        self.error_module = None
        self.ops = collections.Counter()        # (innermost module type, op) -> count, counted ops
        self.all_ops = collections.Counter()    # every aten op seen (name -> count)

    # dispatch mode ---------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.all_ops[str(func.overloadpacket)] += 1
        f = op_flops(func, args, out)
        if f is not None:
            self.total += f
            for path in self.stack:
                if path != "":
                    self.rec[path]["flops"] += f
            inner = self.stack[-1] if self.stack else ""
            self.ops[(self.types[inner], str(func.overloadpacket))] += 1
        return out

    # module wrappers ----------------------------------------------------------------------
    def _wrap(self, path, module):
        orig = module.forward
        sig = inspect.signature(orig)
        rec = self

        def wrapper(*args, **kwargs):
            vals = call_args(sig, args, kwargs)
            rec.stack.append(path)
            try:
                result = orig(*args, **kwargs)
            except BaseException:
                if rec.error_module is None:
                    rec.error_module = path
                raise
            finally:
                rec.stack.pop()
            if path != "":
                r = rec.rec[path]
                r["in_sizes"] = sizes(vals[0]) if len(vals) == 1 else [sizes(a) for a in vals]
                r["out_sizes"] = sizes(result)
                r["calls"] += 1
                rec.completed.append(path)
            return result

        module.forward = wrapper

    def run(self, args, kwargs):
        """Returns (root output, None) or (None, exception)."""
        mods = list(self.model.named_modules())
        for path, m in mods:
            self._wrap(path, m)
        try:
            with torch.no_grad(), self:
                try:
                    return self.model.forward(*args, **kwargs), None
                except Exception as e:     # noqa: BLE001
                    return None, e
        finally:
            for _path, m in mods:
                del m.forward
            assert all("forward" not in m.__dict__ for _p, m in mods)


def record(model, args, kwargs=None):
    r = Recorder(model)
    out, err = r.run(args, kwargs or {})
    return r, out, err


def case_result(r, out):
    return r.rec, collections.OrderedDict(out_sizes=sizes(out), flops=r.total)


def error_result(r, err):
    return collections.OrderedDict(module=r.error_module, completed=list(r.completed),
                                   message=str(err).split("\n")[0])


# ---------------------------------------------------------------------------------------------
# Checks against the TorchScript files
# ---------------------------------------------------------------------------------------------

def same_output(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype \
            and torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(same_output, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_output(a[k], b[k]) for k in a)
    return a == b


def check_scripted(path, args, kwargs, eager_out, state_dict=None):
    m = torch.jit.load(path, map_location="cpu")
    if state_dict is not None:
        m.load_state_dict(state_dict)
    with torch.no_grad():
        got = m(*args, **kwargs)
    assert same_output(eager_out, got), path
    assert sizes(got) == sizes(eager_out)


def scripted_error(path, args, kwargs):
    m = torch.jit.load(path, map_location="cpu")
    try:
        with torch.no_grad():
            m(*args, **kwargs)
    except Exception as e:     # noqa: BLE001
        lines = [ln for ln in str(e).split("\n") if ln.strip()]
        return lines[-1]
    raise AssertionError("%s did not fail" % path)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

class Out:
    def __init__(self, outdir):
        self.outdir = outdir
        self.written = []

    def path(self, name):
        return os.path.join(self.outdir, name)

    def save(self, name, obj):
        torch.save(obj, self.path(name))
        self.note(name)

    def script(self, name, model):
        for m in model.modules():
            assert "forward" not in m.__dict__
        torch.jit.save(torch.jit.script(model), self.path(name))
        self.note(name)

    def note(self, name):
        size = os.path.getsize(self.path(name))
        assert size < MAX_FILE, (name, size)
        self.written.append((name, size))


def case(name, file, model, inputs, input_file, **rest):
    c = collections.OrderedDict(name=name, file=file, model=model, inputs=inputs, input_file=input_file)
    c.update(rest)
    return c


def log(*a):
    print(*a, file=sys.stderr)


def report_ops(label, r):
    log("[%s] total flops %d" % (label, r.total))
    for (typ, op), n in sorted(r.ops.items()):
        log("    %-28s %-14s x%d" % (typ, op, n))


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

def convnet_hand_flops(n, hw):
    """Independent count: 2 * MACs, MACs per conv output element = c_in/groups * kh * kw."""
    h1 = hw                                   # conv 3->8, k3, pad 1: same size
    macs = n * 8 * h1 * h1 * 3 * 9
    h2 = h1 // 2                              # maxpool
    h3 = (h2 - 3) // 2 + 1                    # conv 8->16, k3, stride 2, groups 2 (4 in / group)
    macs += n * 16 * h3 * h3 * 4 * 9
    macs += n * 16 * h3 * h3 * 4 * 4          # convtranspose 16->4, k2 s2: each input elt x 4 outs x 4 taps
    macs += n * 4 * 10                        # linear 4->10
    return 2 * macs


def transformer_hand_flops(b, t):
    e, ff, h = 32, 64, 4
    d = e // h
    layer = 2 * b * t * e * 3 * e + 2 * (2 * b * h * t * t * d) + 2 * b * t * e * e + 2 * (2 * b * t * e * ff)
    attn = 2 * b * t * e * 3 * e + 2 * (2 * b * h * t * t * d) + 2 * b * t * e * e
    return 2 * layer + attn + 2 * b * t * e * 50


def cases_convnet(out):
    cases = []
    net = build(ConvNet, 0)
    out.script("convnet.pt", net)
    torch.manual_seed(100)
    x = torch.randn(2, 3, 32, 32)
    out.save("convnet_input.pt", x)
    r, y, err = record(net, (x,))
    assert err is None, err
    report_ops("convnet", r)
    hand = convnet_hand_flops(2, 32)
    log("    hand-derived convnet flops %d: %s" % (hand, "OK" if hand == r.total else "MISMATCH"))
    assert hand == r.total
    check_scripted(out.path("convnet.pt"), (x,), {}, y)
    mods, fwd = case_result(r, y)
    cases.append(case("convnet", "convnet.pt", None, ["2x3x32x32"], None, modules=mods, forward=fwd))
    x2 = torch.load(out.path("convnet_input.pt"))
    assert torch.equal(x2, x)
    cases.append(case("convnet_input_file", "convnet.pt", None, [], "convnet_input.pt",
                      modules=mods, forward=fwd))

    # Lightning-style checkpoint of a differently seeded ConvNet; architecture convnet.pt
    other = build(ConvNet, 7)
    with torch.no_grad():                    # move the BatchNorm stats: a trained-looking file
        other.train()
        other(torch.randn(4, 3, 32, 32))
        other.eval()
    sd = collections.OrderedDict(("model." + k, v) for k, v in other.state_dict().items())
    out.save("lit_convnet.ckpt", {"epoch": 3, "global_step": 30, "pytorch-lightning_version": "2.6.0",
                                  "state_dict": sd, "hyper_parameters": {"lr": 0.01}})
    r2, y2, err = record(other, (x,))
    assert err is None and r2.rec == r.rec and r2.total == r.total
    ck = torch.load(out.path("lit_convnet.ckpt"))
    stripped = collections.OrderedDict((k[len("model."):], v) for k, v in ck["state_dict"].items())
    check_scripted(out.path("convnet.pt"), (x,), {}, y2, state_dict=stripped)
    cases.append(case("lit_convnet", "lit_convnet.ckpt", "convnet.pt", ["2x3x32x32"], None,
                      modules=mods, forward=fwd))

    # bad: 4 input channels
    xb = torch.randn(2, 4, 32, 32)
    rb, _, err = record(net, (xb,))
    assert err is not None
    e = error_result(rb, err)
    log("[bad_channels] %r; TorchScript: %r" % (dict(e), scripted_error(out.path("convnet.pt"), (xb,), {})))
    cases.append(case("bad_channels", "convnet.pt", None, ["2x4x32x32"], None, error=e))
    return cases


def cases_transformer(out):
    cases = []
    net = build(TinyTransformer, 1)
    out.script("transformer.pt", net)
    torch.manual_seed(101)
    ids = torch.randint(0, 50, (2, 16))
    r, y, err = record(net, (ids,))
    assert err is None, err
    report_ops("transformer", r)
    hand = transformer_hand_flops(2, 16)
    log("    hand-derived transformer flops %d: %s" % (hand, "OK" if hand == r.total else "MISMATCH"))
    assert hand == r.total
    for bad in ("_transformer_encoder_layer_fwd", "_native_multi_head_attention",
                "_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned"):
        assert not any(op.endswith(bad) for op in r.all_ops), bad
    seen = {op for (_t, op) in r.ops}
    assert {"aten.addmm", "aten.bmm"} <= seen, seen
    log("    fast path / nested tensor: not taken; counted ops seen: %s" % sorted(seen))
    log("    all aten ops: %s" % ", ".join("%s x%d" % kv for kv in sorted(r.all_ops.items())))
    check_scripted(out.path("transformer.pt"), (ids,), {}, y)
    mods, fwd = case_result(r, y)
    cases.append(case("transformer", "transformer.pt", None, ["2x16:int64:0..50"], None,
                      modules=mods, forward=fwd))

    torch.manual_seed(102)
    bad_ids = torch.randint(0, 1000, (2, 16))
    assert int(bad_ids.max()) >= 50
    out.save("bad_ids.pt", bad_ids)
    assert torch.equal(torch.load(out.path("bad_ids.pt")), bad_ids)
    rb, _, err = record(net, (bad_ids,))
    assert err is not None
    e = error_result(rb, err)
    log("[bad_token_ids] %r; TorchScript: %r" % (dict(e), scripted_error(out.path("transformer.pt"), (bad_ids,), {})))
    cases.append(case("bad_token_ids", "transformer.pt", None, [], "bad_ids.pt", error=e))
    return cases


def cases_multi(out):
    cases = []
    net = build(MultiIO, 2)
    out.script("multi.pt", net)
    torch.manual_seed(103)
    x, y = torch.randn(4, 8), torch.randn(4, 6)
    out.save("multi_inputs.pt", (x, y))
    out.save("multi_kwargs.pt", {"y": y, "x": x})
    r, o, err = record(net, (x, y))
    assert err is None, err
    report_ops("multi", r)
    assert r.rec["act"]["calls"] == 2 and r.rec["unused"]["calls"] == 0
    check_scripted(out.path("multi.pt"), (x, y), {}, o)
    mods, fwd = case_result(r, o)
    cases.append(case("multi", "multi.pt", None, ["4x8", "4x6"], None, modules=mods, forward=fwd))

    t = torch.load(out.path("multi_inputs.pt"))
    assert isinstance(t, tuple) and len(t) == 2 and torch.equal(t[0], x) and torch.equal(t[1], y)
    rt, ot, _ = record(net, t)
    assert (rt.rec, rt.total) == (r.rec, r.total)
    check_scripted(out.path("multi.pt"), t, {}, ot)
    cases.append(case("multi_tuple_file", "multi.pt", None, [], "multi_inputs.pt", modules=mods, forward=fwd))

    kw = torch.load(out.path("multi_kwargs.pt"))
    assert isinstance(kw, dict) and list(kw) == ["y", "x"]
    rk, ok, _ = record(net, (), kw)
    assert (rk.rec, rk.total) == (r.rec, r.total)
    check_scripted(out.path("multi.pt"), (), kw, ok)
    cases.append(case("multi_dict_file", "multi.pt", None, [], "multi_kwargs.pt", modules=mods, forward=fwd))

    yb = torch.randn(4, 7)
    rb, _, err = record(net, (x, yb))
    assert err is not None
    e = error_result(rb, err)
    log("[bad_multi] %r; TorchScript: %r" % (dict(e), scripted_error(out.path("multi.pt"), (x, yb), {})))
    cases.append(case("bad_multi", "multi.pt", None, ["4x8", "4x7"], None, error=e))
    return cases


def cases_lazy(out):
    net = build(LazyModel, 3)
    sd = net.state_dict()
    uninit = [k for k, v in sd.items() if isinstance(v, UNINIT)]
    assert uninit
    out.save("lazy_sd.pt", sd)
    with torch.no_grad():
        net(torch.randn(1, 3, 8, 8))          # dry run: materializes the lazy parameters
    assert not any(isinstance(v, UNINIT) for v in net.state_dict().values())
    out.script("lazy_arch.pt", net)

    loaded = torch.load(out.path("lazy_sd.pt"))
    assert list(loaded) == list(sd)
    assert [k for k, v in loaded.items() if isinstance(v, UNINIT)] == uninit
    init_sd = net.state_dict()
    resolved = collections.OrderedDict((k, list(init_sd[k].shape)) for k in uninit)
    params = list(net.parameters())
    totals = collections.OrderedDict(
        parameters=sum(p.numel() for p in params),
        trainable=sum(p.numel() for p in params if p.requires_grad),
        buffers=sum(b.numel() for b in net.buffers()),
        parameter_bytes=sum(p.numel() * p.element_size() for p in params))
    arch = torch.jit.load(out.path("lazy_arch.pt"))
    assert {k: list(v.shape) for k, v in arch.state_dict().items()} == \
        {k: list(v.shape) for k, v in init_sd.items()}

    torch.manual_seed(104)
    x = torch.randn(2, 3, 8, 8)
    r, y, err = record(net, (x,))
    assert err is None, err
    report_ops("lazy", r)
    check_scripted(out.path("lazy_arch.pt"), (x,), {}, y)
    mods, fwd = case_result(r, y)
    return [case("lazy", "lazy_sd.pt", "lazy_arch.pt", ["2x3x8x8"], None, modules=mods, forward=fwd,
                 resolved=resolved, totals=totals)]


# ---------------------------------------------------------------------------------------------
# torch 2.x cases (testdata/t26/forward)
# ---------------------------------------------------------------------------------------------
#
# What torch 1.13 does not have: attention through F.scaled_dot_product_attention and torch 2.x's
# TransformerEncoderLayer. Debian 12 only ships torch 1.13, so these run in the Debian 13 (trixie)
# chroot, which ships python3-torch 2.6 (testdata/README.md says how); OUTDIR defaults to
# testdata/t26/forward. Written there:
#
#   sdpa.pt         torch.jit.script of SdpaNet: qkv = Linear(32, 96), attn = SDPA (forward(q, k, v)
#                   returns F.scaled_dot_product_attention(q, k, v)), proj = Linear(32, 32);
#                   forward(x [B, T, 32]) splits qkv(x) into q, k, v of [B, 4, T, 8], calls attn,
#                   merges the heads back to [B, T, 32] and returns proj of that
#   mha.pt          torch.jit.script of MhaNet: layer = TransformerEncoderLayer(32, 4, 64,
#                   dropout=0.0, batch_first=True); forward(x [B, T, 32]) returns layer(x)
#   expected.json   the cases sdpa (file sdpa.pt, inputs ["2x16x32"]) and mha (file mha.pt, inputs
#                   ["2x16x32"]), in the format above with two more fields per case:
#
#     attention_op        the aten op the dispatch mode saw for the attention: for sdpa the SDPA kernel
#                         F.scaled_dot_product_attention dispatched to (torch 2.6 on CPU:
#                         aten._scaled_dot_product_flash_attention_for_cpu); for mha
#                         aten._transformer_encoder_layer_fwd when TransformerEncoderLayer took its
#                         fast path (torch 2.6, eval, no grad, batch_first: it does), else the SDPA
#                         kernel MultiheadAttention used
#     flop_counter_total  torch.utils.flop_counter.FlopCounterMode(display=False).get_total_flops()
#                         over the same forward of the eager model (no recorder), as a cross-check.
#                         torch 2.6's FlopCounterMode registers no formula for
#                         _scaled_dot_product_flash_attention_for_cpu nor _transformer_encoder_layer_fwd,
#                         so it counts 0 for those: it is below "forward"."flops" for sdpa, and 0 for
#                         mha's fast path.
#
#   and mha has unfused_flops: the recorder's FLOPs with the MHA fast path off (see case_mha).
#
# The recorder counts, beside the ops above, the attention kernels of ATTENTION_KERNELS (q, k, v = args
# 0, 1, 2, shapes [B, H, S, D]): 2*B*H*Sq*Sk*Dq + 2*B*H*Sq*Sk*Dv (flop_counter's sdpa_flop_count).
# aten.scaled_dot_product_attention itself is CompositeImplicitAutograd: the dispatch mode sees the
# kernel it chose, never it. A fused op the mode sees as one (aten._transformer_encoder_layer_fwd)
# counts 0, whatever it runs inside: the mode does not see the ops it calls.
#
# Checks (assertions): each TorchScript file loaded back runs on the same input to the same output
# (sizes and values); sdpa's FLOPs equal a hand-derived count and its dispatch mode saw exactly one
# attention kernel; mha's path is logged with the FLOPs the recorder measures when the MHA fast path
# is disabled (torch.backends.mha.set_fastpath_enabled(False): addmm / SDPA kernel), which must equal
# the hand-derived count of the unfused layer.

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


FUSED = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")


def flop_counter_total(model, args):
    from torch.utils.flop_counter import FlopCounterMode   # torch 2.x only
    fc = FlopCounterMode(display=False)
    with torch.no_grad(), fc:
        model(*args)
    return fc.get_total_flops(), {str(op): n for op, n in fc.get_flop_counts().get("Global", {}).items()}


def attention_op(r):
    seen = [op for op in r.all_ops if op[len("aten."):] in ATTENTION_KERNELS + FUSED]
    assert len(seen) >= 1, dict(r.all_ops)
    fused = [op for op in seen if op[len("aten."):] in FUSED]
    return fused[0] if fused else seen[0]


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
    report_ops(label, r)
    log("    all aten ops: %s" % ", ".join("%s x%d" % kv for kv in sorted(r.all_ops.items())))
    log("    FlopCounterMode: total %d %s" % (fc_total, fc_ops))


def case_sdpa(out):
    net = build(SdpaNet, 10)
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
    log("    hand-derived sdpa flops %d: %s" % (hand, "OK" if hand == r.total else "MISMATCH"))
    assert hand == r.total
    check_scripted(out.path("sdpa.pt"), (x,), {}, y)
    mods, fwd = case_result(r, y)
    return case("sdpa", "sdpa.pt", None, ["2x16x32"], None, modules=mods, forward=fwd,
                attention_op=attention_op(r), flop_counter_total=fc_total)


def case_mha(out):
    net = build(MhaNet, 11)
    out.script("mha.pt", net)
    torch.manual_seed(111)
    x = torch.randn(2, 16, 32)
    r, y, err = record(net, (x,))
    assert err is None, err
    fc_total, fc_ops = flop_counter_total(net, (x,))
    log_ops("mha", r, fc_total, fc_ops)
    op = attention_op(r)
    log("    path: %s (%s)" % (op, "TransformerEncoderLayer fast path" if op.endswith(FUSED[0]) else "not the fast path"))

    # For reference: the same forward with the MHA fast path off (the modules run one by one).
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        r2, y2, err2 = record(net, (x,))
    finally:
        torch.backends.mha.set_fastpath_enabled(was)
    assert err2 is None and same_output(y, y2)
    hand = layer_hand_flops(2, 16)
    log("    fast path off: flops %d (hand-derived unfused layer %d: %s); ops %s" % (
        r2.total, hand, "OK" if hand == r2.total else "MISMATCH",
        ", ".join("%s x%d" % kv for kv in sorted(r2.all_ops.items()) if op_flops_named(kv[0]))))
    assert hand == r2.total

    check_scripted(out.path("mha.pt"), (x,), {}, y)
    mods, fwd = case_result(r, y)
    # ckpt counts the matmul family inside fused kernels too (it observes every operator LibTorch runs):
    # for the fused layer that is the unfused forward's count, measured here with the fast path off.
    return case("mha", "mha.pt", None, ["2x16x32"], None, modules=mods, forward=fwd,
                attention_op=op, flop_counter_total=fc_total, unfused_flops=r2.total)


def op_flops_named(name):
    return name[len("aten."):] in ("mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution") + ATTENTION_KERNELS


# ---------------------------------------------------------------------------------------------

# The torch version picks the cases (genlib's T2, SET): 1.13 writes testdata/forward, 2.x the forward/
# folder of its fixture set, t<major><minor> (2.6: testdata/t26/forward, 2.14: t214/forward, 2.15: t215/forward).
if T2:
    OUTDIR = os.path.join(HERE, SET, "forward")
    ORDER = ["sdpa", "mha"]
else:
    OUTDIR = os.path.join(HERE, "forward")
    ORDER = ["convnet", "convnet_input_file", "transformer", "multi", "multi_tuple_file", "multi_dict_file",
             "lazy", "lit_convnet", "bad_channels", "bad_token_ids", "bad_multi"]


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":   # TorchScript code/ may list constants in set order
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=OUTDIR)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out = Out(args.outdir)

    if T2:
        cases = [case_sdpa(out), case_mha(out)]
    else:
        cases = cases_convnet(out) + cases_transformer(out) + cases_multi(out) + cases_lazy(out)
    byname = {c["name"]: c for c in cases}
    assert sorted(byname) == sorted(ORDER)
    cases = [byname[n] for n in ORDER]

    doc = collections.OrderedDict()
    doc["generator"] = "testdata/gen_forward.py"
    doc["torch"] = torch.__version__
    doc["cases"] = cases
    text = one_line_lists(json.dumps(doc, indent=1, sort_keys=False))   # shapes, path lists
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
        if "attention_op" in c:
            print("  %-20s flops %d, FlopCounterMode %d, attention %s" % (
                c["name"], c["forward"]["flops"], c["flop_counter_total"], c["attention_op"]))
        else:
            print("  %-20s %s" % (c["name"], ("flops %d" % c["forward"]["flops"]) if "forward" in c
                                      else "error in %r: %s" % (c["error"]["module"], c["error"]["message"])))
    print("%d files, %d bytes; %d cases; torch %s -> %s" % (len(out.written), total, len(cases),
                                                           torch.__version__, args.outdir))


if __name__ == "__main__":
    main()
