#!/usr/bin/python3
"""Write the fixtures for `ckpt check` (issue 6) and the findings each one must produce.

Run with Debian's Python, which has torch 1.13:

    /usr/bin/python3 testdata/gen_check.py [OUTDIR]      # OUTDIR defaults to testdata/check

Writes small fixtures and ONE file, OUTDIR/expected.json:

    {"<fixture file>": {
        "findings": [{"id": <DESIGN.md §5 rule id>, "where_contains": [...], "where_excludes": [...]}],
        "clean": true|false,
        "notes": "...",
        ... optional facts (below) ...}}

How a test should read it:
- `findings` is the COMPLETE list for the fixture: every listed entry must be matched by some finding
  with that id whose `where` (however ckpt renders it: keys, module, method, pickle offset) contains
  every string of `where_contains` and none of `where_excludes`; a finding whose id is not listed is
  a false positive. Several entries may share an id (a pickle with two dangerous globals): ckpt may
  report them as one finding or as several, either matches.
- `clean: true` means no finding at all (the fixture must exit 0 under every --fail-on level).

Every expected id comes from how the fixture was built (keys renamed the way torch.compile / DDP /
Fabric / FSDP / checkpoint wrappers name them, code written into scripted models, globals put into
pickles), never from ckpt. The generator then checks its own claims with PyTorch / Python:

- every non-hostile fixture loads with torch.load / torch.jit.load (`torch_loads`);
- state-dict-like zips also record whether torch 1.13's own weights_only unpickler accepts them
  (`weights_only_1_13`: true, or its reason for refusing; the 1.13 unpickler is narrower than 2.6's,
  e.g. it has no BINFLOAT, so a Lightning ckpt with float hyper-parameters fails there; see FORMATS.md
  "Security facts");
- scripted fixtures record the exact line of the serialized source that triggers the rule
  (`code_lines`, path relative to the archive prefix), copied from the saved zip, plus an assertion
  that it is the line this generator expects;
- every hostile fixture records `globals` found by walking the opcodes with pickletools: module and
  name exactly as written (protocol 2 writes `__builtin__`, `commands` for builtins / subprocess),
  opcode (GLOBAL, STACK_GLOBAL, INST), offset of that opcode, and pickle: `pickle` (the bare file),
  the zip record under the archive prefix (`data.pkl`), or `nested[i]#k` = the k-th pickle (0-based)
  of the legacy stream passed to the i-th _load_from_bytes, offset counted from that stream's start.
  Also `python_executes`: whether Python's pickle.loads (.pkl) or
  torch.load(weights_only=False) (.pt) really runs the payload. That is measured in a subprocess whose
  CKPT_SENTINEL env var points into a fresh temp dir; the sentinel is deleted afterwards.

Payloads are inert for ckpt: each only tries to create the file named by $CKPT_SENTINEL (else
/tmp/ckpt-sentinel). A test that runs ckpt over these files should set CKPT_SENTINEL to a temp path and
assert the file never appears.

Things this generator does NOT make:
- python-op: a `@torch.jit.ignore` function (free or method) called from forward scripts, but
  torch.jit.save in 1.13 refuses it ("Could not export Python function call ..."), so no archive with
  prim::PythonOp can be saved. `@torch.jit.unused` / `ignore(drop=True)` save, but their body becomes
  `ops.prim.RaiseException("This Python function is annotated to be ignored and cannot be run")`,
  not a PythonOp; no fixture is written for it.
- FSDP: torch.distributed.fsdp does not import on this Debian torch 1.13 / Python 3.11 (a dataclass
  error), so fsdp_sharded.pt's keys are written by hand after FSDP's naming (see its notes).

Seeded: a rerun gives the same expected.json and byte-identical fixtures. The generator re-executes
itself with PYTHONHASHSEED=0 (TorchScript writes Final constants in set order), and nested_torch_load.pkl's
inner legacy stream, which torch names by C pointer, gets its storage key renamed to "0". Scripted
archives' code/*.debug_pkl hold this generator's absolute path, so those are byte-identical only when
generated from the same checkout path (nothing in expected.json depends on it).
"""

import argparse
import builtins
import collections
import io
import json
import os
import pickle
import pickletools
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # lazy-module chatter

SENTINEL_SH = 'touch "${CKPT_SENTINEL:-/tmp/ckpt-sentinel}"'
SENTINEL_PY = "open(__import__('os').environ.get('CKPT_SENTINEL', '/tmp/ckpt-sentinel'), 'w').close()"
SENTINEL_EXEC = "import os; open(os.environ.get('CKPT_SENTINEL', '/tmp/ckpt-sentinel'), 'w').close()"


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.fc(x))))


class CleanScripted(nn.Module):
    """Linear + ReLU only: no `if` at all in the serialized code. (torch.relu, not nn.ReLU: scripting
    nn.ReLU brings in functional.relu, which has `if inplace:` on a bool argument.)"""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(torch.relu(self.fc(x)))


class CleanScriptedBN(nn.Module):
    """BatchNorm's scripted code has `if training:` (bool attribute), `if torch.ne(torch.dim(input), 2):`
    (int), `if torch.eq(size_prods0, 1):` (int) and RaiseException: none is tensor-conditioned."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.fc(x))))


class DataDependentIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if x.sum() > 0:
            y = y * 2
        return y


class TensorItem(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        scale = y.mean().item()
        return y * scale


class NonZero(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.nonzero(self.fc(x))


class Exported(nn.Module):
    """forward -> _forward_impl (reached, not an entry point); evaluation_step is exported only."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self._forward_impl(x)

    def _forward_impl(self, x):
        return torch.relu(self.fc(x))

    @torch.jit.export
    def evaluation_step(self, x):
        return self.fc(x).sum()


