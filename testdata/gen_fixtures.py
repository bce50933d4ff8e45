#!/usr/bin/python3
"""Write small PyTorch checkpoints and the numbers PyTorch reports about them.

Under Debian's Python, which has torch 1.13, it writes testdata/t113; under torch 2.x (Debian 13's
python3-torch 2.6, in the trixie chroot: testdata/README.md) testdata/t26, a set of its own (section
"torch 2.x fixtures" below):

    /usr/bin/python3 testdata/gen_fixtures.py [OUTDIR]      # OUTDIR defaults to testdata/t113 (t26)

Every fixture <name>.<ext> gets <name>.expected.json beside it (format: testdata/EXPECTED.md).
All numbers come from PyTorch: tensor facts from torch.load of the written file, parameter /
buffer / trainable splits from the live model, and each fixture is loaded back and checked
against the live objects before its json is written. Nothing here is typed in by hand.

Everything is seeded, and the script re-executes itself with PYTHONHASHSEED=0 (TorchScript code/
lists Final constants in set order), so re-running gives identical expected json. Zip fixtures are
byte-identical too (the TorchScript ones as long as this file keeps its path and the classes their
lines: their .debug_pkl records hold both); the legacy (pre-1.6) fixtures are not, because torch
1.13 names legacy storages by their C pointer (str(storage._cdata)).
"""

import argparse
import collections
import copy
import io
import json
import os
import pickle
import pickletools
import sys
import warnings
import zipfile

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # lazy-module, ComplexHalf "experimental" and TypedStorage chatter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)   # genlib (also when imported by another generator); fx2_dcp imports gen_formats
# The torch version picks the fixture set (genlib's T2, SET): 1.13 writes testdata/t113, 2.x the torch 2
# set, into t<major><minor> (2.6: testdata/t26, 2.14: testdata/t214, 2.15: testdata/t215).
from genlib import SET, T2, dtype_name, is_uninit, storage_bytes  # noqa: E402
BUFFER_NAMES = ("running_mean", "running_var", "num_batches_tracked", "position_ids", "token_type_ids",
                "inv_freq", "masked_bias", "_float_tensor", "causal_mask", "attention_mask")
SUB_BYTE_BITS = {torch.quint4x2: 4, torch.quint2x4: 2}
MAX_FIXTURE = 100 * 1024


# ---------------------------------------------------------------------------------------------
# Models of the torch 1.13 fixtures (module-level classes so that torch.save(model) pickles them as
# __main__.<Class>)
# ---------------------------------------------------------------------------------------------

class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SmallNet(nn.Module):
    """Nested: custom block (Conv2d + BatchNorm2d) and a Sequential of Linears."""

    def __init__(self):
        super().__init__()
        self.features = ConvBlock()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.classifier = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


class TinyLM(nn.Module):
    """Embedding and lm_head share one weight."""

    def __init__(self, vocab=11, dim=6, device=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, device=device)
        self.norm = nn.LayerNorm(dim, device=device)
        self.proj = nn.Linear(dim, dim, device=device)
        self.bn = nn.BatchNorm1d(dim, device=device)
        self.lm_head = nn.Linear(dim, vocab, bias=False, device=device)
        self.lm_head.weight = self.embed.weight


class LazyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.LazyConv2d(4, kernel_size=3)
        self.stem_bn = nn.BatchNorm2d(4)
        self.lazy_bn = nn.LazyBatchNorm2d()
        self.fc = nn.Linear(5, 3)
        self.head = nn.LazyLinear(2)


class FrozenNet(nn.Module):
    """Pickled whole: a frozen submodule, a BatchNorm, a submodule in eval mode."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 2, kernel_size=3), nn.BatchNorm2d(2), nn.ReLU())
        self.frozen = nn.Linear(8, 8)
        self.head = nn.Sequential(nn.Linear(8, 4), nn.Dropout(0.1), nn.Linear(4, 2))
        self.frozen.requires_grad_(False)
        self.head.eval()

    def forward(self, x):
        return self.head(self.frozen(self.backbone(x).flatten(1)))


class LitModel(nn.Module):
    """Stands in for a LightningModule: the network is its attribute `model`."""

    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.model(x)


# ---------------------------------------------------------------------------------------------
# Facts about a loaded object (dtype_name, is_uninit and storage_bytes are genlib's; gen_formats.py
# uses gf.dtype_name)
# ---------------------------------------------------------------------------------------------

def tensor_nbytes(t):
    """numel * element_size, except sub-byte quantized dtypes (element_size says 1)."""
    if t.dtype in SUB_BYTE_BITS:
        return (t.numel() * SUB_BYTE_BITS[t.dtype] + 7) // 8
    return t.numel() * t.element_size()


def storages_of(t):
    """(identity, nbytes) of every storage the file holds for tensor t."""
    if is_uninit(t) or t.device.type == "meta":
        return []
    if t.is_sparse:
        return storages_of(t._indices()) + storages_of(t._values())
    out = [(("storage", t.storage()._cdata), t.storage().nbytes())]
    if t.is_quantized and t.qscheme() in (torch.per_channel_affine, torch.per_channel_affine_float_qparams):
        # _rebuild_qtensor's qparams carry the scales / zero_points as their own storages; after
        # loading, q_per_channel_* returns fresh copies, so identify them by the qtensor
        s, z = t.q_per_channel_scales(), t.q_per_channel_zero_points()
        out.append((("scales", t.storage()._cdata), s.numel() * s.element_size()))
        out.append((("zero_points", t.storage()._cdata), z.numel() * z.element_size()))
    return out


def unique_key(t):
    if t.device.type == "meta" or t.is_sparse:
        return ("object", id(t))
    return (t.storage()._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def entry(name, t, kind):
    e = collections.OrderedDict(name=name)
    if is_uninit(t):
        # The file holds only REDUCE(UninitializedParameter|UninitializedBuffer, (requires_grad,)):
        # no dtype, shape or device. (torch.load gives it the default dtype, float32.)
        e.update(dtype=None, shape=None, stride=None, numel=None, bytes=None, kind=kind,
                 state="uninitialized", requires_grad=bool(t.requires_grad), device=None, offset=None)
        return e
    state = "meta" if t.device.type == "meta" else "materialized"
    if t.is_sparse:
        ind, val = t._indices(), t._values()
        e.update(dtype=dtype_name(t.dtype), shape=list(t.shape), stride=None, numel=t.numel(),
                 bytes=tensor_nbytes(ind) + tensor_nbytes(val), kind=kind, state=state,
                 requires_grad=bool(t.requires_grad), device=str(t.device), offset=None,
                 layout="sparse_coo",
                 sparse=collections.OrderedDict(
                     nnz=t._nnz(), sparse_dim=t.sparse_dim(), dense_dim=t.dense_dim(),
                     indices_dtype=dtype_name(ind.dtype), indices_shape=list(ind.shape),
                     values_dtype=dtype_name(val.dtype), values_shape=list(val.shape)))
        return e
    e.update(dtype=dtype_name(t.dtype), shape=list(t.shape), stride=list(t.stride()), numel=t.numel(),
             bytes=tensor_nbytes(t), kind=kind, state=state, requires_grad=bool(t.requires_grad),
             device=str(t.device), offset=t.storage_offset())
    if t.is_quantized:
        qs = t.qscheme()
        e["qscheme"] = str(qs).replace("torch.", "")
        if qs == torch.per_tensor_affine:
            e["scale"] = t.q_scale()
            e["zero_point"] = t.q_zero_point()
        else:
            e["axis"] = t.q_per_channel_axis()
            e["scales"] = t.q_per_channel_scales().tolist()
            e["zero_points"] = t.q_per_channel_zero_points().tolist()
    return e


def numel_known(t):
    return 0 if is_uninit(t) else t.numel()


def model_counts(model):
    params = list(model.parameters())
    return collections.OrderedDict(
        parameters=sum(numel_known(p) for p in params),
        trainable=sum(numel_known(p) for p in params if p.requires_grad),
        buffers=sum(numel_known(b) for b in model.buffers()),
    )


def module_list(model, all_modules=False):
    """named_modules(), root as "", recursive counts. Without all_modules: modules that hold tensors
    (uninitialized ones included); with it: every module plus type and training (type = original_name
    for TorchScript modules, the class name otherwise)."""
    out = []
    for name, m in model.named_modules():
        p = sum(numel_known(x) for x in m.parameters())
        b = sum(numel_known(x) for x in m.buffers())
        n_tensors = len(list(m.parameters())) + len(list(m.buffers()))
        if not all_modules and n_tensors == 0:
            continue
        d = collections.OrderedDict(name=name, parameters=p, buffers=b)
        if all_modules:
            d["type"] = getattr(m, "original_name", type(m).__name__)
            d["training"] = bool(m.training)
        out.append(d)
    return out


def summarize(items, counts=None):
    """items: [(name, loaded tensor, kind)] in file order -> (tensors list, totals).

    counts: parameters / trainable / buffers from the live model; without a model (a plain dict
    of tensors) they are the unique elements of each kind, kind coming from well-known names.
    """
    if counts is None and plain_tensors([n for n, _, _ in items]):
        items = [(n, t, "attribute") for n, t, _ in items]  # no model: neither parameters nor buffers
    tensors = [entry(n, t, k) for n, t, k in items]
    seen, storages = set(), {}
    elements = unique_elements = nbytes = 0
    by_kind = {"parameter": 0, "buffer": 0, "attribute": 0}
    for (n, t, k), e in zip(items, tensors):
        if e["state"] == "uninitialized":
            continue
        elements += e["numel"]
        for key, sz in storages_of(t):
            storages[key] = sz
        u = unique_key(t)
        if u in seen:
            continue
        seen.add(u)
        unique_elements += e["numel"]
        nbytes += e["bytes"]
        by_kind[k] += e["numel"]
    if counts is None:
        counts = collections.OrderedDict(parameters=by_kind["parameter"], trainable=by_kind["parameter"],
                                         buffers=by_kind["buffer"])
    totals = collections.OrderedDict(
        tensors=len(tensors),
        elements=elements,
        unique_elements=unique_elements,
        storage_bytes=sum(storages.values()),
        bytes=nbytes,
        parameters=counts["parameters"],
        trainable=counts["trainable"],
        non_trainable=counts["parameters"] - counts["trainable"],
        buffers=counts["buffers"],
        uninitialized=sum(1 for e in tensors if e["state"] == "uninitialized"),
        meta=sum(1 for e in tensors if e["state"] == "meta"),
    )
    if by_kind["attribute"]:
        totals["attributes"] = by_kind["attribute"]
    return tensors, totals


def plain_tensors(names):
    """ckpt's rule for a file of plain tensors that is no model's (a saved example input): no name has a
    dot and none is a module's leaf (weight*, bias*, running_mean, running_var, num_batches_tracked)."""
    return bool(names) and all("." not in n and not n.startswith(("weight", "bias"))
                               and n not in ("running_mean", "running_var", "num_batches_tracked") for n in names)


