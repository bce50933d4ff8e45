#!/usr/bin/python3
"""Write small PyTorch checkpoints and the numbers PyTorch reports about them.

Run with Debian's Python, which has torch 1.13:

    /usr/bin/python3 testdata/gen_fixtures.py [OUTDIR]      # OUTDIR defaults to testdata/t113

Every fixture <name>.<ext> gets <name>.expected.json beside it (format: testdata/EXPECTED.md).
All numbers come from PyTorch: tensor facts from torch.load of the written file, parameter /
buffer / trainable splits from the live model, and each fixture is loaded back and checked
against the live objects before its json is written. Nothing here is typed in by hand.

Everything is seeded, so re-running gives identical expected json. Zip fixtures are
byte-identical too; the legacy (pre-1.6) fixtures are not, because torch 1.13 names legacy
storages by their C pointer (str(storage._cdata)).
"""

import argparse
import collections
import io
import json
import os
import pickle
import pickletools
import struct
import sys
import warnings
import zipfile

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # lazy-module and ComplexHalf "experimental" chatter

BUFFER_NAMES = ("running_mean", "running_var", "num_batches_tracked", "position_ids", "token_type_ids",
                "inv_freq", "masked_bias", "_float_tensor", "causal_mask", "attention_mask")
UNINIT = nn.parameter.UninitializedTensorMixin
SUB_BYTE_BITS = {torch.quint4x2: 4, torch.quint2x4: 2}


# ---------------------------------------------------------------------------------------------
# Models (module-level classes so that torch.save(model) pickles them as __main__.<Class>)
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
# Facts about a loaded object
# ---------------------------------------------------------------------------------------------

def dtype_name(dt):
    return str(dt).replace("torch.", "")


def is_uninit(t):
    return isinstance(t, UNINIT)


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
    out = []
    for name, m in model.named_modules():
        p = sum(numel_known(x) for x in m.parameters())
        b = sum(numel_known(x) for x in m.buffers())
        n_tensors = len(list(m.parameters())) + len(list(m.buffers()))
        if not all_modules and n_tensors == 0:
            continue
        d = collections.OrderedDict(name=name, parameters=p, buffers=b)
        if all_modules:
            d["type"] = type(m).__name__
            d["training"] = m.training
        out.append(d)
    return out


def summarize(items, counts=None):
    """items: [(name, loaded tensor, kind)] in file order -> (tensors list, totals).

    counts: parameters / trainable / buffers from the live model; without a model (a plain dict
    of tensors) they are the unique elements of each kind, kind coming from well-known names.
    """
    tensors = [entry(n, t, k) for n, t, k in items]
    seen, storages = set(), {}
    elements = unique_elements = nbytes = 0
    by_kind = {"parameter": 0, "buffer": 0}
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
    return tensors, totals


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


def zip_facts(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/", 1)[0]
        assert all(n.startswith(prefix + "/") for n in names), names
        records = collections.OrderedDict()
        storages = 0
        storage_bytes = 0
        for info in z.infolist():
            rel = info.filename[len(prefix) + 1:]
            assert info.compress_type == zipfile.ZIP_STORED
            if rel.startswith("data/"):
                storages += 1
                storage_bytes += info.file_size
            elif rel != "data.pkl":
                records[rel] = z.read(info).decode().strip()
        globs = pickle_globals(z.read(prefix + "/data.pkl"))
    return prefix, records, collections.OrderedDict(storages=storages, storage_bytes=storage_bytes), globs


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
            prefix, records, file_info, globs = zip_facts(p)
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
    """A live tensor and its loaded copy agree (dtype, shape, values)."""
    if is_uninit(live):
        assert is_uninit(loaded) and type(live) is type(loaded)
        return
    assert live.dtype == loaded.dtype and live.shape == loaded.shape, (live.dtype, loaded.dtype)
    assert live.device.type == loaded.device.type
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
    assert torch.equal(live, loaded)


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


# ---------------------------------------------------------------------------------------------
# Fixtures
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

    def plain(v):
        if isinstance(v, argparse.Namespace):
            d = collections.OrderedDict([("__class__", "argparse.Namespace")])
            d.update((k, plain(x)) for k, x in vars(v).items())
            return d
        if isinstance(v, dict):
            return collections.OrderedDict((k, plain(x)) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

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


FIXTURES = [fx_plain, fx_plain_dict, fx_views, fx_tied, fx_dtypes, fx_quantized, fx_sparse, fx_lazy,
            fx_meta, fx_module, fx_training_ckpt, fx_lightning, fx_legacy, fx_protocols, fx_bare_pickle]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("outdir", nargs="?", default=os.path.join(here, "t113"))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    w = Writer(args.outdir)
    for fx in FIXTURES:
        fx(w)
    total = 0
    for name, size in w.written:
        total += size
        assert size <= 100 * 1024, (name, size)
        print("%-32s %7d bytes" % (name, size))
    print("%d fixtures, %d bytes, torch %s -> %s" % (len(w.written), total, torch.__version__, args.outdir))


if __name__ == "__main__":
    main()