class Prints(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        print("input shape", x.shape)
        return self.fc(x)


class PartlyMeta(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8, device="meta")
        self.head = nn.Linear(8, 2)


class PartlyLazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.LazyLinear(8)
        self.head = nn.Linear(8, 2)


# ---------------------------------------------------------------------------------------------
# Hostile objects (their __reduce__ is what gets pickled; nothing runs while pickling)
# ---------------------------------------------------------------------------------------------

class EvilOsSystem:
    def __reduce__(self):
        return (os.system, (SENTINEL_SH,))


class EvilExec:
    def __reduce__(self):
        return (builtins.exec, (SENTINEL_EXEC,))


class EvilSubprocess:
    def __reduce__(self):
        return (subprocess.call, (["sh", "-c", SENTINEL_SH],))


class EvilEval:
    def __reduce__(self):
        return (builtins.eval, (SENTINEL_PY,))


class _BuiltinsModule:
    """Pickles as getattr(getattr, '__self__'): builtin functions' __self__ is the builtins module."""

    def __reduce__(self):
        return (getattr, (getattr, "__self__"))


class _EvalViaGetattr:
    """Pickles as getattr(<builtins module>, 'eval'); callable so that pickle accepts it as a reduce func."""

    def __call__(self, *a):
        raise AssertionError("never called while generating")

    def __reduce__(self):
        return (getattr, (_BuiltinsModule(), "eval"))


class EvilGetattr:
    def __reduce__(self):
        return (_EvalViaGetattr(), (SENTINEL_PY,))


class NestedTorchLoad:
    """What a torch Storage's __reduce__ returns, with chosen bytes: torch.storage._load_from_bytes(b)."""

    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return (torch.storage._load_from_bytes, (self.payload,))


class MyConfig:
    """A plain class: pickled by reference as __main__.MyConfig (outside every allowlist)."""

    def __init__(self):
        self.hidden = 16
        self.name = "tiny"


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def ordered(pairs):
    return collections.OrderedDict(pairs)


def renamed(sd, fn):
    out = collections.OrderedDict()
    for k, v in sd.items():
        out[fn(k)] = v
    return out


def zip_prefix(path):
    names = zipfile.ZipFile(path).namelist()
    return names[0].split("/")[0] + "/"


STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
              "SHORT_BINSTRING"}


def pickle_globals(data, start=0, label="pickle"):
    """(globals, end): every GLOBAL / INST / STACK_GLOBAL of the pickle starting at `start`.

    STACK_GLOBAL takes the two values pushed before it; the memo is followed for BINGET & co. Only
    string pushes are tracked, which is all STACK_GLOBAL ever consumes in these fixtures."""
    found, memo, pushes = [], {}, []
    end = start
    for op, arg, pos in pickletools.genops(io.BytesIO(data[start:])):
        name = op.name
        off = start + pos
        if name in ("GLOBAL", "INST"):
            mod, nm = arg.split(" ", 1)
            found.append(ordered([("module", mod), ("name", nm), ("opcode", name), ("offset", off),
                                  ("pickle", label)]))
            pushes.append(None)
        elif name == "STACK_GLOBAL":
            mod, nm = pushes[-2], pushes[-1]
            assert isinstance(mod, str) and isinstance(nm, str), (label, off)
            found.append(ordered([("module", mod), ("name", nm), ("opcode", name), ("offset", off),
                                  ("pickle", label)]))
            pushes[-2:] = [None]
        elif name in STRING_OPS:
            pushes.append(arg)
        elif name in ("MEMOIZE",):
            memo[len(memo)] = pushes[-1] if pushes else None
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = pushes[-1] if pushes else None
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            pushes.append(memo.get(arg))
        elif name in ("FRAME", "PROTO", "MARK", "POP", "POP_MARK"):
            pass
        else:
            pushes.append(None)
        if name == "STOP":
            end = off + 1
    return found, end


def legacy_stream_globals(data, label):
    """Globals of the five pickles of a legacy (pre-1.6) torch.save stream."""
    out, pos = [], 0
    for i in range(5):
        g, pos = pickle_globals(data, pos, "%s#%d" % (label, i))
        out += g
    return out


def nested_payloads(data):
    """BINBYTES arguments passed to torch.storage._load_from_bytes (the only bytes in these pickles)."""
    return [arg for op, arg, pos in pickletools.genops(io.BytesIO(data))
            if op.name in ("BINBYTES", "SHORT_BINBYTES", "BINBYTES8")]


def stored_record(data, info):
    """A stored (uncompressed) zip record found through its local header, whatever name that says."""
    off = info.header_offset
    assert data[off:off + 4] == b"PK\x03\x04" and info.compress_type == zipfile.ZIP_STORED
    nlen, xlen = struct.unpack("<HH", data[off + 26:off + 30])
    start = off + 30 + nlen + xlen
    return data[start:start + info.compress_size]


def file_globals(path):
    """Every global of every pickle in the file, nested _load_from_bytes streams included."""
    data = open(path, "rb").read()
    out = []
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.filename.endswith(".pkl"):
                    rel = info.filename.split("/", 1)[1]
                    out += pickle_globals(stored_record(data, info), 0, rel)[0]
        return out
    out += pickle_globals(data, 0, "pickle")[0]
    if any(g["name"] == "_load_from_bytes" for g in out):
        for i, blob in enumerate(nested_payloads(data)):
            out += legacy_stream_globals(blob, "nested[%d]" % i)
    return out


def code_line(path, rel, marker):
    """(lineno, stripped line) of the one line of <prefix>/<rel> that contains marker."""
    with zipfile.ZipFile(path) as z:
        src = z.read(zip_prefix(path) + rel).decode()
    hits = [(i + 1, ln.strip()) for i, ln in enumerate(src.split("\n")) if marker in ln]
    assert len(hits) == 1, (path, marker, hits)
    return hits[0]


def code_text(path):
    with zipfile.ZipFile(path) as z:
        return {n.split("/", 1)[1]: z.read(n).decode() for n in z.namelist() if n.endswith(".py")}