def kind_by_name(name, t=None):
    """ckpt's documented inference for entries no model explains: a well-known buffer name, or an
    integer / bool dtype (such tensors cannot be trainable parameters), makes a buffer."""
    if name.rsplit(".", 1)[-1] in BUFFER_NAMES:
        return "buffer"
    if isinstance(t, torch.Tensor) and not t.is_quantized and not t.is_sparse \
            and not t.is_floating_point() and not t.is_complex():
        return "buffer"
    return "parameter"


def kinds_from_model(model):
    """State-dict name -> parameter | buffer, tied names included (named_parameters() drops them)."""
    kinds = {}
    for mname, m in model.named_modules(remove_duplicate=False):
        pre = mname + "." if mname else ""
        kinds.update((pre + n, "parameter") for n, p in m._parameters.items() if p is not None)
        kinds.update((pre + n, "buffer") for n, b in m._buffers.items() if b is not None)
    return kinds


def walk_tensors(obj, out, seen_ids=None):
    """Every tensor reachable through dicts / lists / tuples / Namespaces."""
    if seen_ids is None:
        seen_ids = set()
    if id(obj) in seen_ids:
        return out
    if isinstance(obj, torch.Tensor):
        seen_ids.add(id(obj))
        out.append(obj)
    elif isinstance(obj, dict):
        seen_ids.add(id(obj))
        for v in obj.values():
            walk_tensors(v, out, seen_ids)
    elif isinstance(obj, (list, tuple)):
        seen_ids.add(id(obj))
        for v in obj:
            walk_tensors(v, out, seen_ids)
    elif isinstance(obj, argparse.Namespace):
        walk_tensors(vars(obj), out, seen_ids)
    elif isinstance(obj, nn.Module):
        walk_tensors(obj.state_dict(keep_vars=True), out, seen_ids)
    return out


def storage_bytes_of(tensors):
    st = {}
    for t in tensors:
        for key, sz in storages_of(t):
            st[key] = sz
    return sum(st.values()), len(st)


# ---------------------------------------------------------------------------------------------
# Facts about the file
# ---------------------------------------------------------------------------------------------

def pickle_globals(data, start=0):
    """'module.name' of every GLOBAL / STACK_GLOBAL, first occurrence order, via pickletools."""
    found = []
    recent, memo = [], {}
    for op, arg, _pos in pickletools.genops(io.BytesIO(data[start:])):
        name = op.name
        if name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            recent.append(arg)
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            recent.append(memo.get(arg))
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = recent[-1] if recent else None
        elif name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        elif name == "GLOBAL":
            g = arg.replace(" ", ".")
            if g not in found:
                found.append(g)
            recent.append(None)
        elif name == "STACK_GLOBAL":
            g = "%s.%s" % (recent[-2], recent[-1])
            if g not in found:
                found.append(g)
            recent.append(None)
        elif name in ("FRAME", "PROTO", "STOP"):
            pass
        else:
            recent.append(None)
    return found


def pickle_end(data, start):
    for op, _arg, pos in pickletools.genops(io.BytesIO(data[start:])):
        if op.name == "STOP":
            return start + pos + 1
    raise ValueError("no STOP")


def is_torchscript_member(rel):
    """A TorchScript archive's code, constants, pickles and debug records: not 'records'."""
    return (rel.endswith(".pkl") or rel.startswith("code/") or rel.startswith("constants/")
            or rel.startswith("extra/") or rel.startswith("traced_inputs/") or rel.endswith(".debug_pkl"))


def zip_facts(path, torchscript=False):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/", 1)[0]
        assert all(n.startswith(prefix + "/") for n in names), names
        records = collections.OrderedDict()
        storages = 0
        data_bytes = 0
        for info in z.infolist():
            rel = info.filename[len(prefix) + 1:]
            ts_member = torchscript and is_torchscript_member(rel)
            assert info.compress_type == zipfile.ZIP_STORED or ts_member   # TorchScript deflates long code/
            if rel.startswith("data/"):
                storages += 1
                data_bytes += info.file_size
            elif rel != "data.pkl" and not ts_member:
                records[rel] = z.read(info).decode().strip()
        globs = pickle_globals(z.read(prefix + "/data.pkl"))
    return prefix, records, collections.OrderedDict(storages=storages, storage_bytes=data_bytes), globs


def zip_entries(path):
    """Every member of a zip, without the prefix, in the order the zip lists them."""
    with zipfile.ZipFile(path) as z:
        return [n.split("/", 1)[1] for n in z.namelist()]


def legacy_facts(path):
    data = open(path, "rb").read()
    pos, globs = 0, []
    for _ in range(5):  # magic, protocol version, sys_info, object, storage keys
        for g in pickle_globals(data[pos:pickle_end(data, pos)]):
            if g not in globs:
                globs.append(g)
        keys_start = pos
        pos = pickle_end(data, pos)
    keys = pickle.loads(data[keys_start:pos])
    # Per key: int64 LE element count, then the raw bytes. Sum without knowing element sizes:
    # the bytes left after the key list are 8 per key plus the storages.
    storage_bytes = len(data) - pos - 8 * len(keys)
    return collections.OrderedDict(storages=len(keys), storage_bytes=storage_bytes), globs


def load(path):
    return torch.load(path, map_location="cpu") if not path.endswith(".pkl") else None


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