LOADER = r"""
import pickle, sys
p = sys.argv[1]
try:
    if p.endswith(".pkl"):
        pickle.loads(open(p, "rb").read())
    else:
        import torch
        torch.load(p, weights_only=False)
    print("ok")
except BaseException as e:
    print(type(e).__name__)
"""


def python_executes(path):
    """Does Python (pickle.loads / torch.load(weights_only=False)) run the payload? Measured in a
    subprocess whose CKPT_SENTINEL points into a fresh temp dir."""
    tmp = tempfile.mkdtemp(prefix="ckpt-gen-check-")
    try:
        sentinel = os.path.join(tmp, "sentinel")
        env = dict(os.environ, CKPT_SENTINEL=sentinel)
        r = subprocess.run([sys.executable, "-c", LOADER, os.path.abspath(path)], cwd=tmp, env=env,
                           capture_output=True, text=True, timeout=120)
        ran = os.path.exists(sentinel)
        outcome = (r.stdout.strip().splitlines() or ["<no output>"])[-1]
        return ran, outcome
    finally:
        shutil.rmtree(tmp)


def weights_only_1_13(path):
    """True, or why torch 1.13's WeightsUnpickler refused (e.g. 'Unsupported operand 71' is BINFLOAT,
    which 1.13 lacks and 2.x accepts; 'Unsupported class X' is a global outside its allowlist)."""
    try:
        torch.load(path, weights_only=True)
        return True
    except Exception as e:
        msg = str(e)
        return msg.split("WeightsUnpickler error: ", 1)[-1].strip().splitlines()[0]


# ---------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------

class Writer:
    def __init__(self, outdir):
        self.outdir = outdir
        self.expected = collections.OrderedDict()

    def path(self, name):
        return os.path.join(self.outdir, name)

    def record(self, name, findings, notes, **facts):
        assert name not in self.expected
        size = os.path.getsize(self.path(name))
        assert size < 30 * 1024, (name, size)
        doc = collections.OrderedDict()
        doc["findings"] = [finding(*f) if isinstance(f, tuple) else f for f in findings]
        doc["clean"] = not findings
        doc["notes"] = notes
        doc.update(facts)
        self.expected[name] = doc


def finding(rule, contains, excludes=None):
    f = collections.OrderedDict([("id", rule), ("where_contains", list(contains))])
    if excludes:
        f["where_excludes"] = list(excludes)
    return f


def check_state_dict_roundtrip(path, sd):
    loaded = torch.load(path)
    assert list(loaded.keys()) == list(sd.keys()), path
    for k, v in sd.items():
        lv = loaded[k]
        if isinstance(v, nn.parameter.UninitializedTensorMixin):
            assert isinstance(lv, nn.parameter.UninitializedTensorMixin), (path, k)
        elif v.is_meta:
            assert lv.is_meta and lv.shape == v.shape, (path, k)
        else:
            assert torch.equal(lv, v), (path, k)
    return True


def state_dict_fixture(w, name, sd, findings, notes):
    torch.save(sd, w.path(name))
    ok = check_state_dict_roundtrip(w.path(name), sd)
    w.record(name, findings, notes, keys=list(sd.keys()), torch_loads=ok,
             weights_only_1_13=weights_only_1_13(w.path(name)))


def small_state_dict():
    torch.manual_seed(0)
    m = Small()
    m.train()
    m(torch.randn(6, 4))  # BN running stats move
    return m.state_dict()


# ---------------------------------------------------------------------------------------------
# Key-rule fixtures
# ---------------------------------------------------------------------------------------------

def fx_clean(w):
    sd = small_state_dict()
    state_dict_fixture(w, "clean.pt", sd, [],
                       "Plain state dict (OrderedDict) of Linear + BatchNorm1d + Linear after one training "
                       "forward. Globals: collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                       "torch.FloatStorage, torch.LongStorage, all in torch's weights_only allowlist. "
                       "No finding of any kind.")


def fx_compiled(w):
    sd = small_state_dict()
    state_dict_fixture(
        w, "compiled_prefix.pt", renamed(sd, lambda k: "_orig_mod." + k),
        [("compiled-prefix", ["_orig_mod"])],
        "state_dict() of a torch.compile'd module (OptimizedModule keeps the original as attribute "
        "_orig_mod, so every key is `_orig_mod.<key>`). torch 1.13 has no torch.compile: keys renamed "
        "the way OptimizedModule names them. Not Lightning, so no lightning-prefix.")
    torch.manual_seed(1)
    enc = nn.Sequential(collections.OrderedDict(layer=nn.Linear(4, 4)))
    head = nn.Linear(4, 2)
    sd = collections.OrderedDict()
    for k, v in enc.state_dict().items():
        sd["encoder._orig_mod." + k] = v
    for k, v in head.state_dict().items():
        sd["head." + k] = v
    state_dict_fixture(
        w, "compiled_nested.pt", sd,
        [("compiled-prefix", ["encoder._orig_mod"])],
        "Only the submodule `encoder` was compiled (model.encoder = torch.compile(model.encoder)): keys "
        "encoder._orig_mod.layer.weight/bias, plus uncompiled head.weight/bias.")


def fx_ddp(w):
    sd = small_state_dict()
    state_dict_fixture(w, "ddp_prefix.pt", renamed(sd, lambda k: "module." + k),
                       [("ddp-prefix", ["module."])],
                       "state_dict() of DistributedDataParallel / DataParallel: every key starts `module.` "
                       "(including BN buffers).")


def fx_fabric(w):
    sd = small_state_dict()
    state_dict_fixture(w, "fabric_prefix.pt", renamed(sd, lambda k: "_forward_module." + k),
                       [("fabric-prefix", ["_forward_module."])],
                       "Keys as Fabric's _FabricModule names them through its `_forward_module` attribute "
                       "(every key `_forward_module.<key>`).")
    state_dict_fixture(w, "fabric_original.pt", renamed(sd, lambda k: "_original_module." + k),
                       [("fabric-prefix", ["_original_module."])],
                       "Keys through _FabricModule's `_original_module` attribute (every key "
                       "`_original_module.<key>`).")


def fx_activation_checkpoint(w):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    torch.manual_seed(2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([checkpoint_wrapper(Block()) for _ in range(2)])
            self.head = nn.Linear(4, 2)

    net = Net()
    # 1.13's CheckpointWrapper.state_dict() strips the segment with a post-hook; its module tree
    # (named_parameters, optimizer keys, older wrappers, hand-made dicts) keeps it.
    sd = collections.OrderedDict((k, p.detach()) for k, p in net.named_parameters())
    assert "layers.0._checkpoint_wrapped_module.fc.weight" in sd, list(sd)
    state_dict_fixture(
        w, "activation_checkpoint.pt", sd,
        [("activation-checkpoint-prefix", ["_checkpoint_wrapped_module"])],
        "layers.N wrapped by torch.distributed.algorithms._checkpoint.checkpoint_wrapper; keys taken "
        "from the real wrapped model's named_parameters(): layers.0._checkpoint_wrapped_module.fc.weight "
        "…, plus unwrapped head.weight/bias. (In 1.13 the wrapper's own state_dict() strips the segment "
        "with a post-hook; named_parameters() keeps it.)")


def fx_fsdp(w):
    torch.manual_seed(3)
    # FSDP(Net) with layers.0 / layers.1 wrapped too; world size 2, rank 0: each flat param holds the
    # first half of its (padded) flattened parameters.
    inner = [nn.Linear(4, 4) for _ in range(2)]
    root = nn.Linear(4, 2)

    def shard(mods):
        flat = torch.cat([p.detach().reshape(-1) for m in mods for p in m.parameters()])
        if flat.numel() % 2:
            flat = torch.cat([flat, flat.new_zeros(1)])
        return flat[: flat.numel() // 2].clone()

    sd = collections.OrderedDict()
    sd["_fsdp_wrapped_module._flat_param"] = shard([root])
    for i, m in enumerate(inner):
        sd["_fsdp_wrapped_module.layers.%d._fsdp_wrapped_module._flat_param" % i] = shard([m])
    state_dict_fixture(
        w, "fsdp_sharded.pt", sd,
        [("fsdp-sharded", ["_fsdp_wrapped_module"]), ("fsdp-sharded", ["_flat_param"])],
        "Rank 0 of a 2-way sharded FSDP model (root + two wrapped layers), keys as FSDP's module tree "
        "names them in torch 2.x (use_orig_params=False): `_fsdp_wrapped_module.…._flat_param`, each a "
        "1-D shard of the flattened parameters. Written by hand: torch.distributed.fsdp does not import "
        "on this torch 1.13 / Python 3.11 (and 1.13 names it `_fsdp_wrapped_module._fpw_module.flat_param`). "
        "Both markers are present; one finding naming both, or two, both match.")


def lightning_dict(sd):
    torch.manual_seed(4)
    return {
        "epoch": 1,
        "global_step": 4,
        "pytorch-lightning_version": "2.1.0",
        "state_dict": sd,
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 2, "completed": 2}}}},
        "callbacks": {},
        "optimizer_states": [],
        "lr_schedulers": [],
        "hparams_name": "kwargs",
        "hyper_parameters": {"lr": 0.001, "hidden": 8},
    }


def save_lightning(w, name, obj):
    buf = io.BytesIO()
    torch.save(obj, buf)  # Lightning saves through a buffer: zip prefix "archive/"
    with open(w.path(name), "wb") as f:
        f.write(buf.getvalue())
    loaded = torch.load(w.path(name))
    assert list(loaded["state_dict"].keys()) == list(obj["state_dict"].keys())
    for k, v in obj["state_dict"].items():
        assert torch.equal(loaded["state_dict"][k], v), k
    assert zip_prefix(w.path(name)) == "archive/"
    return True


def fx_lightning(w):
    sd = renamed(small_state_dict(), lambda k: "model." + k)
    obj = lightning_dict(sd)
    ok = save_lightning(w, "lightning_prefix.ckpt", obj)
    w.record("lightning_prefix.ckpt", [("lightning-prefix", ["model."])],
             "Lightning-shaped checkpoint (epoch, global_step, pytorch-lightning_version, state_dict, loops, "
             "callbacks, optimizer_states, lr_schedulers, hparams_name, hyper_parameters as a plain dict) "
             "saved through io.BytesIO (prefix archive/). Every state_dict key starts `model.` "
             "(the LightningModule's attribute).",
             keys=list(sd.keys()), torch_loads=ok,
             weights_only_1_13=weights_only_1_13(w.path("lightning_prefix.ckpt")))

    sd = renamed(small_state_dict(), lambda k: "model._orig_mod." + k)
    obj = lightning_dict(sd)
    ok = save_lightning(w, "lightning_compiled.ckpt", obj)
    w.record("lightning_compiled.ckpt",
             [("empty-init-compile", ["_orig_mod"]), ("compiled-prefix", ["_orig_mod"]),
              ("lightning-prefix", ["model."])],
             "Lightning checkpoint of a LightningModule whose `model` was compiled "
             "(self.model = torch.compile(self.model)): keys model._orig_mod.<key>. By construction it "
             "meets three rules: a Lightning ckpt with compiled submodule keys (empty-init-compile), the "
             "_orig_mod segment (compiled-prefix), and all keys sharing the attribute prefix `model.` "
             "(lightning-prefix).",
             keys=list(sd.keys()), torch_loads=ok,
             weights_only_1_13=weights_only_1_13(w.path("lightning_compiled.ckpt")))


def fx_meta(w):
    torch.manual_seed(5)
    m = PartlyMeta()
    sd = m.state_dict()
    assert sd["body.weight"].is_meta and not sd["head.weight"].is_meta
    state_dict_fixture(
        w, "meta.pt", sd,
        [("meta-tensors", ["body.weight", "body.bias"], ["head.weight", "head.bias"])],
        "body = Linear(8, 8, device='meta') never materialized, head = a real Linear(8, 2): body.weight "
        "and body.bias are _rebuild_meta_tensor_no_storage (no data/ record); head.* are real tensors "
        "and must not be named.")