class Writer:
    def __init__(self, outdir):
        self.outdir = outdir
        self.written = []

    def path(self, name):
        return os.path.join(self.outdir, name)

    def save(self, name, obj, **kw):
        p = self.path(name)
        torch.save(obj, p, **kw)
        return p

    def emit(self, name, fmt, tensors=None, totals=None, modules=None, metadata=None, notes=None,
             extra=None, model_storage_bytes_is_file=True, file_storage_bytes=None):
        p = self.path(name)
        doc = collections.OrderedDict(fixture=name, torch_version=torch.__version__, format=fmt)
        if fmt in ("torch-zip", "lightning", "torchscript"):
            prefix, records, file_info, globs = zip_facts(p, torchscript=fmt == "torchscript")
            doc["prefix"] = prefix
            doc["records"] = records
        elif fmt == "torch-legacy":
            file_info, globs = legacy_facts(p)
        else:
            data = open(p, "rb").read()
            file_info = collections.OrderedDict(storages=0, storage_bytes=0)
            globs = pickle_globals(data)
        if totals is None:
            totals = collections.OrderedDict((k, 0) for k in (
                "tensors", "elements", "unique_elements", "storage_bytes", "bytes", "parameters",
                "trainable", "non_trainable", "buffers", "uninitialized", "meta"))
            tensors = []
        doc["totals"] = totals
        doc["tensors"] = tensors
        if modules is not None:
            doc["modules"] = modules
        if metadata is not None:
            doc["metadata"] = metadata
        if extra:
            doc.update(extra)
        # Everything stored in the file (model or not), and the pickle imports in file order.
        doc["file"] = file_info
        doc["globals"] = globs
        if notes:
            doc["notes"] = notes
        if totals.get("attributes") and not totals["parameters"] and not totals["buffers"]:
            doc["content"] = "tensors"  # plain tensors, no model's (summarize: plain_tensors)
        # Cross-check: storage bytes PyTorch reports for the loaded objects == what the file holds.
        if model_storage_bytes_is_file:
            assert file_info["storage_bytes"] == totals["storage_bytes"], (name, file_info, totals)
        if file_storage_bytes is not None:
            assert file_info["storage_bytes"] == file_storage_bytes, (name, file_info, file_storage_bytes)
        jp = self.path(os.path.splitext(name)[0] + ".expected.json")
        with open(jp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        self.written.append((name, os.path.getsize(p)))


def check_same(live, loaded):
    """A live tensor and its loaded copy agree in everything torch stores (types may differ: a
    TorchScript module loaded back hands out plain Tensors for parameters). Values are compared as
    storage bytes: torch.equal has no float8 / bits kernels, and this covers NaN too."""
    if is_uninit(live):
        assert is_uninit(loaded) and type(live) is type(loaded)
        assert live.requires_grad == loaded.requires_grad
        return
    assert live.dtype == loaded.dtype and live.shape == loaded.shape, (live.dtype, loaded.dtype)
    assert live.device.type == loaded.device.type
    assert live.requires_grad == loaded.requires_grad, (live.requires_grad, loaded.requires_grad)
    if live.device.type == "meta":
        assert live.stride() == loaded.stride()
        return
    if live.is_sparse:
        assert torch.equal(live.to_dense(), loaded.to_dense())
        return
    assert live.stride() == loaded.stride() and live.storage_offset() == loaded.storage_offset()
    if live.is_quantized:
        assert torch.equal(live.int_repr(), loaded.int_repr()) and live.qscheme() == loaded.qscheme()
        if live.qscheme() == torch.per_tensor_affine:
            assert live.q_scale() == loaded.q_scale() and live.q_zero_point() == loaded.q_zero_point()
        else:
            assert torch.equal(live.q_per_channel_scales(), loaded.q_per_channel_scales())
        return
    assert storage_bytes(live) == storage_bytes(loaded)


def check_dict(live, loaded):
    assert list(live.keys()) == list(loaded.keys())
    for k in live:
        check_same(live[k], loaded[k])
    # the same sharing: entries share a storage in the file iff they did live
    lk, dk = list(live.keys()), list(loaded.keys())
    for i in range(len(lk)):
        for j in range(i + 1, len(lk)):
            a, b = live[lk[i]], live[lk[j]]
            c, d = loaded[dk[i]], loaded[dk[j]]
            if is_uninit(a) or a.is_sparse or is_uninit(b) or b.is_sparse:
                continue
            if a.device.type == "meta" or b.device.type == "meta":
                assert (a is b) == (c is d)
            else:
                assert (a.storage().data_ptr() == b.storage().data_ptr()) == \
                    (c.storage()._cdata == d.storage()._cdata), (lk[i], lk[j])


def state_dict_fixture(w, name, model, sd=None, fmt="torch-zip", notes=None, save_kw=None, modules=True):
    """Save a model's state dict and emit its json; kinds and counts from the live model."""
    sd = model.state_dict() if sd is None else sd
    w.save(name, sd, **(save_kw or {}))
    loaded = torch.load(w.path(name), map_location="cpu")
    assert type(loaded) is type(sd)
    check_dict(sd, loaded)
    kinds = kinds_from_model(model)
    items = [(k, v, kinds[k]) for k, v in loaded.items()]
    counts = model_counts(model)
    tensors, totals = summarize(items, counts)
    # a state dict without non-persistent buffers holds the whole model: the split adds up
    assert totals["parameters"] + totals["buffers"] == totals["unique_elements"], (name, totals)
    w.emit(name, fmt, tensors, totals, module_list(model) if modules else None, notes=notes)
    return loaded


def plain(v):
    """Lightning's hyper_parameters as JSON: a Namespace as a dict that names its class, tuples as lists."""
    if isinstance(v, argparse.Namespace):
        d = collections.OrderedDict([("__class__", "argparse.Namespace")])
        d.update((k, plain(x)) for k, x in vars(v).items())
        return d
    if isinstance(v, dict):
        return collections.OrderedDict((k, plain(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------
# torch 1.13 fixtures (testdata/t113)
# ---------------------------------------------------------------------------------------------

def trained_small_net():
    torch.manual_seed(0)
    net = SmallNet()
    net(torch.randn(2, 3, 6, 6))  # one train-mode forward: BN running stats move, batches = 1
    return net


def fx_plain(w):
    net = trained_small_net()
    state_dict_fixture(
        w, "plain_state_dict.pt", net,
        notes="OrderedDict state dict of a nested module (custom block with Conv2d + BatchNorm2d, "
              "Sequential of Linears); ends with BUILD({'_metadata': ...}). Buffers are the "
              "well-known BatchNorm names.")


def fx_protocols(w):
    net = trained_small_net()
    for proto in (2, 4, 5):
        state_dict_fixture(
            w, "protocol_%d.pt" % proto, net, save_kw={"pickle_protocol": proto},
            notes="plain_state_dict's model saved with torch.save(pickle_protocol=%d); still a zip." % proto)


def fx_legacy(w):
    net = trained_small_net()
    state_dict_fixture(
        w, "legacy_state_dict.pt", net, fmt="torch-legacy",
        save_kw={"_use_new_zipfile_serialization": False},
        notes="plain_state_dict's model in the pre-1.6 stream (_use_new_zipfile_serialization=False). "
              "Storage keys are str(storage._cdata) (pointers), so file bytes differ per run.")
    torch.manual_seed(0)
    lm = TinyLM()
    sd = lm.state_dict()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    views = collections.OrderedDict(sd)
    views["x"] = x
    views["x_rows"] = x[1:]
    views["x_t"] = x.t()
    views["x_scalar"] = x[2, 1]
    live = views
    w.save("legacy_views.pt", live, _use_new_zipfile_serialization=False)
    loaded = torch.load(w.path("legacy_views.pt"))
    check_dict(live, loaded)
    kinds = kinds_from_model(lm)
    items = [(k, v, kinds.get(k) or kind_by_name(k, v)) for k, v in loaded.items()]
    tensors, totals = summarize(items, None)
    counts = model_counts(lm)
    # x and its views are extra "parameters" beside the model (no model owns them)
    assert totals["buffers"] == counts["buffers"]
    w.emit("legacy_views.pt", "torch-legacy", tensors, totals,
           notes="Legacy stream: TinyLM state dict (embed.weight and lm_head.weight tied: one storage, "
                 "same offset/shape/stride) plus x (3x4 float) and views of x: x[1:], x.t(), x[2,1] "
                 "(0-dim, offset 9). No model owns x: parameters = unique non-buffer elements. "
                 "In 1.13 legacy view_metadata is always None; views share the storage key.")


def fx_tied(w):
    torch.manual_seed(0)
    lm = TinyLM()
    lm.train()
    lm.bn(torch.randn(4, 6))
    state_dict_fixture(
        w, "tied_weights.pt", lm,
        notes="embed.weight and lm_head.weight are one Parameter: two state-dict entries on one "
              "storage with equal offset/shape/stride (counted once in unique_elements, parameters).")


def fx_views(w):
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    live = {
        "x": x,
        "rows": x[1:],            # offset 5
        "t": x.t(),               # stride [1, 5]
        "row0": x[0],             # 1-d view, offset 0
        "scalar_view": x[2, 3],   # 0-dim view, offset 13
        "every_other_col": x[:, ::2],  # non-contiguous, stride [5, 2]
        "col_block": x[1:3, 2:4],      # non-contiguous, offset 7
        "zero_dim": torch.tensor(3.5),  # 0-dim with its own storage
        "zero_dim_long": torch.tensor(7, dtype=torch.int64),
        "x_again": x,             # the same tensor object twice (pickle memo)
    }
    w.save("views.pt", live)
    loaded = torch.load(w.path("views.pt"))
    assert type(loaded) is dict
    check_dict(live, loaded)
    items = [(k, v, kind_by_name(k, v)) for k, v in loaded.items()]
    tensors, totals = summarize(items, None)
    w.emit("views.pt", "torch-zip", tensors, totals,
           notes="A plain dict (not OrderedDict: no REDUCE / BUILD _metadata) of one 4x5 float tensor x "
                 "and views into its storage (slices, transpose, 0-dim element, strided), plus two "
                 "independent 0-dim tensors. 'x_again' is the same object as 'x' (BINGET in the pickle). "
                 "No model: every entry is a 'parameter'; parameters = unique elements.")


def fx_plain_dict(w):
    torch.manual_seed(0)
    live = {"weight": torch.randn(3, 2), "bias": torch.randn(3)}
    w.save("plain_dict.pt", live)
    loaded = torch.load(w.path("plain_dict.pt"))
    assert type(loaded) is dict
    check_dict(live, loaded)
    tensors, totals = summarize([(k, v, kind_by_name(k, v)) for k, v in loaded.items()], None)
    w.emit("plain_dict.pt", "torch-zip", tensors, totals,
           notes="A plain dict of two tensors (EMPTY_DICT + SETITEMS, no _metadata).")


def fx_dtypes(w):
    torch.manual_seed(0)
    base = torch.randn(2, 3)
    live = collections.OrderedDict()
    live["f64"] = base.double()
    live["f32"] = base.clone()
    live["f16"] = base.half()
    live["bf16"] = base.bfloat16()
    live["i64"] = (base * 100).long()
    live["i32"] = (base * 100).int()
    live["i16"] = (base * 100).short()
    live["i8"] = (base * 10).char()
    live["u8"] = (base * 10).abs().byte()
    live["b"] = base > 0
    live["c128"] = torch.complex(base.double(), -base.double())
    live["c64"] = torch.complex(base, base * 2)
    w.save("dtypes.pt", live)
    loaded = torch.load(w.path("dtypes.pt"))
    check_dict(live, loaded)
    tensors, totals = summarize([(k, v, kind_by_name(k, v)) for k, v in loaded.items()], None)
    # complex32 cannot be saved by torch 1.13: record the error text PyTorch gives
    try:
        torch.save({"c32": torch.zeros(2, dtype=torch.complex32)}, io.BytesIO())
        c32 = "saved"
    except Exception as ex:  # KeyError('dtype torch.complex32 is not recognized')
        c32 = "%s: %s" % (type(ex).__name__, ex)
    w.emit("dtypes.pt", "torch-zip", tensors, totals,
           notes="One 2x3 tensor per dtype torch 1.13 can save densely (OrderedDict). complex32 is "
                 "absent because torch 1.13 refuses to save it: " + c32 + ". No model: all 'parameter'.",
           extra={"unsaveable": {"complex32": c32}})


def fx_quantized(w):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    live = collections.OrderedDict()
    live["q_int8"] = torch.quantize_per_tensor(x, 0.05, 3, torch.qint8)
    live["q_uint8"] = torch.quantize_per_tensor(x, 0.1, 128, torch.quint8)
    live["q_int32"] = torch.quantize_per_tensor(x, 0.001, -2, torch.qint32)
    live["q_uint4x2"] = torch.quantize_per_tensor(x.flatten()[:5].abs(), 0.25, 1, torch.quint4x2)
    live["q_uint2x4"] = torch.quantize_per_tensor(x.flatten().abs(), 0.5, 0, torch.quint2x4)
    live["q_per_channel"] = torch.quantize_per_channel(
        x, torch.tensor([0.1, 0.2], dtype=torch.float64), torch.tensor([5, 10]), 0, torch.quint8)
    w.save("quantized.pt", live)
    loaded = torch.load(w.path("quantized.pt"))
    check_dict(live, loaded)
    for k in ("q_uint4x2", "q_uint2x4"):
        t = loaded[k]
        assert t.storage_offset() == 0 and tensor_nbytes(t) == t.storage().nbytes(), k
    tensors, totals = summarize([(k, v, kind_by_name(k, v)) for k, v in loaded.items()], None)
    w.emit("quantized.pt", "torch-zip", tensors, totals,
           notes="Quantized tensors via torch._utils._rebuild_qtensor. Storage classes QInt8/QUInt8/"
                 "QInt32/QUInt4x2/QUInt2x4Storage. Sub-byte dtypes: storage numel in the persistent id is "
                 "the byte count (quint4x2: ceil(numel/2), quint2x4: ceil(numel/4)); element_size() says 1, "
                 "'bytes' here is the packed size. Per-channel qparams hold scales (float64) and "
                 "zero_points (int64) as separate _rebuild_tensor_v2 tensors with their own storages: they "
                 "are in storage_bytes but not tensor entries.")


def fx_sparse(w):
    torch.manual_seed(0)
    i = torch.tensor([[0, 1, 2, 2], [3, 0, 1, 4]])
    v = torch.randn(4)
    live = collections.OrderedDict()
    live["dense"] = torch.randn(2, 2)
    live["sparse"] = torch.sparse_coo_tensor(i, v, (3, 5))
    live["sparse_hybrid"] = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.randn(2, 3), (4, 3))
    w.save("sparse.pt", live)
    loaded = torch.load(w.path("sparse.pt"))
    check_dict(live, loaded)
    tensors, totals = summarize([(k, v, kind_by_name(k, v)) for k, v in loaded.items()], None)
    w.emit("sparse.pt", "torch-zip", tensors, totals,
           notes="Sparse COO entries: numel is the dense numel, bytes = indices + values bytes, dtype is "
                 "the values dtype, stride/offset null. Pickled as _rebuild_sparse_tensor(_get_layout("
                 "'torch.sparse_coo'), (indices, values, torch.Size)). 'sparse_hybrid' has dense_dim 1.")


def fx_lazy(w):
    torch.manual_seed(0)
    net = LazyNet()
    sd = net.state_dict()
    state_dict_fixture(
        w, "lazy_uninitialized.pt", net, sd,
        notes="Lazy modules before the first forward: LazyConv2d / LazyLinear weights and biases are "
              "REDUCE(torch.nn.parameter.UninitializedParameter, (True,)); LazyBatchNorm2d's running "
              "stats are REDUCE(UninitializedBuffer, (False,)) and its num_batches_tracked a real 0-dim "
              "int64. The file carries no dtype/shape/device for them (null here). Beside them a real "
              "BatchNorm2d and Linear.")


def fx_meta(w):
    torch.manual_seed(0)
    lm = TinyLM(device="meta")
    sd = lm.state_dict()
    # state_dict() detaches each entry separately; make the tie visible in the file as one object
    sd["lm_head.weight"] = sd["embed.weight"]
    state_dict_fixture(
        w, "meta_state_dict.pt", lm, sd,
        notes="TinyLM built with device='meta' and saved via state_dict(): every entry is "
              "_rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad), no data/ records. "
              "lm_head.weight is the same tensor object as embed.weight (a BINGET), as tied weights "
              "are in the model; meta tensors are unique by object identity.")


def fx_module(w):
    torch.manual_seed(0)
    net = FrozenNet()
    net.backbone.train()
    net(torch.randn(3, 1, 4, 4))  # BN stats move; head stays in eval mode
    w.save("whole_module.pt", net)
    loaded = torch.load(w.path("whole_module.pt"))
    assert type(loaded).__name__ == "FrozenNet"
    live_sd, sd = net.state_dict(keep_vars=True), loaded.state_dict(keep_vars=True)
    check_dict(live_sd, sd)
    for (n1, p1), (n2, p2) in zip(net.named_parameters(), loaded.named_parameters()):
        assert n1 == n2 and p1.requires_grad == p2.requires_grad and type(p2) is nn.Parameter
    for (n1, m1), (n2, m2) in zip(net.named_modules(), loaded.named_modules()):
        assert n1 == n2 and m1.training == m2.training and type(m1) is type(m2)
    kinds = kinds_from_model(loaded)
    tensors, totals = summarize([(k, v, kinds[k]) for k, v in sd.items()], model_counts(net))
    assert totals["non_trainable"] == net.frozen.weight.numel() + net.frozen.bias.numel()
    w.emit("whole_module.pt", "torch-zip", tensors, totals, module_list(net, all_modules=True),
           notes="torch.save(model): modules pickle as GLOBAL __main__.FrozenNet / torch.nn.modules.* + "
                 "NEWOBJ + BUILD(__dict__). Parameters are torch._utils._rebuild_parameter(tensor, "
                 "requires_grad, OrderedDict()); 'frozen' has requires_grad False. 'head' (and its "
                 "children) is in eval mode (training False). Tensor entries are listed in "
                 "state_dict(keep_vars=True) order, which is also the pickle order. 'modules' lists every "
                 "named_modules() entry (root is '') with type and training.")


def walk_count(obj):
    ts = walk_tensors(obj, [])
    return len(ts), sum(t.numel() * t.element_size() for t in ts)


def fx_training_ckpt(w):
    net = trained_small_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        net(torch.randn(2, 3, 6, 6)).sum().backward()
        opt.step()
    sd = net.state_dict()
    live = {"model": sd, "optimizer": opt.state_dict(), "epoch": 5}
    w.save("training_checkpoint.pt", live)
    loaded = torch.load(w.path("training_checkpoint.pt"))
    check_dict(sd, loaded["model"])
    assert loaded["epoch"] == 5
    kinds = kinds_from_model(net)
    tensors, totals = summarize([(k, v, kinds[k]) for k, v in loaded["model"].items()], model_counts(net))
    assert totals["parameters"] + totals["buffers"] == totals["unique_elements"]
    opt_tensors, opt_bytes = walk_count(loaded["optimizer"])
    file_bytes, _ = storage_bytes_of(walk_tensors(loaded, []))
    w.emit("training_checkpoint.pt", "torch-zip", tensors, totals, module_list(net),
           model_storage_bytes_is_file=False, file_storage_bytes=file_bytes,
           extra={"model_key": "model",
                  "other": collections.OrderedDict(
                      keys=list(loaded.keys()), epoch=loaded["epoch"],
                      optimizer=collections.OrderedDict(tensors=opt_tensors, bytes=opt_bytes))},
           notes="A plain training checkpoint {'model': state_dict, 'optimizer': SGD(momentum) "
                 "state_dict, 'epoch': 5}: the model is under key 'model'; totals/tensors describe that "
                 "sub-dict only. 'file' counts every storage (momentum buffers too).")


def fx_lightning(w):
    torch.manual_seed(0)
    lit = LitModel()
    opt = torch.optim.Adam(lit.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    epochs, steps_per_epoch, global_step = 2, 2, 0
    for _epoch in range(epochs):
        for _ in range(steps_per_epoch):
            opt.zero_grad()
            loss = lit(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
            global_step += 1
        sched.step()
    val_loss = torch.tensor(0.4321)

    def prog(n, started=True):
        d = collections.OrderedDict(ready=n, completed=n)
        if started:
            d["started"] = n
            d["processed"] = n
        return d

    def progress(n, started=True, last=None):
        d = collections.OrderedDict(total=prog(n, started), current=prog(n, started))
        if last is not None:
            d["is_last_batch"] = last
        return d

    loops = collections.OrderedDict(
        fit_loop={
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": global_step},
            "epoch_loop.batch_progress": progress(global_step, last=True),
            "epoch_loop.scheduler_progress": progress(epochs, started=False),
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {"step": progress(global_step, started=False),
                              "zero_grad": progress(global_step)}},
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": progress(0, started=False),
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": progress(1, last=True),
            "epoch_progress": progress(epochs),
        },
        validate_loop={"state_dict": {}, "batch_progress": progress(0, last=False)},
        test_loop={"state_dict": {}, "batch_progress": progress(0, last=False)},
        predict_loop={"state_dict": {}, "batch_progress": progress(0)},
    )
    mc_key = ("ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, "
              "'every_n_epochs': 1, 'train_time_interval': None}")
    es_key = "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}"
    best_path = "/tmp/lightning_logs/version_0/checkpoints/epoch=1-step=%d.ckpt" % global_step
    callbacks = collections.OrderedDict()
    callbacks[mc_key] = {
        "monitor": "val_loss", "best_model_score": val_loss.clone(), "best_model_path": best_path,
        "current_score": val_loss.clone(), "dirpath": "/tmp/lightning_logs/version_0/checkpoints",
        "best_k_models": {best_path: val_loss.clone()}, "kth_best_model_path": best_path,
        "kth_value": val_loss.clone(), "last_model_path": "",
    }
    callbacks[es_key] = {"wait_count": 0, "stopped_epoch": 0, "best_score": val_loss.clone(), "patience": 3}
    hparams = collections.OrderedDict()
    hparams["lr"] = 1e-3
    hparams["hidden"] = 16
    hparams["name"] = "tiny"
    hparams["use_bn"] = True
    hparams["dropout"] = None
    hparams["betas"] = (0.9, 0.999)
    hparams["layers"] = [8, 16, 4]
    hparams["args"] = argparse.Namespace(batch_size=4, seed=0, data_dir="/data")
    hparams["optim"] = {"name": "adam", "schedule": {"step_size": 1, "gamma": 0.5}}

    checkpoint = {
        "epoch": epochs - 1,
        "global_step": global_step,
        "pytorch-lightning_version": "2.1.3",
        "state_dict": lit.state_dict(),
        "loops": loops,
        "callbacks": callbacks,
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs",
        "hyper_parameters": dict(hparams),
    }
    buf = io.BytesIO()
    torch.save(checkpoint, buf)  # Lightning saves through a buffer: zip prefix 'archive'
    with open(w.path("lightning.ckpt"), "wb") as f:
        f.write(buf.getvalue())
    loaded = torch.load(w.path("lightning.ckpt"))
    assert list(loaded.keys()) == list(checkpoint.keys())
    check_dict(checkpoint["state_dict"], loaded["state_dict"])
    kinds = kinds_from_model(lit)
    tensors, totals = summarize([(k, v, kinds[k]) for k, v in loaded["state_dict"].items()], model_counts(lit))
    assert totals["parameters"] + totals["buffers"] == totals["unique_elements"]
    opt_tensors, opt_bytes = walk_count(loaded["optimizer_states"])
    live_opt_tensors, live_opt_bytes = walk_count(checkpoint["optimizer_states"])
    assert (opt_tensors, opt_bytes) == (live_opt_tensors, live_opt_bytes)
    assert any(k == "exp_avg" for st in loaded["optimizer_states"][0]["state"].values() for k in st)

    hp = loaded["hyper_parameters"]
    cb_tensors, cb_bytes = walk_count(loaded["callbacks"])
    metadata = collections.OrderedDict([
        ("epoch", loaded["epoch"]),
        ("global_step", loaded["global_step"]),
        ("pytorch-lightning_version", loaded["pytorch-lightning_version"]),
        ("hparams_name", loaded["hparams_name"]),
        ("hyper_parameters", plain(hp)),
        ("callbacks", list(loaded["callbacks"].keys())),
        ("optimizer_states", collections.OrderedDict(
            count=len(loaded["optimizer_states"]), tensors=opt_tensors, bytes=opt_bytes)),
        ("lr_schedulers", collections.OrderedDict(count=len(loaded["lr_schedulers"]))),
        ("loops", list(loaded["loops"].keys())),
        ("callback_tensors", collections.OrderedDict(tensors=cb_tensors, bytes=cb_bytes)),
        ("keys", list(loaded.keys())),
    ])
    file_bytes, _ = storage_bytes_of(walk_tensors(loaded, []))
    w.emit("lightning.ckpt", "lightning", tensors, totals, module_list(lit), metadata=metadata,
           model_storage_bytes_is_file=False, file_storage_bytes=file_bytes,
           notes="Built as Lightning 2.x _CheckpointConnector.dump_checkpoint does (no Lightning "
                 "installed): plain top-level dict, state_dict keys prefixed 'model.', real Adam state "
                 "after %d steps (step is a 0-dim float32 tensor in torch 1.13), real StepLR state, "
                 "callback states holding 0-dim tensors, hyper_parameters with an argparse.Namespace "
                 "('args'), a tuple ('betas', a list here) and a nested dict. Saved via io.BytesIO, so the "
                 "zip prefix is 'archive'. totals/tensors describe state_dict only; 'file' counts every "
                 "storage." % global_step)


def fx_bare_pickle(w):
    obj = {"name": "bare", "version": 3, "values": [1, 2, 3], "nested": {"a": "b", "t": (1, "x")},
           "flag": True, "none": None, "ratio": 0.25, "big": 2 ** 40}
    p = w.path("bare.pkl")
    with open(p, "wb") as f:
        pickle.dump(obj, f)  # Python 3.11 default protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE
    with open(p, "rb") as f:
        assert pickle.load(f) == obj
    w.emit("bare.pkl", "pickle", notes="A plain pickle.dump (protocol %d) of a dict of ints, strings, "
           "lists, a tuple, bool, None, a float: no tensors, totals all 0." % pickle.DEFAULT_PROTOCOL,
           extra={"pickle_protocol": pickle.DEFAULT_PROTOCOL})


FIXTURES_T113 = [fx_plain, fx_plain_dict, fx_views, fx_tied, fx_dtypes, fx_quantized, fx_sparse, fx_lazy,
                 fx_meta, fx_module, fx_training_ckpt, fx_lightning, fx_legacy, fx_protocols, fx_bare_pickle]


# ---------------------------------------------------------------------------------------------
# torch 2.x fixtures (testdata/t26)
# ---------------------------------------------------------------------------------------------
#
# Debian 12 only ships torch 1.13, so these are written in a Debian 13 (trixie) chroot, which ships
# python3-torch 2.6 (testdata/README.md says how). Conventions for cases EXPECTED.md leaves open, the
# same as the torch 1.13 fixtures' (testdata/README.md "Fields beyond EXPECTED.md"):
# - plain dicts of tensors without a model (dtypes, views): "kind" follows the well-known buffer
#   names, parameters = trainable = unique elements of the other entries;
# - uninitialized (lazy) entries: dtype, shape, stride, numel, bytes, device and offset are null (the
#   file stores only REDUCE(cls, (requires_grad,))); requires_grad is what the file says;
# - "modules": named_modules(), root as "", recursive counts; state-dict fixtures list the modules
#   that hold tensors; whole_module lists every module with "type" and "training";
# - TorchScript fixtures (*.ts.pt) have the fields of testdata/gen_torchscript.py: modules with
#   type (original_name), qualified_type, parameters / trainable / buffers, training (null when
#   frozen); shared_paths; tensors from named_parameters / named_buffers(remove_duplicate=False);
#   totals.modules / modules_train / modules_eval; methods {all, from_forward, entry_points};
#   frozen; constants_tensors / constants_elements / constants_storage_bytes; entries;
# - totals.storage_bytes: the storages behind the entries; "file": {storages, storage_bytes} of every
#   data/<key> record (they differ only for lightning.ckpt: optimizer and callback tensors);
# - "globals": every GLOBAL / STACK_GLOBAL of data.pkl as module.name, first-occurrence order;
# - lightning metadata also has hparams_name, loops (keys), callback_tensors, keys;
# - dtypes has "unsaveable": dtypes this torch cannot save (float8_e8m0fnu: absent in 2.6);
# - notes end with what torch.load(weights_only=True) makes of the file and the zip's entries.

def loads_weights_only(path):
    try:
        torch.load(path, weights_only=True)
        return "loads with torch.load(weights_only=True)"
    except Exception as e:  # noqa: BLE001 - we only report
        msg = str(e)
        key = "WeightsUnpickler error: "
        why = msg[msg.find(key) + len(key):].split("\n")[0].strip() if key in msg else ""
        why = why.split(". ")[0]
        return "torch.load(weights_only=True) refuses it (%s%s)" % (
            type(e).__name__, ": " + why if why else "")


def sd_items(sd):
    return [(k, v) for k, v in sd.items()]


def write_expected(w, fname, fmt, named_saved, named_loaded, model, notes, *,
                   metadata=None, modules=None, all_loaded=None, extra=None):
    """The expected json of a torch.save file: every saved tensor must equal its loaded copy; kinds and
    counts from the live model, or from the names without one; all_loaded: every tensor in the file,
    when the entries are only part of it."""
    path = w.path(fname)
    assert len(named_saved) == len(named_loaded)
    for (n1, a), (n2, b) in zip(named_saved, named_loaded):
        assert n1 == n2, (n1, n2)
        check_same(a, b)
    if model is not None:
        kinds = kinds_from_model(model)
    else:
        kinds = {n: kind_by_name(n, t) for n, t in named_loaded}
    tensors, totals = summarize([(n, t, kinds[n]) for n, t in named_loaded],
                                model_counts(model) if model is not None else None)
    if modules is None and model is not None:
        modules = module_list(model)
    if model is None:
        if plain_tensors([n for n, _ in named_loaded]):
            notes += (" Plain tensors (no name with a dot, none a module's leaf such as weight*, bias*, running_mean): "
                      "no model, so every entry is neither parameter nor buffer (kind attribute, totals.attributes = "
                      "unique elements).")
        else:
            notes += (" No model: kind follows the well-known buffer names (%s), parameters = "
                      "trainable = unique elements of the other entries." % ", ".join(BUFFER_NAMES))
    notes += " " + loads_weights_only(path) + "."
    notes += " Zip entries (without prefix): " + ", ".join(zip_entries(path)) + "."
    w.emit(fname, fmt, tensors, totals, modules, metadata=metadata, notes=notes.strip(), extra=extra,
           model_storage_bytes_is_file=all_loaded is None,
           file_storage_bytes=storage_bytes_of(all_loaded)[0] if all_loaded is not None else None)


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Net(nn.Module):
    """Nested: block.{conv,bn}, head.0 (Linear), head.2 (Linear)."""

    def __init__(self):
        super().__init__()
        self.block = Block(3, 6)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        x = self.pool(self.block(x)).flatten(1)
        return self.head(x)


def trained_net(seed):
    torch.manual_seed(seed)
    m = Net()
    m.train()
    with torch.no_grad():
        m(torch.randn(4, 3, 5, 5))  # running stats and num_batches_tracked become non-trivial
    return m



def fx2_plain(w):
    m = trained_net(1)
    sd = m.state_dict()
    torch.save(sd, w.path("plain_state_dict.pt"))
    back = torch.load(w.path("plain_state_dict.pt"), weights_only=False)
    assert list(back.keys()) == list(sd.keys())
    assert isinstance(back, collections.OrderedDict) and hasattr(back, "_metadata")
    write_expected(w, "plain_state_dict.pt", "torch-zip", sd_items(sd), sd_items(back), m,
                   "Nested Conv2d/BatchNorm2d/Linear state dict, default torch.save (protocol 2).")


def fx2_protocols(w):
    for proto in (4, 5):
        m = trained_net(10 + proto)
        sd = m.state_dict()
        fname = "protocol%d.pt" % proto
        torch.save(sd, w.path(fname), pickle_protocol=proto)
        with zipfile.ZipFile(w.path(fname)) as z:
            pkl = z.read("protocol%d/data.pkl" % proto)
        assert pkl[:2] == bytes([0x80, proto]), pkl[:2]
        back = torch.load(w.path(fname), weights_only=False)
        write_expected(w, fname, "torch-zip", sd_items(sd), sd_items(back), m,
                       "Same model as plain_state_dict, torch.save(pickle_protocol=%d): data.pkl "
                       "starts with 0x80 0x%02x; uses FRAME, SHORT_BINUNICODE, STACK_GLOBAL, "
                       "MEMOIZE." % (proto, proto))


def fx2_dtypes(w):
    torch.manual_seed(2)
    f = torch.randn(2, 3)
    d = collections.OrderedDict()
    # ordinary dtypes (_rebuild_tensor_v2 + typed storage classes)
    d["f32"] = f.clone()
    d["f64"] = f.double()
    d["f16"] = f.half()
    d["bf16"] = f.bfloat16()
    d["c64"] = torch.complex(f, -f)
    d["c128"] = torch.complex(f, f).to(torch.complex128)
    d["i64"] = torch.arange(-3, 3, dtype=torch.int64).reshape(2, 3)
    d["i32"] = torch.arange(-3, 3, dtype=torch.int32)
    d["i16"] = torch.arange(-3, 3, dtype=torch.int16)
    d["i8"] = torch.arange(-3, 3, dtype=torch.int8)
    d["u8"] = torch.arange(250, 256, dtype=torch.uint8)
    d["bool"] = torch.tensor([True, False, True])
    d["scalar_f32"] = torch.tensor(3.5)          # 0-dim
    d["empty_f32"] = torch.empty(0, 3)            # zero elements, 0-byte storage
    # new dtypes (_rebuild_tensor_v3 + UntypedStorage)
    d["f8_e4m3fn"] = f.to(torch.float8_e4m3fn)
    d["f8_e5m2"] = f.to(torch.float8_e5m2)
    d["f8_e4m3fnuz"] = f.to(torch.float8_e4m3fnuz)
    d["f8_e5m2fnuz"] = f.to(torch.float8_e5m2fnuz)
    d["u16"] = torch.tensor([0, 1, 65535, 40000], dtype=torch.uint16)
    d["u32"] = torch.tensor([0, 1, 4294967295, 3000000000], dtype=torch.uint32)
    d["u64"] = torch.tensor([0, 1, 2 ** 63 + 5, 2 ** 64 - 1], dtype=torch.uint64)
    d["c32"] = torch.complex(f, -f).to(torch.complex32)
    d["bits8"] = torch.tensor([1, 2, 254], dtype=torch.uint8).view(torch.bits8)
    d["bits16"] = torch.tensor([1, 2, 300], dtype=torch.int16).view(torch.bits16)
    # a v3 tensor that is a non-contiguous view with an offset into a shared storage
    base8 = torch.randn(4, 5).to(torch.float8_e5m2)
    d["f8_e5m2_base"] = base8
    d["f8_e5m2_view_t"] = base8[1:, 1:4].t()       # offset 6, stride (1, 5)
    d["u16_empty"] = torch.empty(0, dtype=torch.uint16)
    if hasattr(torch, "float8_e8m0fnu"):          # torch >= 2.7
        d["f8_e8m0fnu"] = f.abs().to(torch.float8_e8m0fnu)
    if hasattr(torch, "float4_e2m1fn_x2"):        # torch >= 2.8: two 4-bit floats per byte, numel counts bytes
        d["f4_e2m1fn_x2"] = torch.tensor([0x12, 0x34, 0xab, 0xff, 0x00, 0x7f],
                                         dtype=torch.uint8).view(torch.float4_e2m1fn_x2).reshape(2, 3)
    unsaveable = {n: "torch %s has no torch.%s" % (torch.__version__, n)
                  for n in ("float8_e8m0fnu", "float4_e2m1fn_x2") if not hasattr(torch, n)}
    fname = "dtypes.pt"
    torch.save(d, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    for k in d:
        assert back[k].dtype == d[k].dtype
    write_expected(w, fname, "torch-zip", sd_items(d), sd_items(back), None,
                   "Plain OrderedDict of tensors. float32..bool use _rebuild_tensor_v2 with typed storage classes; "
                   "float8_*, uint16/32/64, complex32, bits8, bits16 use _rebuild_tensor_v3 with "
                   "torch.UntypedStorage whose persistent-id numel is the byte count, and offset in "
                   "elements of the dtype. f8_e5m2_view_t views f8_e5m2_base's storage (offset 6, "
                   "stride [1,5]). Zero-element tensors have 0-byte data/ records written "
                   "without a data descriptor (flag 0x0800).",
                   extra={"unsaveable": unsaveable} if unsaveable else None)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.proj = nn.Linear(6, 6)
        self.dec = nn.Linear(6, 10, bias=True)
        self.dec.weight = self.emb.weight          # tied


def fx2_tied(w):
    torch.manual_seed(3)
    m = Tied()
    sd = m.state_dict()
    fname = "tied_weights.pt"
    torch.save(sd, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    assert back["emb.weight"].untyped_storage()._cdata == back["dec.weight"].untyped_storage()._cdata
    write_expected(w, fname, "torch-zip", sd_items(sd), sd_items(back), m,
                   "emb.weight and dec.weight are tied: one storage, both keys in the state dict "
                   "(the second is a new ('storage', FloatStorage, '0', 'cpu', 60) tuple built "
                   "from BINGETs of the memoized strings/class, then BINPERSID again: the "
                   "persistent id itself is not memoized); parameters() counts it once.")

    # views into one storage
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    v = collections.OrderedDict()
    v["base"] = base
    v["rows_2_4"] = base[2:4]                     # offset 16
    v["transposed"] = base.t()                    # stride (1, 8)
    v["column_3"] = base[:, 3]                    # offset 3, stride (8,)
    v["strided"] = base[1::2, ::3]                # offset 8, stride (16, 3)
    v["expanded"] = base[0, :4].unsqueeze(0).expand(5, 4)   # stride (0, 1)
    v["flat_tail"] = base.view(-1)[40:]           # offset 40
    v["same_as_base"] = base.view(6, 8)           # same (storage, offset, shape, stride) as base
    other = torch.arange(6, dtype=torch.int64)
    v["other"] = other
    v["other_slice"] = other[1:5]
    fname = "views.pt"
    torch.save(v, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    write_expected(w, fname, "torch-zip", sd_items(v), sd_items(back), None,
                   "Plain OrderedDict: views into two storages (data/0 float32 x48, "
                   "data/1 int64 x6). 'expanded' has stride 0, so numel*itemsize exceeds the bytes "
                   "it covers; 'same_as_base' is a distinct tensor object with the same storage, "
                   "offset, shape and stride as 'base' (counted once in unique_elements).")


def fx2_meta_lazy(w):
    torch.manual_seed(4)
    with torch.device("meta"):
        m = Net()
    sd = m.state_dict()
    fname = "meta_state_dict.pt"
    torch.save(sd, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    write_expected(w, fname, "torch-zip", sd_items(sd), sd_items(back), m,
                   "Net built under torch.device('meta'): every entry is "
                   "_rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad); no data/ "
                   "records at all.")

    torch.manual_seed(5)
    lz = nn.Sequential(nn.Linear(4, 5), nn.LazyLinear(3), nn.LazyBatchNorm1d())
    sd = lz.state_dict()
    fname = "lazy_state_dict.pt"
    torch.save(sd, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    assert isinstance(back["1.weight"], nn.UninitializedParameter)
    assert isinstance(back["2.running_mean"], nn.UninitializedBuffer)
    write_expected(w, fname, "torch-zip", sd_items(sd), sd_items(back), lz,
                   "LazyLinear and LazyBatchNorm1d before any forward: weight/bias are "
                   "UninitializedParameter, running_mean/running_var UninitializedBuffer, each "
                   "REDUCE(cls, (requires_grad,)); 2.num_batches_tracked is a real int64 scalar. "
                   "Uninitialized entries have null dtype/shape/stride/numel/bytes/device/offset.")


def fx2_whole_module(w):
    torch.manual_seed(6)
    m = nn.Sequential(
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()),
        nn.Flatten(),
        nn.Linear(4 * 3 * 3, 5),
        nn.Linear(5, 2),
    )
    with torch.no_grad():
        m.train()
        m(torch.randn(2, 3, 5, 5))
    for p in m[0].parameters():
        p.requires_grad_(False)                   # frozen: conv and bn
    m[3].bias.requires_grad_(False)
    fname = "whole_module.pt"
    torch.save(m, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    assert isinstance(back, nn.Sequential)
    saved = sd_items(m.state_dict(keep_vars=True))
    loaded = sd_items(back.state_dict(keep_vars=True))
    write_expected(w, fname, "torch-zip", saved, loaded, m,
                   "torch.save(model) of nested nn.Sequential (Conv2d, BatchNorm2d, ReLU, Flatten, "
                   "Linear, Linear): modules are GLOBAL torch.nn.modules.* + NEWOBJ/REDUCE + BUILD "
                   "of __dict__; Parameters are _rebuild_parameter(tensor, requires_grad, "
                   "OrderedDict()). 0.0.* and 3.bias are frozen (requires_grad False), so "
                   "trainable < parameters. Tensor order = state_dict(keep_vars=True) order.",
                   modules=module_list(m, all_modules=True))


class LitModule(nn.Module):
    """Stands in for a LightningModule: state-dict keys get the 'model.' prefix."""

    def __init__(self):
        super().__init__()
        self.model = Net()


def progress(ready, completed, started=None, processed=None):
    d = {"ready": ready}
    if started is not None:
        d["started"] = started
    if processed is not None:
        d["processed"] = processed
    d["completed"] = completed
    return d


def fx2_lightning(w):
    torch.manual_seed(7)
    lit = LitModule()
    opt = torch.optim.Adam(lit.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        opt.zero_grad()
        loss = lit.model(torch.randn(4, 3, 5, 5)).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
    bp = {"total": progress(2, 2, 2, 2), "current": progress(2, 2, 2, 2), "is_last_batch": True}
    loops = {
        "fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": 2},
            "epoch_loop.batch_progress": bp,
            "epoch_loop.scheduler_progress": {"total": progress(2, 2), "current": progress(2, 2)},
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {"step": {"total": progress(2, 2), "current": progress(2, 2)},
                              "zero_grad": {"total": progress(2, 2, 2),
                                            "current": progress(2, 2, 2)}}},
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": {
                "total": progress(0, 0), "current": progress(0, 0)},
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": {
                "total": progress(0, 0, 0, 0), "current": progress(0, 0, 0, 0),
                "is_last_batch": False},
            "epoch_progress": {"total": progress(1, 0, 1, 1), "current": progress(1, 0, 1, 1)},
        },
        "validate_loop": {"state_dict": {}, "batch_progress": {
            "total": progress(0, 0, 0, 0), "current": progress(0, 0, 0, 0), "is_last_batch": False}},
        "test_loop": {"state_dict": {}, "batch_progress": {
            "total": progress(0, 0, 0, 0), "current": progress(0, 0, 0, 0), "is_last_batch": False}},
        "predict_loop": {"state_dict": {}, "batch_progress": {
            "total": progress(0, 0, 0, 0), "current": progress(0, 0, 0, 0)}},
    }
    ckpt_key = ("ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, "
                "'every_n_epochs': 1, 'train_time_interval': None}")
    es_key = "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}"
    callbacks = {
        ckpt_key: {"monitor": "val_loss", "best_model_score": torch.tensor(0.8125),
                   "best_model_path": "/runs/ckpt/epoch=0-step=2.ckpt",
                   "current_score": torch.tensor(0.8125), "dirpath": "/runs/ckpt",
                   "best_k_models": {"/runs/ckpt/epoch=0-step=2.ckpt": torch.tensor(0.8125)},
                   "kth_best_model_path": "/runs/ckpt/epoch=0-step=2.ckpt",
                   "kth_value": torch.tensor(0.8125), "last_model_path": ""},
        es_key: {"wait_count": 0, "stopped_epoch": 0, "best_score": torch.tensor(0.8125),
                 "patience": 3},
    }
    ns = argparse.Namespace(data_dir="/data", batch_size=4, augment=True)
    hparams = {"lr": 0.001, "hidden": 8, "betas": (0.9, 0.999), "name": "tiny-net",
               "layers": [6, 8, 3], "args": ns, "dropout": None,
               "optim": {"name": "adam", "schedule": {"step_size": 1, "gamma": 0.5}}}
    checkpoint = {
        "epoch": 0,
        "global_step": 2,
        "pytorch-lightning_version": "2.5.0",
        "state_dict": lit.state_dict(),
        "loops": loops,
        "callbacks": callbacks,
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs",
        "hyper_parameters": hparams,
    }
    buf = io.BytesIO()
    torch.save(checkpoint, buf)                   # what Lightning's _atomic_save does
    fname = "lightning.ckpt"
    with open(w.path(fname), "wb") as f:
        f.write(buf.getvalue())
    back = torch.load(w.path(fname), weights_only=False)
    assert vars(back["hyper_parameters"]["args"]) == vars(ns)
    for a, b in zip(walk_tensors(checkpoint, []), walk_tensors(back, [])):
        check_same(a, b)
    opt_tensors = list(walk_tensors(back["optimizer_states"], []))
    cb_tensors = list(walk_tensors(back["callbacks"], []))

    meta = {
        "epoch": back["epoch"], "global_step": back["global_step"],
        "pytorch-lightning_version": back["pytorch-lightning_version"],
        "hparams_name": back["hparams_name"],
        "hyper_parameters": plain(back["hyper_parameters"]),
        "callbacks": list(back["callbacks"].keys()),
        "optimizer_states": {"count": len(back["optimizer_states"]), "tensors": len(opt_tensors),
                             "bytes": sum(t.numel() * t.element_size() for t in opt_tensors)},
        "lr_schedulers": {"count": len(back["lr_schedulers"])},
        "loops": list(back["loops"].keys()),
        "callback_tensors": {"tensors": len(cb_tensors),
                             "bytes": sum(t.numel() * t.element_size() for t in cb_tensors)},
        "keys": list(back.keys()),
    }
    assert list(back.keys()) == list(checkpoint.keys())
    write_expected(w, fname, "lightning", sd_items(checkpoint["state_dict"]),
                   sd_items(back["state_dict"]), lit,
                   "Lightning 2.x dump_checkpoint layout (epoch, global_step, "
                   "pytorch-lightning_version, state_dict, loops, callbacks, optimizer_states, "
                   "lr_schedulers, hparams_name='kwargs', hyper_parameters), torch.save to "
                   "io.BytesIO so the prefix is 'archive'. Top-level dict is a plain dict. "
                   "Adam after 2 steps: state per param {step (float32 0-dim tensor), exp_avg, "
                   "exp_avg_sq}. totals/tensors cover only state_dict; 'file' counts every data/ "
                   "record (incl. optimizer and callback tensors). hyper_parameters.betas is "
                   "a tuple in the file (listed as a JSON list); args is an argparse.Namespace "
                   "(GLOBAL argparse Namespace, NEWOBJ/REDUCE, BUILD).",
                   metadata=meta, all_loaded=walk_tensors(back, []))




class TSNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block(3, 4)
        self.head = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
        self.register_buffer("scale", torch.tensor([2.0]))

    def _forward_impl(self, x):
        x = self.block(x).mean(dim=(2, 3))
        return self.head(x) * self.scale

    def forward(self, x):
        return self._forward_impl(x)


class TSNetExport(TSNet):
    """TSNet plus a separate @torch.jit.export entry point (scripted and frozen fixtures only:
    torch.jit.trace compiles exported methods too, and this one calls forward, which clashes with
    the traced forward)."""

    @torch.jit.export
    def evaluation_step(self, x, y):
        return (self.forward(x).argmax(dim=1) == y).float().mean()


class TSTransformer(nn.Module):
    """A tiny transformer: TorchScript's MultiheadAttention path calls
    torch.scaled_dot_product_attention, an operator LibTorch 1.13 does not have."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.encoder = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                  batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def ts_training(m):
    try:
        return bool(m.training)
    except AttributeError:      # frozen modules have no training attribute
        return None


def ts_modules(m):
    """named_modules() (root ""): original_name, qualified class name (as in the data.pkl GLOBAL),
    recursive parameters / trainable / buffers, training (None: no such attribute)."""
    out = []
    for name, s in m.named_modules():
        ps = list(s.parameters())
        out.append({"name": name, "type": s.original_name,
                    "qualified_type": s._c._type().qualified_name(),
                    "parameters": sum(p.numel() for p in ps),
                    "trainable": sum(p.numel() for p in ps if p.requires_grad),
                    "buffers": sum(b.numel() for b in s.buffers()),
                    "training": ts_training(s)})
    return out


def ts_shared_paths(m):
    """Module paths that reach the same C++ module object as an earlier path (flip `training`
    through one, read it through the other; each path has its own Python wrapper)."""
    mods = list(m.named_modules())
    out = []
    for i, (name, s) in enumerate(mods):
        if ts_training(s) is None:
            continue
        for pname, ps in mods[:i]:
            if ts_training(ps) is None or \
                    ps._c._type().qualified_name() != s._c._type().qualified_name():
                continue
            old = ps._c.getattr("training")
            ps._c.setattr("training", not old)
            same = s._c.getattr("training") == (not old)
            ps._c.setattr("training", old)
            if same:
                out.append({"name": name, "same_as": pname})
                break
    return out


def ts_tensors(m):
    """named_parameters(remove_duplicate=False) ("parameter") and
    named_buffers(remove_duplicate=False) ("buffer"), in state_dict order."""
    kinds = {}
    for n, _ in m.named_parameters(remove_duplicate=False):
        kinds[n] = "parameter"
    for n, _ in m.named_buffers(remove_duplicate=False):
        assert n not in kinds
        kinds[n] = "buffer"
    sd = m.state_dict(keep_vars=True)
    order = [k for k in sd if k in kinds]
    assert sorted(order) == sorted(kinds), (order, sorted(kinds))
    return [(k, sd[k]) for k in order], kinds


def ts_constants(path, prefix):
    """The tensors of constants.pkl, unpickled with their data read from constants/<key>."""
    with zipfile.ZipFile(path) as z:
        nbytes = 0

        class U(pickle.Unpickler):
            def persistent_load(self, pid):
                nonlocal nbytes
                typename, storage_type, key, location, numel = pid
                assert typename == "storage" and location == "cpu", pid
                data = z.read("%s/constants/%s" % (prefix, key))
                nbytes += len(data)
                with warnings.catch_warnings():     # TypedStorage is deprecated in 2.x
                    warnings.simplefilter("ignore", UserWarning)
                    st = storage_type.from_buffer(data, "little")
                assert st.size() == numel
                return st

        consts = U(io.BytesIO(z.read(prefix + "/constants.pkl"))).load()
    tensors = [t for t in consts if isinstance(t, torch.Tensor)]
    return tensors, nbytes


def write_ts_expected(w, fname, live, back, notes, *, entry_points=(), frozen=False, extra=None):
    """Expected json of a TorchScript archive: live = the ScriptModule saved, back = it loaded
    with torch.jit.load; every fact is computed on both and must agree."""
    path = w.path(fname)
    prefix, _records, _file, globs = zip_facts(path, torchscript=True)
    entries = zip_entries(path)
    mods = ts_modules(live)
    assert ts_modules(back) == mods
    for d in mods:
        assert d["qualified_type"] in globs, (d["qualified_type"], globs)
    (named_live, kinds), (named_back, kinds_back) = ts_tensors(live), ts_tensors(back)
    assert kinds == kinds_back and [n for n, _ in named_live] == [n for n, _ in named_back]
    for (_, a), (_, b) in zip(named_live, named_back):
        check_same(a, b)
    counts = model_counts(live)
    assert model_counts(back) == counts
    tensors, totals = summarize([(n, t, kinds[n]) for n, t in named_back], counts)
    totals["modules"] = len(mods)
    totals["modules_train"] = sum(1 for d in mods if d["training"] is True)
    totals["modules_eval"] = sum(1 for d in mods if d["training"] is False)
    names = sorted(live._c._method_names())
    assert sorted(back._c._method_names()) == names and "forward" in names
    assert set(entry_points) <= set(names), (entry_points, names)
    methods = {"all": names, "from_forward": sorted(set(names) - set(entry_points)),
               "entry_points": sorted(entry_points)}
    shared = ts_shared_paths(live)
    assert ts_shared_paths(back) == shared
    consts, const_bytes = ts_constants(path, prefix)
    facts = collections.OrderedDict(
        shared_paths=shared, methods=methods, frozen=frozen, constants_tensors=len(consts),
        constants_elements=sum(t.numel() for t in consts), constants_storage_bytes=const_bytes)
    facts.update(extra or {})
    facts["entries"] = entries
    w.emit(fname, "torchscript", tensors, totals, mods, extra=facts,
           notes=(notes + " Zip entries (without prefix): " + ", ".join(entries) + ".").strip())




def ts_same_outputs(a, b, *args):
    """a(*args) == b(*args), run on deep copies (train-mode modules may update buffers)."""
    a, b = copy.deepcopy(a), copy.deepcopy(b)
    with torch.no_grad():
        assert torch.allclose(a(*args), b(*args))




def fx2_torchscript(w):
    for kind in ("scripted", "traced"):
        torch.manual_seed(8 if kind == "scripted" else 9)
        m = TSNetExport() if kind == "scripted" else TSNet()
        with torch.no_grad():
            m(torch.randn(2, 3, 4, 4))
        m.block.eval()                            # mixed training flags
        m.block.conv.weight.requires_grad_(False)             # frozen parameters
        m.head[2].bias.requires_grad_(False)
        if kind == "scripted":
            sm = torch.jit.script(m)
        else:
            sm = torch.jit.trace(m, torch.randn(2, 3, 4, 4))
        fname = "%s.ts.pt" % kind
        torch.jit.save(sm, w.path(fname))
        back = torch.jit.load(w.path(fname))
        ts_same_outputs(sm, back, torch.randn(2, 3, 4, 4))
        if kind == "scripted":
            x, y = torch.randn(5, 3, 4, 4), torch.tensor([0, 1, 1, 0, 1])
            assert torch.equal(sm.evaluation_step(x, y), back.evaluation_step(x, y))
        write_ts_expected(
            w, fname, sm, back,
            "torch.jit.%s of %s(block=Block(conv, bn), head=Sequential(Linear, ReLU, Linear), "
            "buffer 'scale'); block (and its children) in eval mode, the rest in train mode; "
            "block.conv.weight and head.2.bias frozen (requires_grad False). forward calls the "
            "helper _forward_impl. Tensors: named_parameters / named_buffers "
            "(remove_duplicate=False) in state_dict order; modules: named_modules() with type = "
            "original_name.%s" % (
                "script" if kind == "scripted" else "trace",
                "TSNetExport" if kind == "scripted" else "TSNet",
                " evaluation_step is a separate @torch.jit.export entry point; _forward_impl is "
                "compiled as its own method." if kind == "scripted" else
                " Tracing inlines _forward_impl (methods: forward only). traced_inputs.pkl holds "
                "the example input (restore_type_tag dict 'forward' -> [tensor]) whose persistent "
                "id says FloatStorage '0' of 96 elements, but the record traced_inputs/0 is 0 "
                "bytes (torch writes it empty); torch.jit.load accepts this."),
            entry_points=["evaluation_step"] if kind == "scripted" else ())

    # frozen: parameters and buffers become constants
    torch.manual_seed(10)
    m = TSNetExport()
    with torch.no_grad():
        m(torch.randn(2, 3, 4, 4))
    m.eval()
    fr = torch.jit.freeze(torch.jit.script(m), preserved_attrs=["evaluation_step"])
    fname = "frozen.ts.pt"
    torch.jit.save(fr, w.path(fname))
    back = torch.jit.load(w.path(fname))
    ts_same_outputs(m, back, torch.randn(2, 3, 4, 4))
    consts = back.code_with_constants[1].const_mapping
    write_ts_expected(
        w, fname, fr, back,
        "torch.jit.freeze(torch.jit.script(TSNetExport().eval()), "
        "preserved_attrs=['evaluation_step']): submodules inlined, BatchNorm folded into the "
        "conv, parameters and buffers become constants.pkl tensors (constants/N, code uses "
        "CONSTANTS.cN), so named_parameters() / named_buffers() are empty. data.pkl is the root "
        "object with an empty BUILD dict: no training attribute (training null, counted in "
        "neither modules_train nor modules_eval). The root class is a clone "
        "(___torch_mangle_N). The eager model had %d parameters and %d buffer elements."
        % (sum(p.numel() for p in m.parameters()), sum(b.numel() for b in m.buffers())),
        entry_points=["evaluation_step"], frozen=True,
        extra={"forward_constants": sorted(consts)})

    # a transformer: code/ calls torch.scaled_dot_product_attention
    torch.manual_seed(11)
    m = TSTransformer()
    m.eval()
    sm = torch.jit.script(m)
    fname = "transformer.ts.pt"
    torch.jit.save(sm, w.path(fname))
    back = torch.jit.load(w.path(fname))
    ts_same_outputs(sm, back, torch.randn(2, 5, 4))
    ops = torch.jit.export_opnames(back)
    assert "aten::scaled_dot_product_attention" in ops, ops
    write_ts_expected(
        w, fname, sm, back,
        "torch.jit.script of Linear -> nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, "
        "dropout=0, batch_first=True) -> mean -> Linear, in eval mode. MultiheadAttention "
        "declares q_proj_weight / k_proj_weight / v_proj_weight (and bias_k / bias_v) whose "
        "value is None; out_proj is a NonDynamicallyQuantizableLinear. The scripted "
        "multi_head_attention_forward in code/__torch__/torch/nn/functional.py calls "
        "torch.scaled_dot_product_attention, which LibTorch 1.13 cannot load (Unknown builtin op: "
        "aten::scaled_dot_product_attention).",
        extra={"ops": ops})


def fx2_compiled(w):
    """The state dict of a torch.compile'd module: OptimizedModule keeps the model as _orig_mod, so
    every key gains the '_orig_mod.' prefix (the compile rule's subject)."""
    m = trained_net(21)
    m.eval()
    cm = torch.compile(m, backend="eager")          # "eager": no C++ compiler needed
    x = torch.randn(2, 3, 5, 5)
    with torch.no_grad():
        assert torch.equal(cm(x), m(x))            # compiled once, same result
    assert type(cm).__name__ == "OptimizedModule" and cm._orig_mod is m
    sd = cm.state_dict()
    assert all(k.startswith("_orig_mod.") for k in sd), list(sd)
    fname = "compiled_state_dict.pt"
    torch.save(sd, w.path(fname))
    back = torch.load(w.path(fname), weights_only=False)
    write_expected(w, fname, "torch-zip", sd_items(sd), sd_items(back), cm,
                   "cm = torch.compile(Net(), backend='eager'); cm(x); torch.save(cm.state_dict()): "
                   "OptimizedModule registers the model as the submodule _orig_mod, so every key "
                   "starts with '_orig_mod.' and Net().load_state_dict(...) fails with missing and "
                   "unexpected keys. modules: cm.named_modules() (the root is the OptimizedModule).")


def fx2_dcp(w):
    """A torch.distributed.checkpoint directory written by this torch, one process (testdata/gen_formats.py
    writes and checks it; the same function makes formats/dcp under torch 2.6)."""
    import gen_formats
    out = gen_formats.Out(w.outdir)
    gen_formats.dcp_single(out)
    w.written += out.written + [("dcp.expected.json", os.path.getsize(w.path("dcp.expected.json")))]


FIXTURES_T2 = [fx2_plain, fx2_protocols, fx2_dtypes, fx2_tied, fx2_meta_lazy, fx2_whole_module, fx2_lightning,
               fx2_torchscript, fx2_compiled, fx2_dcp]


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":   # TorchScript code/ lists Final constants in set order
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(HERE, SET))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    if not T2:
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
    w = Writer(args.outdir)
    for fx in FIXTURES_T2 if T2 else FIXTURES_T113:
        fx(w)
    total = 0
    for name, size in w.written:
        total += size
        assert size <= MAX_FIXTURE, (name, size)
        print("%-32s %7d bytes" % (name, size))
    print("%d fixtures, %d bytes, torch %s -> %s" % (len(w.written), total, torch.__version__, args.outdir))


if __name__ == "__main__":
    main()