def fx_lazy(w):
    torch.manual_seed(6)
    m = PartlyLazy()
    sd = m.state_dict()
    assert isinstance(sd["body.weight"], nn.parameter.UninitializedParameter)
    state_dict_fixture(
        w, "lazy.pt", sd,
        [("uninitialized-parameters", ["body.weight", "body.bias"], ["head.weight", "head.bias"])],
        "body = LazyLinear(8) before any forward: body.weight / body.bias are "
        "REDUCE(torch.nn.parameter.UninitializedParameter, (True,)); head = a real Linear(8, 2). NOTE: "
        "UninitializedParameter is not in torch's weights_only allowlist (1.13 nor 2.6; "
        "weights_only_1_13 is false here for that reason), yet it is a plain torch type ckpt decodes "
        "itself, so it is expected NOT to raise unknown-global.")


# ---------------------------------------------------------------------------------------------
# TorchScript fixtures
# ---------------------------------------------------------------------------------------------

def scripted_fixture(w, name, cls, findings, lines, notes):
    """lines: [(rule, marker, expected stripped line)] — checked against the saved code/__torch__.py."""
    torch.manual_seed(7)
    m = torch.jit.script(cls())
    torch.jit.save(m, w.path(name))
    loaded = torch.jit.load(w.path(name))
    x = torch.randn(3, 4)
    out = loaded(x)
    ref = m(x)
    assert torch.equal(out, ref), name
    code = []
    for rule, marker, want in lines:
        lineno, line = code_line(w.path(name), "code/__torch__.py", marker)
        assert line == want, (name, line, want)
        code.append(ordered([("rule", rule), ("file", "code/__torch__.py"), ("lineno", lineno),
                             ("line", line)]))
    w.record(name, findings, notes, code_lines=code, torch_loads=True)
    return loaded


def fx_scripted(w):
    scripted_fixture(
        w, "clean_scripted.pt", CleanScripted, [], [],
        "torch.jit.script of Linear + ReLU + Linear: forward only, no `if`, no .item(), no dynamic-shape "
        "op, no export, no print. Its code/ has no `if` at all (ReLU is torch.relu: nn.ReLU would add "
        "__torch__/torch/nn/functional.py's relu with `if inplace:` on a bool argument).")
    src = "\n".join(code_text(w.path("clean_scripted.pt")).values())
    assert "\n    if " not in src and "\n  if " not in src, src

    scripted_fixture(
        w, "clean_scripted_bn.pt", CleanScriptedBN, [], [],
        "Linear + BatchNorm1d + ReLU + Linear, scripted. BatchNorm1d's serialized code contains `if` "
        "statements, none tensor-conditioned: `if training:` (bool attribute self.training), "
        "`if torch.ne(torch.dim(input), 2):` and `if _5:` (int compare in _check_input_dim, which then "
        "raises via ops.prim.RaiseException), and in __torch__/torch/nn/functional.py "
        "`if training:` (bool arg) and `if torch.eq(size_prods0, 1):` (int) in _verify_batch_size. "
        "_check_input_dim / _verify_batch_size are reached from forward, not entry points. A "
        "false-positive test: no finding at all.")
    src = code_text(w.path("clean_scripted_bn.pt"))
    bn = [v for k, v in src.items() if k.endswith("batchnorm.py")][0]
    assert "if training:" in bn and "if torch.ne(torch.dim(input), 2):" in bn, bn

    scripted_fixture(
        w, "data_dependent_if.pt", DataDependentIf,
        [("data-dependent-control-flow", ["forward"])],
        [("data-dependent-control-flow", "torch.gt(torch.sum(x), 0)",
          "if bool(torch.gt(torch.sum(x), 0)):")],
        "forward has `if x.sum() > 0:` — in the IR prim::If on aten::Bool(aten::gt(aten::sum(x), 0)).")

    scripted_fixture(
        w, "tensor_item.pt", TensorItem,
        [("tensor-item", ["forward"])],
        [("tensor-item", "torch.item(", "scale = torch.item(torch.mean(y))")],
        "forward has `scale = y.mean().item()` (aten::item); no `if` on it, so no "
        "data-dependent-control-flow.")

    scripted_fixture(
        w, "nonzero.pt", NonZero,
        [("dynamic-shape-op", ["forward"])],
        [("dynamic-shape-op", "torch.nonzero(", "return torch.nonzero((fc).forward(x, ))")],
        "forward returns torch.nonzero(self.fc(x)) (aten::nonzero).")

    ex = scripted_fixture(
        w, "exported.pt", Exported,
        [("extra-entry-methods", ["evaluation_step"], ["_forward_impl"])],
        [("extra-entry-methods", "def evaluation_step(", "def evaluation_step(self: __torch__.Exported,"),
         ("extra-entry-methods", "(self)._forward_impl(", "return (self)._forward_impl(x, )")],
        "Methods in code/: forward, evaluation_step (@torch.jit.export, not called by forward: an entry "
        "point) and _forward_impl (called by forward: `return (self)._forward_impl(x, )`, NOT an entry "
        "point, must not be named). The second code_lines entry is the call that makes _forward_impl "
        "reachable.")
    assert hasattr(ex, "evaluation_step") and hasattr(ex, "_forward_impl")

    scripted_fixture(
        w, "prints.pt", Prints,
        [("print-call", ["forward"])],
        [("print-call", "print(", 'print("input shape", torch.size(x))')],
        "forward calls print() (prim::Print). DESIGN.md §5 has no id for prints (the issue lists "
        "'prints' among the TorchScript graph rules without one), so this uses the id `print-call`.")


# ---------------------------------------------------------------------------------------------
# Security fixtures
# ---------------------------------------------------------------------------------------------

def record_hostile(w, name, findings, notes, want_exec):
    ran, outcome = python_executes(w.path(name))
    assert ran == want_exec, (name, ran, outcome)
    globs = file_globals(w.path(name))
    facts = collections.OrderedDict(globals=globs, python_executes=ran, python_load=outcome)
    if name.endswith(".pt"):
        facts["weights_only_1_13"] = weights_only_1_13(w.path(name))
    w.record(name, findings, notes, **facts)
    return globs


def has_global(globs, module, name, opcode=None):
    return any(g["module"] == module and g["name"] == name and (opcode is None or g["opcode"] == opcode)
               for g in globs)


def fx_evil_pickles(w):
    # evil_os_system.pkl: protocol 2, os.system pickles as `posix system` on Linux.
    with open(w.path("evil_os_system.pkl"), "wb") as f:
        f.write(pickle.dumps(EvilOsSystem(), protocol=2))
    g = record_hostile(w, "evil_os_system.pkl", [("dangerous-global", ["posix", "system"])],
                       "Bare pickle, protocol 2: GLOBAL 'posix system' then REDUCE with the shell "
                       "command `%s`." % SENTINEL_SH, True)
    assert has_global(g, "posix", "system", "GLOBAL"), g

    # evil_exec.pt: torch.save (protocol 2, so builtins is written `__builtin__`).
    torch.manual_seed(8)
    torch.save({"weight": torch.randn(2, 2), "payload": EvilExec()}, w.path("evil_exec.pt"))
    g = record_hostile(w, "evil_exec.pt", [("dangerous-global", ["exec"])],
                       "torch.save of {'weight': tensor, 'payload': Evil()} whose __reduce__ is "
                       "(builtins.exec, (code,)). torch.save pickles with protocol 2 and fix_imports, so "
                       "data.pkl has GLOBAL '__builtin__ exec' (= builtins.exec).", True)
    assert has_global(g, "__builtin__", "exec", "GLOBAL"), g

    # evil_subprocess.pt
    torch.manual_seed(9)
    torch.save({"weight": torch.randn(2, 2), "payload": EvilSubprocess()}, w.path("evil_subprocess.pt"))
    g = record_hostile(w, "evil_subprocess.pt", [("dangerous-global", ["call"])],
                       "torch.save of a dict holding Evil() whose __reduce__ is "
                       "(subprocess.call, (['sh', '-c', cmd],)). torch.save's protocol-2 pickler applies "
                       "Python 2 compat names (_compat_pickle.REVERSE_IMPORT_MAPPING), so data.pkl says "
                       "GLOBAL 'commands call'; Python's unpickler maps `commands` back to `subprocess` "
                       "(IMPORT_MAPPING: __builtin__->builtins, commands->subprocess, cPickle->pickle) "
                       "and runs it. ckpt must apply the same mapping for protocol < 3 to see subprocess.",
                       True)
    assert has_global(g, "commands", "call", "GLOBAL"), g

    # evil_eval_proto4.pkl
    with open(w.path("evil_eval_proto4.pkl"), "wb") as f:
        f.write(pickle.dumps(EvilEval(), protocol=4))
    g = record_hostile(w, "evil_eval_proto4.pkl", [("dangerous-global", ["eval"])],
                       "Bare pickle, protocol 4 (FRAME, SHORT_BINUNICODE 'builtins' 'eval', STACK_GLOBAL, "
                       "REDUCE) evaluating `%s`." % SENTINEL_PY, True)
    assert has_global(g, "builtins", "eval", "STACK_GLOBAL"), g

    # evil_getattr.pkl: eval reached through getattr only; the module `builtins` comes from
    # getattr(getattr, '__self__'), so `builtins getattr` is the only global in the file.
    with open(w.path("evil_getattr.pkl"), "wb") as f:
        f.write(pickle.dumps(EvilGetattr(), protocol=3))
    g = record_hostile(w, "evil_getattr.pkl", [("dangerous-global", ["getattr"])],
                       "Bare pickle, protocol 3: getattr(getattr(getattr, '__self__'), 'eval')(code). "
                       "getattr.__self__ is the builtins module, so the only global is GLOBAL "
                       "'builtins getattr' (memoized, reused twice by BINGET); `eval` and `__self__` are "
                       "plain strings. pickle.loads runs eval.", True)
    assert [(x["module"], x["name"]) for x in g] == [("builtins", "getattr")], g

    # nested_torch_load.pkl: a real torch Storage pickled with plain pickle.
    s = torch.arange(6, dtype=torch.float32).storage()
    func, (inner,) = s.__reduce__()
    assert func is torch.storage._load_from_bytes
    key = str(s._cdata).encode()
    fixed = inner.replace(b"X" + struct.pack("<I", len(key)) + key, b"X" + struct.pack("<I", 1) + b"0")
    assert fixed != inner and key not in fixed
    real = pickle.dumps(s, protocol=3)
    blob = pickle.dumps(NestedTorchLoad(fixed), protocol=3)
    # same opcodes as pickling the storage itself, apart from the bytes (renamed key; a payload under
    # 256 bytes is SHORT_BINBYTES instead of BINBYTES)
    def shape(data):
        return [("BYTES", None) if op.name.endswith("BINBYTES") else (op.name, arg)
                for op, arg, pos in pickletools.genops(data)]
    assert shape(real) == shape(blob)
    with open(w.path("nested_torch_load.pkl"), "wb") as f:
        f.write(blob)
    assert torch.equal(torch.tensor(list(pickle.loads(blob))), torch.arange(6, dtype=torch.float32))
    g = record_hostile(w, "nested_torch_load.pkl", [("dangerous-global", ["_load_from_bytes"])],
                       "pickle.dumps(torch.arange(6.).storage(), protocol=3): TypedStorage.__reduce__ is "
                       "(torch.storage._load_from_bytes, (bytes,)) where bytes is a whole legacy torch.save "
                       "stream, so unpickling runs a nested torch.load (weights_only=False in 1.13). The "
                       "nested stream is benign (storage key renamed from a C pointer to '0' for "
                       "determinism), so nothing executes; the nested torch.load itself is the finding "
                       "(FORMATS.md bypass trick). Nested globals: torch.FloatStorage etc.", False)
    assert has_global(g, "torch.storage", "_load_from_bytes", "GLOBAL"), g

    # nested_torch_load_evil.pkl: same trick, nested stream hides the payload.
    buf = io.BytesIO()
    torch.save(EvilOsSystem(), buf, _use_new_zipfile_serialization=False)
    with open(w.path("nested_torch_load_evil.pkl"), "wb") as f:
        f.write(pickle.dumps(NestedTorchLoad(buf.getvalue()), protocol=3))
    g = record_hostile(w, "nested_torch_load_evil.pkl",
                       [("dangerous-global", ["_load_from_bytes"]), ("dangerous-global", ["posix", "system"])],
                       "Outer pickle is only torch.storage._load_from_bytes(bytes); the bytes are a legacy "
                       "torch.save stream whose object pickle (#3) is GLOBAL 'posix system' + REDUCE. The "
                       "outer file has no dangerous module at all: ckpt must scan the nested stream to "
                       "name os.system.", True)
    assert has_global(g, "posix", "system", "GLOBAL") and g[0]["name"] == "_load_from_bytes", g

    # unknown_global.pt
    torch.manual_seed(10)
    obj = {"w": torch.randn(2, 2), "cfg": MyConfig(),
           "args": argparse.Namespace(batch_size=4, lr=0.1)}
    torch.save(obj, w.path("unknown_global.pt"))
    loaded = torch.load(w.path("unknown_global.pt"))  # __main__.MyConfig resolves here
    assert isinstance(loaded["cfg"], MyConfig) and loaded["args"].batch_size == 4
    g = record_hostile(w, "unknown_global.pt",
                       [("dangerous-global", ["MyConfig", "NEWOBJ"])],
                       "torch.save of {'w': tensor, 'cfg': MyConfig(), 'args': argparse.Namespace(...)}: "
                       "GLOBAL '__main__ MyConfig' and GLOBAL 'argparse Namespace', each instantiated "
                       "(NEWOBJ + BUILD), both outside torch's weights_only allowlist (weights_only_1_13 "
                       "false). Issue K's verdict: a class the pickle instantiates that is not on ckpt's "
                       "allowlist is dangerous whatever it is (its __new__ / __setstate__ are the file's "
                       "choice of code); argparse.Namespace is on the allowlist (an attribute bag). Loads "
                       "in the generator's own process; python_load fails in the subprocess only because "
                       "__main__ there has no MyConfig.",
                       False)
    assert has_global(g, "__main__", "MyConfig") and has_global(g, "argparse", "Namespace"), g

    # referenced_global.pt: a global that is named but never called (a function stored as a value).
    torch.manual_seed(11)
    obj = {"w": torch.randn(2, 2), "activation": torch.nn.functional.gelu}
    torch.save(obj, w.path("referenced_global.pt"))
    loaded = torch.load(w.path("referenced_global.pt"))
    assert loaded["activation"] is torch.nn.functional.gelu
    g = record_hostile(w, "referenced_global.pt",
                       [("unknown-global", ["gelu"])],
                       "torch.save of {'w': tensor, 'activation': torch.nn.functional.gelu}: GLOBAL "
                       "'torch._C._nn gelu' is only named (stored as a value), never called by any "
                       "opcode: Python imports it, weights_only refuses it, nothing runs. Issue K: "
                       "unknown-global (warning), not dangerous.",
                       False)
    assert has_global(g, "torch._C._nn", "gelu"), g


def hand_pickle(w, name, data):
    with open(w.path(name), "wb") as f:
        f.write(data)


def short_unicode(s):
    b = s.encode()
    assert len(b) < 256
    return b"\x8c" + bytes([len(b)]) + b + b"\x94"  # SHORT_BINUNICODE + MEMOIZE


def framed(body):
    return b"\x80\x04" + b"\x95" + struct.pack("<Q", len(body)) + body


def fx_hand_written(w):
    # stack_global_dotted.pkl: STACK_GLOBAL('torch', 'serialization.os.system'). Protocol >= 4
    # unpicklers resolve dotted names attribute by attribute: torch.serialization.os.system = os.system.
    body = (short_unicode("torch") + short_unicode("serialization.os.system") + b"\x93\x94"
            + short_unicode(SENTINEL_SH) + b"\x85\x94" + b"R\x94" + b".")
    hand_pickle(w, "stack_global_dotted.pkl", framed(body))
    g = record_hostile(w, "stack_global_dotted.pkl",
                       [("dangerous-global", ["torch", "serialization.os.system"])],
                       "Hand-written protocol 4: STACK_GLOBAL with module 'torch' (looks safe) and dotted "
                       "name 'serialization.os.system'; Python's unpickler (proto >= 4) walks the dots to "
                       "os.system and REDUCE runs it. Dotted STACK_GLOBAL names are a bypass trick in "
                       "themselves (FORMATS.md).", True)
    assert has_global(g, "torch", "serialization.os.system", "STACK_GLOBAL"), g

    body = (short_unicode("builtins") + short_unicode("getattr.__self__.exec") + b"\x93\x94"
            + short_unicode(SENTINEL_EXEC) + b"\x85\x94" + b"R\x94" + b"0N.")
    hand_pickle(w, "stack_global_dotted_builtins.pkl", framed(body))
    g = record_hostile(w, "stack_global_dotted_builtins.pkl",
                       [("dangerous-global", ["getattr.__self__.exec"])],
                       "Hand-written protocol 4: STACK_GLOBAL('builtins', 'getattr.__self__.exec') — "
                       "getattr.__self__ is the builtins module, so this resolves to builtins.exec while no "
                       "(module, name) pair equals ('builtins', 'exec'). The REDUCE result is POPped and "
                       "the pickle returns None.", True)
    assert has_global(g, "builtins", "getattr.__self__.exec", "STACK_GLOBAL"), g

    # obj_hidden.pkl: protocol 1, MARK GLOBAL 'os system' BINUNICODE cmd OBJ POP EMPTY_DICT STOP.
    cmd = SENTINEL_SH.encode()
    data = b"(cos\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd + b"o0}."
    hand_pickle(w, "obj_hidden.pkl", data)
    g = record_hostile(w, "obj_hidden.pkl", [("dangerous-global", ["os", "system"])],
                       "Hand-written protocol 1: MARK, GLOBAL 'os system', BINUNICODE cmd, OBJ (calls "
                       "os.system(cmd): OBJ calls any non-class callable), POP, EMPTY_DICT, STOP. The "
                       "call has no REDUCE and its result is discarded: the pickle's value is {}.", True)
    assert has_global(g, "os", "system", "GLOBAL"), g

    # inst_hidden.pkl: protocol 0, MARK STRING cmd INST 'os system' POP MARK DICT STOP.
    data = b"(S'" + cmd + b"'\nios\nsystem\n0(d."
    hand_pickle(w, "inst_hidden.pkl", data)
    g = record_hostile(w, "inst_hidden.pkl", [("dangerous-global", ["os", "system"])],
                       "Hand-written protocol 0: MARK, STRING cmd, INST 'os system' (the global is the "
                       "INST opcode's own argument, no GLOBAL opcode; INST calls it), POP, MARK DICT, "
                       "STOP. Value {}.", True)
    assert has_global(g, "os", "system", "INST"), g


def fx_zip_name_mismatch(w):
    src = open(w.path("clean.pt"), "rb").read()
    with zipfile.ZipFile(w.path("clean.pt")) as z:
        info = z.getinfo("clean/data.pkl")
    off = info.header_offset
    assert src[off:off + 4] == b"PK\x03\x04"
    nlen = struct.unpack("<H", src[off + 26:off + 28])[0]
    name = src[off + 30:off + 30 + nlen]
    assert name == b"clean/data.pkl"
    fake = b"clean/data.pkx"
    data = src[:off + 30] + fake + src[off + 30 + nlen:]
    with open(w.path("zip_name_mismatch.pt"), "wb") as f:
        f.write(data)
    try:
        zipfile.ZipFile(w.path("zip_name_mismatch.pt")).read("clean/data.pkl")
        py_zip = "reads"
    except zipfile.BadZipFile:
        py_zip = "BadZipFile"
    try:
        check_state_dict_roundtrip(w.path("zip_name_mismatch.pt"), torch.load(w.path("clean.pt")))
        torch_ok = True
    except Exception:
        torch_ok = False
    assert torch_ok and py_zip == "BadZipFile", (torch_ok, py_zip)
    record_hostile(w, "zip_name_mismatch.pt", [("zip-name-mismatch", ["data.pkl"])],
                       "clean.pt with the LOCAL header name of clean/data.pkl changed to clean/data.pkx "
                       "(same length); the central directory still says clean/data.pkl. Content is "
                       "clean, nothing executes; the mismatch itself is the finding, a warning (FORMATS.md "
                       "bypass trick; issue 27: torch loads the file, so it is no dangerous global). "
                       "Python's zipfile refuses the entry (python_zipfile), torch's reader goes by the "
                       "central directory (torch_loads).",
                       False)
    w.expected["zip_name_mismatch.pt"]["python_zipfile"] = py_zip
    w.expected["zip_name_mismatch.pt"]["torch_loads"] = torch_ok
    w.expected["zip_name_mismatch.pt"]["local_name"] = fake.decode()
    w.expected["zip_name_mismatch.pt"]["central_name"] = name.decode()


def fx_device_saved(w):
    """torch.save(model.cuda().state_dict()) without a GPU: torch.save writes the location that
    torch.serialization.location_tag gives each storage; it is made to say "cuda:0", as on a GPU
    machine. The truth is torch.load's own: without map_location it refuses on this CPU-only machine,
    with map_location="cpu" it returns the state dict."""
    sd = small_state_dict()
    real = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(sd, w.path("cuda_saved.pt"))
    finally:
        torch.serialization.location_tag = real
    assert not torch.cuda.is_available()
    try:
        torch.load(w.path("cuda_saved.pt"))
        error = None
    except RuntimeError as e:
        error = str(e).splitlines()[0]
    assert error and "Attempting to deserialize object on a CUDA device" in error, error
    loaded = torch.load(w.path("cuda_saved.pt"), map_location="cpu")
    ok = list(loaded) == list(sd) and all(torch.equal(loaded[k], v) for k, v in sd.items())
    assert ok
    w.record("cuda_saved.pt", [("device-storages", ["fc.weight", "cuda:0"])],
             "small_state_dict() saved with every storage located on cuda:0 (as torch.save writes it from a "
             "GPU): torch.load without map_location fails on a machine without CUDA (torch_load_error), "
             "with map_location='cpu' it loads (torch_loads).",
             keys=list(sd.keys()), torch_load_error=error, torch_loads=ok)


# ---------------------------------------------------------------------------------------------

def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        # TorchScript writes a module's Final constants in set order (in_features / out_features):
        # fix str hashing so that the scripted archives are byte-identical from run to run.
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(here, "check"))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    w = Writer(args.outdir)
    fx_clean(w)
    fx_compiled(w)
    fx_ddp(w)
    fx_fabric(w)
    fx_activation_checkpoint(w)
    fx_fsdp(w)
    fx_lightning(w)
    fx_meta(w)
    fx_lazy(w)
    fx_scripted(w)
    fx_evil_pickles(w)
    fx_hand_written(w)
    fx_zip_name_mismatch(w)
    fx_device_saved(w)
    with open(os.path.join(args.outdir, "expected.json"), "w") as f:
        json.dump(w.expected, f, indent=1)
        f.write("\n")
    print("wrote %d fixtures + expected.json to %s" % (len(w.expected), args.outdir))


if __name__ == "__main__":
    main()
