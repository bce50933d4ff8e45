#!/usr/bin/python3
"""Write the fixtures for `ckpt load` and the values PyTorch reads from every checkpoint.

Run with Debian's Python, which has torch 1.13:

    /usr/bin/python3 testdata/gen_load.py [OUTDIR]      # OUTDIR defaults to testdata/load

Writes into OUTDIR (format of expected.json: testdata/EXPECTED.md, section "testdata/load/"):

  arch.pt               torch.jit.script of LoadNet (Conv2d -> BatchNorm2d -> ReLU -> flatten ->
                        Linear -> Linear, input N x 3 x 8 x 8): the architecture for `--model`
  sd_exact.pt           state_dict() of a differently seeded LoadNet (same keys, other values)
  sd_orig_mod.pt        the same tensors under '_orig_mod.' (a torch.compile'd module's state dict)
  sd_module.pt          nn.DataParallel(model).state_dict() on CPU ('module.' prefix)
  lightning_model.ckpt  a Lightning-style dict whose 'state_dict' has the keys under 'model.'
  sd_mismatch.pt        one key missing, one unexpected, one shape and one dtype mismatch
  nan_inf.pt            float32/64/16, bfloat16 with NaN / +-Inf at seeded positions, complex64,
                        int64, a 0-dim NaN and a transposed view
  garbage_data.pt       a normal torch.save whose data/ records are overwritten with 0xFF in place
                        (still a valid zip: torch.load does not check CRCs; floats read as NaN)
  expected.json         per file: CRC32 / NaN / Inf of every materialized model tensor; key matching
                        of state dicts against arch.pt (missing / unexpected / mismatched)

"loads" covers every fixture here except arch.pt, every file in testdata/t113, the safetensors files
formats/{model,dtypes,real_st}.safetensors, the sharded checkpoints formats/sharded_st and
formats/sharded_bin, and ts113/{scripted,traced}.pt. All values come from PyTorch: torch.load /
torch.jit.load of the files (torch 1.13 has no safetensors package, so a ten-line reader hands
the raw bytes to torch.frombuffer), and load_state_dict of the TorchScript architecture loaded
from arch.pt. Nothing here comes from ckpt. The tensor names of the existing fixtures are checked
against their <name>.expected.json.

Run with torch 2.x (Debian 13's python3-torch 2.6, in the trixie chroot: testdata/README.md), it
writes only OUTDIR/load_expected.json (OUTDIR defaults to testdata/t26): the "loads" part for the
files torch 1.13 cannot read or cannot represent, every fixture in t26/ and the
torch.distributed.checkpoint directories formats/dcp and formats/dcp_2rank, plus
dtypes_new_in_torch2; no fixture is written. Its values come from torch 2.6: torch.load
(weights_only=False) of each file (its model part), torch.jit.load(...).state_dict() of the
TorchScript archives (*.ts.pt), and for a DCP directory torch.distributed.checkpoint.load into
tensors allocated from its metadata (one process, no process group), cross-checked against
format_utils.dcp_to_torch_save + torch.load. Further cross-checks there: for each DCP chunk, the
CRC-32 of the data/0 record of the torch.save zip embedded in the .distcp file at the offset the
directory's expected.json names equals the crc32 of that piece of the tensor; NaN / Inf counts of
float8 dtypes equal those of the same tensor converted to float32.

In both, for a tensor that is exactly one whole storage the crc32 is the CRC-32 the zip stores for
its data/ record, and its bytes are the storage's bytes; the bytes numpy gives equal the uint8 view
wherever numpy has the dtype. Everything is seeded, and the script re-executes itself with
PYTHONHASHSEED=0 (arch.pt's code/ lists Final constants in set order), so a rerun writes
byte-identical fixtures and json, as long as it runs from the same path and LoadNet keeps its
lines: arch.pt's .debug_pkl records hold this file's name and LoadNet's line numbers.
"""

import argparse
import collections
import io
import json
import os
import pickle
import re
import struct
import sys
import tempfile
import warnings
import zipfile
import zlib

import torch
import torch.nn as nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_fixtures as gf  # noqa: E402
# t113/whole_module.pt pickles its classes as __main__.<Class>: make them resolvable here.
from gen_fixtures import ConvBlock, FrozenNet, LazyNet, LitModel, SmallNet, TinyLM  # noqa: E402,F401
# The torch version picks what is written (genlib's T2, SET): 1.13 testdata/load, 2.x load_expected.json
# in the fixture set gen_fixtures.py wrote under it (t<major><minor>: testdata/t26, t214, t215).
from genlib import SET, T2, dtype_name, is_uninit, one_line_lists, storage_bytes, untyped  # noqa: E402

warnings.filterwarnings("ignore")  # ComplexHalf / lazy-module / DataParallel / TypedStorage / DCP chatter

MAX_FIXTURE = 50 * 1024

# Dtypes Debian's LibTorch 1.13 lacks (ScalarType added later); reported when they occur (torch 2.x).
NEW_IN_TORCH2 = ["float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32",
                 "uint64", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float8_e8m0fnu", "float4_e2m1fn_x2"]
# ckpt materializes the bits dtypes on no LibTorch: "dtype" in not_materialized.
BITS = ["bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

class LoadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3)   # 3x8x8 -> 4x6x6
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.fc1 = nn.Linear(4 * 6 * 6, 8)
        self.fc2 = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc2(self.fc1(self.act(self.bn(self.conv(x))).flatten(1)))


class Wrapper(nn.Module):
    """Holds a LoadNet under a given attribute name: the state dict a torch.compile'd module
    (OptimizedModule._orig_mod) or a LightningModule (self.model) produces, _metadata included."""

    def __init__(self, attr, inner):
        super().__init__()
        setattr(self, attr, inner)


def seeded_net(seed):
    """A LoadNet after one train-mode forward (BatchNorm running stats and counter move)."""
    torch.manual_seed(seed)
    net = LoadNet()
    with torch.no_grad():
        net(torch.randn(2, 3, 8, 8))
    return net


# ---------------------------------------------------------------------------------------------
# Values of one tensor (dtype_name, is_uninit, untyped and storage_bytes are genlib's)
# ---------------------------------------------------------------------------------------------

def not_materialized_reason(t):
    if is_uninit(t):
        return "uninitialized"
    if t.device.type == "meta":
        return "meta"
    if t.is_quantized:
        # ckpt load materializes per-tensor affine qint8 / quint8 / qint32 (at::_empty_affine_quantized);
        # per-channel and packed sub-byte ones are reported as not materialized.
        if t.qscheme() == torch.per_tensor_affine and t.dtype in (torch.qint8, torch.quint8, torch.qint32) \
                and t.is_contiguous():
            return None
        return "quantized"
    if getattr(t, "is_nested", False):
        return "nested"
    if t.layout != torch.strided:
        return str(t.layout).replace("torch.", "")
    if dtype_name(t.dtype) in BITS:
        return "dtype"
    return None


def raw_bytes(t):
    """Row-major little-endian element bytes of t, for every dtype (numpy lacks bf16, float8_*,
    complex32): the contiguous copy flattened (0-dim too) and viewed as uint8; quantized tensors
    give their stored integers (int_repr, what the file holds)."""
    assert sys.byteorder == "little"
    c = t.detach().contiguous()
    if c.is_quantized:
        c = c.int_repr()
    c = c.reshape(-1)
    data = c.view(torch.uint8).numpy().tobytes()
    assert len(data) == t.numel() * t.element_size(), (t.dtype, len(data))
    try:
        via_numpy = c.numpy().tobytes()
    except TypeError:          # "Got unsupported ScalarType ..."
        via_numpy = None
    if via_numpy is not None:
        assert via_numpy == data, t.dtype
    return data


def nan_inf(t):
    if not (t.is_floating_point() or t.is_complex()):
        return 0, 0
    if dtype_name(t.dtype).startswith("float8_"):
        f = t.to(torch.float32)
        nan, inf = int(torch.isnan(f).sum()), int(torch.isinf(f).sum())
        assert int(torch.isnan(t).sum()) == nan, t.dtype
        try:
            assert int(torch.isinf(t).sum()) == inf, t.dtype
        except (NotImplementedError, RuntimeError) as e:   # "isinf" not implemented for 'Float8_e4m3fn'
            assert "not implemented" in str(e), e
        return nan, inf
    if t.dtype == getattr(torch, "float4_e2m1fn_x2", None):
        # torch has no isnan / isinf / to(float) kernel for it (torch 2.14: "not implemented for
        # 'Float4_e2m1fn_x2'"); E2M1 encodes no NaN and no Inf (OCP Microscaling spec, section 5.3.3).
        for fn in (torch.isnan, torch.isinf):
            try:
                assert int(fn(t).sum()) == 0
            except (NotImplementedError, RuntimeError) as e:
                assert "not implemented" in str(e), e
        return 0, 0
    return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def tensor_values(t):
    data = raw_bytes(t)
    nan, inf = nan_inf(t)
    # Cross-check: for a tensor that is exactly its whole storage, the bytes are the storage's.
    if not t.is_quantized and t.is_contiguous() and t.storage_offset() == 0 and untyped(t).nbytes() == len(data):
        assert storage_bytes(t) == data
    return collections.OrderedDict(dtype=dtype_name(t.dtype), shape=list(t.shape),
                                   crc32=zlib.crc32(data) & 0xFFFFFFFF, nan=nan, inf=inf)


def whole_storage(t):
    return (not isinstance(t, str) and not not_materialized_reason(t) and not t.is_quantized
            and t.is_contiguous() and t.storage_offset() == 0 and t.numel() > 0
            and untyped(t).nbytes() == t.numel() * t.element_size())


def check_zip_crcs(path, named):
    """Independent check of the crc32 rule: a zip stores each data/ record with its CRC-32, so a
    tensor that is exactly one whole storage must have one of those CRCs."""
    if not zipfile.is_zipfile(path):
        return 0
    with zipfile.ZipFile(path) as z:
        crcs = {i.CRC for i in z.infolist() if "/data/" in i.filename}
    n = 0
    for name, t in named:
        if whole_storage(t):
            assert tensor_values(t)["crc32"] in crcs, (path, name)
            n += 1
    return n


def load_entry(rel, named, notes=None, seen=None):
    """named: (name, tensor-or-reason) in file order; seen (if given) collects the dtypes of
    materialized tensors and of the entries not materialized for their dtype."""
    tensors, not_mat = collections.OrderedDict(), collections.OrderedDict()
    for name, t in named:
        assert name not in tensors and name not in not_mat, (rel, name)
        if isinstance(t, str):
            not_mat[name] = t
            continue
        reason = not_materialized_reason(t)
        if reason:
            not_mat[name] = reason
            if reason == "dtype" and seen is not None:
                seen.add(dtype_name(t.dtype))
        else:
            tensors[name] = tensor_values(t)
            if seen is not None:
                seen.add(tensors[name]["dtype"])
    e = collections.OrderedDict(file=rel, tensors=tensors, not_materialized=not_mat)
    if notes:
        e["notes"] = notes
    return e


# ---------------------------------------------------------------------------------------------
# Reading the existing fixtures with PyTorch
# ---------------------------------------------------------------------------------------------

def model_part(obj):
    """The model tensors ckpt reports for a loaded object (see the fixtures' expected json)."""
    if isinstance(obj, nn.Module):
        return list(obj.state_dict().items())
    if isinstance(obj, dict) and "pytorch-lightning_version" in obj:
        return list(obj["state_dict"].items())
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict) and "optimizer" in obj:
        return list(obj["model"].items())
    assert isinstance(obj, dict), type(obj)
    assert all(isinstance(v, torch.Tensor) for v in obj.values())
    return list(obj.items())


def torch_file(path):
    if path.endswith(".pkl"):
        with open(path, "rb") as f:
            obj = pickle.load(f)
        assert not gf.walk_tensors(obj, [])
        return []
    return model_part(torch.load(path, map_location="cpu", weights_only=False))



# safetensors dtype -> torch dtype name; the ones torch 1.13 lacks stay unresolved ("dtype").
ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
             "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
             "C64": "complex64", "U16": "uint16", "U32": "uint32", "U64": "uint64",
             "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def st_file(path):
    """Tiny safetensors reader: u64 LE header length, JSON header, data; torch makes the tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n], object_pairs_hook=collections.OrderedDict)
    base = 8 + n
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = getattr(torch, ST_DTYPES.get(info["dtype"], "?"), None)
        if dt is None:
            out.append((name, "dtype"))
            continue
        b, e = info["data_offsets"]
        if e == b:
            t = torch.empty(info["shape"], dtype=dt)
        else:
            t = torch.frombuffer(bytearray(data[base + b:base + e]), dtype=dt).reshape(info["shape"])
        assert t.numel() * t.element_size() == e - b, (path, name)
        out.append((name, t))
    return out


def sharded(dirpath):
    idx = [f for f in os.listdir(dirpath) if f.endswith(".index.json")]
    assert len(idx) == 1, idx
    with open(os.path.join(dirpath, idx[0])) as f:
        weight_map = json.load(f)["weight_map"]
    shards = sorted(set(weight_map.values()))
    out = []
    for s in shards:
        p = os.path.join(dirpath, s)
        named = st_file(p) if s.endswith(".safetensors") else torch_file(p)
        check_zip_crcs(p, named)
        for name, _t in named:
            assert weight_map[name] == s, (dirpath, name, s)
        out.extend(named)
    assert sorted(n for n, _ in out) == sorted(weight_map)
    return out


def expected_names(testdata, rel):
    """Tensor names the fixture's own <name>.expected.json lists (the model part ckpt reports)."""
    p = os.path.join(testdata, rel)
    if os.path.isdir(p):
        jp = p + ".expected.json"
    else:
        jp = os.path.splitext(p)[0] + ".expected.json"
    with open(jp) as f:
        return [t["name"] for t in json.load(f)["tensors"]]


def dcp_dir(dirpath, expected):
    """Every tensor of a torch.distributed.checkpoint directory (torch 2.x), in .metadata order, read in
    this one process (no process group: DCP warns and loads locally)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, TensorStorageMetadata

    md = dcp.FileSystemReader(dirpath).read_metadata()
    sd = collections.OrderedDict()
    for name, m in md.state_dict_metadata.items():
        if isinstance(m, TensorStorageMetadata):
            # NaN / -1 fill: a region dcp.load did not write would show (and fail the cross-check)
            fill = float("nan") if m.properties.dtype.is_floating_point else -1
            sd[name] = torch.full(tuple(m.size), fill, dtype=m.properties.dtype)
        else:
            assert isinstance(m, BytesStorageMetadata), (name, type(m))
    dcp.load(sd, storage_reader=dcp.FileSystemReader(dirpath))

    # the same through DCP's own converter to a torch.save file
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "dcp.pt")
        dcp_to_torch_save(dirpath, p)
        conv = torch.load(p, map_location="cpu", weights_only=False)
    for name, t in sd.items():
        c = conv[name]
        assert c.dtype == t.dtype and c.shape == t.shape and raw_bytes(c) == raw_bytes(t), name

    # each chunk's region in the .distcp file is a torch.save zip whose data/0 CRC is the piece's crc32
    chunks = 0
    for e in expected["tensors"]:
        t = sd[e["name"]]
        for ch in e["chunks"]:
            piece = t
            for dim, (off, size) in enumerate(zip(ch["offsets"], ch["sizes"])):
                piece = piece.narrow(dim, off, size)
            with open(os.path.join(dirpath, ch["file"]), "rb") as f:
                f.seek(ch["offset"])
                region = f.read(ch["length"])
            with zipfile.ZipFile(io.BytesIO(region)) as z:
                crcs = [i.CRC for i in z.infolist() if i.filename.endswith("/data/0")]
            assert len(crcs) == 1 and piece.numel() * piece.element_size() == ch["storage_bytes"], e["name"]
            assert crcs[0] == zlib.crc32(raw_bytes(piece)) & 0xFFFFFFFF, (dirpath, e["name"], ch)
            chunks += 1
    return list(sd.items()), chunks


def fixture_json(testdata, rel):
    """The fixture's own <name>.expected.json (its "tensors" are the model part ckpt reports)."""
    p = os.path.join(testdata, rel)
    jp = p + ".expected.json" if os.path.isdir(p) else os.path.splitext(p)[0] + ".expected.json"
    with open(jp) as f:
        return json.load(f, object_pairs_hook=collections.OrderedDict)


def loads_of(testdata, rels, seen=None):
    """A "loads" entry per fixture (rels: paths under testdata), its tensor names checked against the
    fixture's expected json, in the same order unless the format has none of its own (safetensors:
    header order; DCP: .metadata order)."""
    entries = []
    for rel in rels:
        p = os.path.join(testdata, rel)
        fx = fixture_json(testdata, rel)
        want = [t["name"] for t in fx["tensors"]]
        notes = None
        in_order = not rel.endswith(".safetensors") and not rel.endswith("sharded_st")
        if os.path.isdir(p) and os.path.exists(os.path.join(p, ".metadata")):
            named, chunks = dcp_dir(p, fx)
            notes = ("torch.distributed.checkpoint directory read with dcp.load(state_dict of "
                     "torch.full tensors shaped from .metadata) in one process without a process "
                     "group, equal to format_utils.dcp_to_torch_save + torch.load; %d chunk CRCs "
                     "checked against the zips embedded in the .distcp files. Bytes entries are not "
                     "tensors." % chunks)
            in_order = False
        elif os.path.isdir(p):
            named = sharded(p)
        elif rel.endswith(".safetensors"):
            named = st_file(p)
        elif rel.startswith("ts113/") or rel.endswith(".ts.pt"):
            named = list(torch.jit.load(p, map_location="cpu").state_dict().items())
        else:
            named = torch_file(p)
        if os.path.isfile(p):
            whole = check_zip_crcs(p, named)
            print("%-26s %2d of %2d tensors are whole storages, zip CRC checked" % (rel, whole, len(named)))
        assert sorted(n for n, _ in named) == sorted(want), (rel, [n for n, _ in named], want)
        if in_order:
            assert [n for n, _ in named] == want, rel
        entries.append(load_entry(rel, named, notes=notes, seen=seen))
    return entries


def t113_rels(testdata):
    """What torch 1.13 reads: t113/, the safetensors and sharded formats, ts113's scripted and traced."""
    t113 = os.path.join(testdata, "t113")
    return ["t113/" + f for f in sorted(os.listdir(t113)) if not f.endswith(".expected.json")] + \
        ["formats/model.safetensors", "formats/dtypes.safetensors", "formats/real_st.safetensors",
         "formats/sharded_st", "formats/sharded_bin", "ts113/scripted.pt", "ts113/traced.pt"]


def t2_rels(testdata, fixture_set):
    """What only torch 2.x reads: the fixtures of a torch 2 set (files and DCP directories with their
    <name>.expected.json) and the DCP directories of formats/ that this torch version wrote."""
    d = os.path.join(testdata, fixture_set)
    rels = [fixture_set + "/" + f for f in sorted(os.listdir(d))
            if not f.endswith(".json") and (os.path.isfile(os.path.join(d, f))
                                            or os.path.exists(os.path.join(d, f + ".expected.json")))]
    for dcp in ("formats/dcp", "formats/dcp_2rank"):
        with open(os.path.join(testdata, dcp + ".expected.json")) as f:
            if json.load(f)["torch_version"] == torch.__version__:
                rels.append(dcp)
    return rels


# ---------------------------------------------------------------------------------------------
# New fixtures
# ---------------------------------------------------------------------------------------------

class Out:
    def __init__(self, outdir):
        self.outdir = outdir
        self.written = []

    def path(self, name):
        return os.path.join(self.outdir, name)

    def save(self, name, obj):
        p = self.path(name)
        torch.save(obj, p)
        self.note(name)
        return p

    def note(self, name):
        size = os.path.getsize(self.path(name))
        assert size < MAX_FIXTURE, (name, size)
        self.written.append((name, size))


def same_values(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and raw_bytes(a) == raw_bytes(b)


def check_loaded(live, loaded):
    assert list(live) == list(loaded), (list(live), list(loaded))
    for k, v in live.items():
        assert same_values(v, loaded[k]), k


def data_records(path):
    """(name, data start, size) of every */data/* record (stored, uncompressed)."""
    out = []
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for i in z.infolist():
            if "/data/" not in i.filename:
                continue
            assert i.compress_type == zipfile.ZIP_STORED and i.compress_size == i.file_size
            f.seek(i.header_offset)
            h = f.read(30)
            assert h[:4] == b"PK\x03\x04"
            name_len, extra_len = struct.unpack("<HH", h[26:30])
            out.append((i.filename, i.header_offset + 30 + name_len + extra_len, i.compress_size))
    return out


def fx_arch(out):
    net = seeded_net(0)
    scripted = torch.jit.script(net)
    p = out.path("arch.pt")
    torch.jit.save(scripted, p)
    out.note("arch.pt")
    arch = torch.jit.load(p, map_location="cpu")
    assert list(arch.state_dict()) == list(net.state_dict())
    check_loaded(net.state_dict(), arch.state_dict())
    return arch


def fx_state_dicts(out):
    """sd_exact / sd_orig_mod / sd_module / lightning_model / sd_mismatch; returns match inputs."""
    net = seeded_net(1)
    sd = net.state_dict()
    matches = []
    notes = {}

    out.save("sd_exact.pt", sd)
    notes["sd_exact.pt"] = "state_dict() of LoadNet seeded 1 (arch.pt is seeded 0): same keys, other values."
    matches.append(("sd_exact.pt", None, None))

    orig = Wrapper("_orig_mod", net).state_dict()
    assert list(orig) == ["_orig_mod." + k for k in sd]
    out.save("sd_orig_mod.pt", orig)
    notes["sd_orig_mod.pt"] = ("sd_exact's tensors under '_orig_mod.' (state_dict() of a module "
                               "holding the net as _orig_mod, as torch.compile's OptimizedModule does).")
    matches.append(("sd_orig_mod.pt", "_orig_mod.", None))

    dp = nn.DataParallel(net).state_dict()
    assert list(dp) == ["module." + k for k in sd]
    out.save("sd_module.pt", dp)
    notes["sd_module.pt"] = "nn.DataParallel(net).state_dict() on CPU: sd_exact's tensors under 'module.'."
    matches.append(("sd_module.pt", "module.", None))

    lit_sd = Wrapper("model", net).state_dict()
    assert list(lit_sd) == ["model." + k for k in sd]
    lit = collections.OrderedDict([
        ("epoch", 3), ("global_step", 120), ("pytorch-lightning_version", "2.1.0"),
        ("state_dict", lit_sd), ("optimizer_states", []), ("lr_schedulers", []), ("callbacks", {}),
        ("loops", {}), ("hyper_parameters", {"lr": 0.1})])
    out.save("lightning_model.ckpt", lit)
    notes["lightning_model.ckpt"] = ("Lightning-style dict (epoch, global_step, pytorch-lightning_version, "
                                     "state_dict, ...): ckpt uses 'state_dict', keys under 'model.'.")
    matches.append(("lightning_model.ckpt", "model.", None))

    mm = net.state_dict()   # fresh OrderedDict, _metadata kept
    del mm["fc1.bias"]
    mm["fc2.bias"] = torch.arange(6, dtype=torch.float32) / 8
    mm["conv.weight"] = mm["conv.weight"].to(torch.float64)
    mm["extra.weight"] = torch.linspace(-1, 1, 6).reshape(2, 3)
    out.save("sd_mismatch.pt", mm)
    notes["sd_mismatch.pt"] = ("sd_exact with fc1.bias removed (missing), extra.weight added (unexpected), "
                               "fc2.bias of shape [6] (model: [5]) and conv.weight as float64 (mismatched).")
    matches.append(("sd_mismatch.pt", None, None))
    return matches, notes


def poke(t, g, nan=0, pinf=0, ninf=0):
    """Put NaN / +Inf / -Inf at distinct seeded positions of t (in place, row-major index)."""
    pos = torch.randperm(t.numel(), generator=g)[:nan + pinf + ninf].tolist()
    flat = t.view(-1)
    for i, p in enumerate(pos):
        flat[p] = float("nan") if i < nan else (float("inf") if i < nan + pinf else float("-inf"))
    return t


def fx_nan_inf(out):
    g = torch.Generator().manual_seed(1234)
    d = collections.OrderedDict()
    d["f32"] = poke(torch.randn(4, 5, generator=g), g, nan=2, pinf=1, ninf=1)
    d["f64"] = poke(torch.randn(3, 4, generator=g, dtype=torch.float64), g, nan=1, pinf=1, ninf=2)
    d["f16"] = poke(torch.randn(2, 8, generator=g).to(torch.float16), g, nan=3, pinf=1, ninf=0)
    d["bf16"] = poke(torch.randn(3, 3, generator=g).to(torch.bfloat16), g, nan=1, pinf=0, ninf=1)
    c = torch.randn(2, 3, generator=g, dtype=torch.complex64)
    i, j = torch.randperm(6, generator=g)[:2].tolist()
    r = torch.view_as_real(c).view(6, 2)
    r[i, 0] = float("nan")     # NaN in the real part of element i
    r[j, 1] = float("inf")     # +Inf in the imaginary part of element j != i
    d["c64"] = c
    d["i64"] = torch.randint(-1000, 1000, (7,), generator=g, dtype=torch.int64)
    d["scalar_nan"] = torch.tensor(float("nan"))
    d["f32_t"] = d["f32"].t()  # a transposed view of f32's storage: crc over the view's row-major order
    out.save("nan_inf.pt", d)
    loaded = torch.load(out.path("nan_inf.pt"))
    check_loaded(d, loaded)
    assert loaded["f32_t"].storage().data_ptr() == loaded["f32"].storage().data_ptr()
    counts = {k: (int(torch.isnan(v).sum()), int(torch.isinf(v).sum())) for k, v in loaded.items()
              if v.is_floating_point() or v.is_complex()}
    assert counts == {"f32": (2, 2), "f64": (1, 3), "f16": (3, 1), "bf16": (1, 1), "c64": (1, 1),
                      "scalar_nan": (1, 0), "f32_t": (2, 2)}, counts
    return ("float32 [4,5] (2 NaN, +Inf, -Inf), float64 [3,4] (NaN, +Inf, 2 -Inf), float16 [2,8] "
            "(3 NaN, +Inf), bfloat16 [3,3] (NaN, -Inf), complex64 [2,3] (NaN real part of one element, "
            "+Inf imaginary part of another), int64 [7], 0-dim float32 NaN, f32_t = f32.t() (a view "
            "sharing f32's storage), positions from torch.Generator seed 1234.")


def fx_garbage(out):
    net = seeded_net(2)
    sd = net.state_dict()
    p = out.save("garbage_data.pt", sd)
    recs = data_records(p)
    assert len(recs) == len(sd)
    with open(p, "r+b") as f:
        for _name, start, size in recs:
            f.seek(start)
            f.write(b"\xff" * size)
    with open(p, "rb") as f:
        data = f.read()
    for _name, start, size in recs:
        assert data[start:start + size] == b"\xff" * size
    with zipfile.ZipFile(p) as z:
        assert z.testzip() in {n for n, _s, _z in recs}   # the CRCs in the zip are now wrong
    loaded = torch.load(p)                                  # ...and torch.load does not care
    assert list(loaded) == list(sd)
    for k, v in loaded.items():
        assert v.shape == sd[k].shape and v.dtype == sd[k].dtype
        if v.is_floating_point():
            assert bool(torch.isnan(v).all()), k
        else:
            assert bool((v == -1).all()), k
    return ("LoadNet state dict saved normally, then every data/ record overwritten in place with 0xFF "
            "(zip CRCs now wrong; torch.load does not check them): float32 values are NaN "
            "(0xFFFFFFFF), num_batches_tracked is -1.")


# ---------------------------------------------------------------------------------------------
# Key matching against arch.pt
# ---------------------------------------------------------------------------------------------

INCOMPAT = re.compile(r"size mismatch for ([^:]+): copying a param with shape")


def compute_match(arch, eager, rel, file_sd, suggested_strip, strip_prefix=None):
    sd = collections.OrderedDict(file_sd.items())
    if hasattr(file_sd, "_metadata"):
        sd._metadata = collections.OrderedDict(file_sd._metadata)
    if strip_prefix:
        consume_prefix_in_state_dict_if_present(sd, strip_prefix)
    model = arch.state_dict()
    shape_mm = sorted(k for k in sd if k in model and sd[k].shape != model[k].shape)
    dtype_mm = sorted(k for k in sd if k in model and sd[k].dtype != model[k].dtype)
    mismatched = sorted(set(shape_mm) | set(dtype_mm))

    # strict=True on the full dict: its error names the shape mismatches (and missing/unexpected)
    try:
        arch.load_state_dict(sd, strict=True)
        said_shape = []
    except RuntimeError as e:
        said_shape = sorted(INCOMPAT.findall(str(e)))
    assert said_shape == shape_mm, (rel, said_shape, shape_mm)

    kept = collections.OrderedDict((k, v) for k, v in sd.items() if k not in mismatched)
    if hasattr(sd, "_metadata"):
        kept._metadata = sd._metadata
    r = arch.load_state_dict(kept, strict=False)
    missing = sorted(set(r.missing_keys) - set(mismatched))
    unexpected = sorted(r.unexpected_keys)
    # The same by plain key sets.
    assert missing == sorted(set(model) - set(sd)), rel
    assert unexpected == sorted(set(sd) - set(model)), rel
    re_ = eager.load_state_dict(kept, strict=False)
    eager_missing = sorted(set(re_.missing_keys) - set(mismatched))
    assert sorted(re_.unexpected_keys) == unexpected
    assert set(missing) - set(eager_missing) <= {"bn.num_batches_tracked"}, (rel, missing, eager_missing)

    if suggested_strip:
        assert all(k.startswith(suggested_strip) for k in sd)
        assert sorted(k[len(suggested_strip):] for k in sd) == sorted(model)
    e = collections.OrderedDict(file="load/" + rel, model="load/arch.pt")
    if strip_prefix:
        e["strip_prefix"] = strip_prefix
    e["missing"] = missing
    e["unexpected"] = unexpected
    e["mismatched"] = mismatched
    e["mismatched_detail"] = collections.OrderedDict(
        (k, collections.OrderedDict(
            file=collections.OrderedDict(dtype=dtype_name(sd[k].dtype), shape=list(sd[k].shape)),
            model=collections.OrderedDict(dtype=dtype_name(model[k].dtype), shape=list(model[k].shape))))
        for k in mismatched)
    e["suggested_strip_prefix"] = suggested_strip
    e["suggested_add_prefix"] = None
    e["eager_missing"] = eager_missing
    return e


def file_state_dict(path):
    obj = torch.load(path, map_location="cpu")
    if "pytorch-lightning_version" in obj:
        return obj["state_dict"]
    return obj


# ---------------------------------------------------------------------------------------------
# expected.json
# ---------------------------------------------------------------------------------------------

# What the json's fields mean, as written into it; torch 2.x covers more dtypes.
CRC_DOC = ("zlib.crc32 of the tensor's elements in row-major order as raw little-endian bytes "
           "(t.contiguous()), bf16/f16 as their 2-byte patterns, bool as 1 byte, complex as (re, im)")
NAN_INF_DOC = ("nan = int(torch.isnan(t).sum()), inf = int(torch.isinf(t).sum()) (+Inf and -Inf) for "
               "floating and complex dtypes (a complex element counts if either part is NaN / Inf), "
               "0 for other dtypes")
NOT_MAT_DOC = ("state-dict entries that are not materialized strided tensors, with a one-word reason: "
               "'uninitialized' (lazy UninitializedParameter / UninitializedBuffer), 'meta', "
               "'quantized', the layout for sparse tensors ('sparse_coo'), 'nested', or 'dtype' "
               "(a safetensors dtype torch 1.13 lacks). They have no crc32.")
MATCH_DOC = ("Key matching of the file's model tensors against arch.pt's state_dict() keys, as "
             "load_state_dict(strict=True) does. missing = model keys the file lacks; unexpected = file "
             "keys the model lacks; mismatched = keys in both whose shape or dtype differ (not in "
             "missing / unexpected). missing / unexpected are what torch.jit.load('arch.pt')"
             ".load_state_dict(file_sd minus mismatched keys, strict=False) returns, with the "
             "mismatched keys taken out of missing; the shape mismatches are those its strict=True "
             "error names ('size mismatch for ...'); dtype mismatches are compared directly (torch "
             "converts them silently). All lists sorted. suggested_strip_prefix: the prefix that, "
             "stripped from every file key, makes the keys match (known by construction, checked); "
             "suggested_add_prefix: likewise for adding (null throughout). strip_prefix (optional): "
             "the prefix stripped before matching (torch.nn.modules.utils."
             "consume_prefix_in_state_dict_if_present). mismatched_detail: dtype and shape of each "
             "mismatched key in the file and in the model. eager_missing: what the eager nn.Module's "
             "load_state_dict reports as missing; it lacks 'bn.num_batches_tracked' when the state "
             "dict has no _metadata version for the BatchNorm's own prefix (BatchNorm fills in a "
             "version<2 checkpoint's counter), which the TorchScript module does not do.")


CRC_DOC_T2 = ("zlib.crc32 of the tensor's elements in row-major order as raw little-endian bytes "
              "(t.contiguous()), bf16/f16 as their 2-byte patterns, float8_* as their 1-byte patterns, "
              "uint16/32/64 as unsigned little-endian integers, bool as 1 byte, complex as (re, im) "
              "(complex32: two float16 patterns); the bytes are t.contiguous().reshape(-1).view(torch.uint8)")
NAN_INF_DOC_T2 = ("nan = int(torch.isnan(t).sum()), inf = int(torch.isinf(t).sum()) (+Inf and -Inf) for "
                  "floating and complex dtypes (a complex element counts if either part is NaN / Inf), "
                  "0 for other dtypes; torch 2.6 has no isinf for float8_e4m3fn / float8_e4m3fnuz / "
                  "float8_e5m2fnuz (formats without Inf), so float8 counts are those of t.to(torch.float32) "
                  "(exact; checked equal to isnan / isinf of t wherever torch has them)")
NOT_MAT_DOC_T2 = ("state-dict entries that are not materialized strided tensors, with a one-word reason: "
                  "'uninitialized' (lazy UninitializedParameter / UninitializedBuffer), 'meta', "
                  "'quantized', the layout for sparse tensors ('sparse_coo'), 'nested', or 'dtype' "
                  "(bits1x8 / bits2x4 / bits4x2 / bits8 / bits16: ckpt materializes bits dtypes on no "
                  "LibTorch). They have no crc32.")
NEW_DOC = ("dtypes_new_in_torch2: the dtypes occurring in these loads that Debian's LibTorch 1.13 lacks; "
           "a ckpt linked against LibTorch 1.13 reports such tensors as skipped ('dtype ... is unknown "
           "to LibTorch 1.13.0')")


def write_json(path, doc):
    text = one_line_lists(json.dumps(doc, indent=1))   # shapes, key lists
    # and each tensor's {"dtype", "shape", "crc32", "nan", "inf"} on one line
    text = re.sub(r'\{\n\s*("dtype": [^{}\n]*(?:\n\s*"[a-z0-9_]+": [^{}\n]*)*)\n\s*\}',
                  lambda m: "{" + re.sub(r",\n\s*", ", ", m.group(1)) + "}", text)
    assert json.loads(text) == doc
    with open(path, "w") as f:
        f.write(text + "\n")


def main_t113(outdir):
    """testdata/load: the fixtures, their values and those of the torch 1.13 files, key matching."""
    out = Out(outdir)
    arch = fx_arch(out)
    match_specs, notes = fx_state_dicts(out)
    notes["nan_inf.pt"] = fx_nan_inf(out)
    notes["garbage_data.pt"] = fx_garbage(out)

    loads = []
    for name in sorted(notes):
        p = out.path(name)
        named = model_part(torch.load(p, map_location="cpu"))
        if name != "garbage_data.pt":   # its zip CRCs are those of the values before the overwrite
            assert check_zip_crcs(p, named) == len(named) - (name == "nan_inf.pt"), name  # f32_t: a view
        loads.append(load_entry("load/" + name, named, notes=notes[name]))
    loads += loads_of(HERE, t113_rels(HERE))

    eager = LoadNet()
    matches = []
    for name, strip, _add in match_specs:
        sd = file_state_dict(out.path(name))
        matches.append(compute_match(arch, eager, name, sd, strip))
    sd = file_state_dict(out.path("sd_orig_mod.pt"))
    m = compute_match(arch, eager, "sd_orig_mod.pt", sd, None, strip_prefix="_orig_mod.")
    assert not (m["missing"] or m["unexpected"] or m["mismatched"] or m["eager_missing"])
    matches.append(m)

    doc = collections.OrderedDict()
    doc["generator"] = "testdata/gen_load.py"
    doc["torch_version"] = torch.__version__
    doc["crc32"] = CRC_DOC
    doc["nan_inf"] = NAN_INF_DOC
    doc["not_materialized"] = NOT_MAT_DOC
    doc["match"] = MATCH_DOC
    doc["loads"] = loads
    doc["matches"] = matches
    jp = out.path("expected.json")
    write_json(jp, doc)

    total = 0
    for name, size in out.written:
        total += size
        print("%-24s %7d bytes" % (name, size))
    print("%d fixtures, %d bytes; expected.json: %d loads, %d matches, %d bytes; torch %s -> %s" % (
        len(out.written), total, len(loads), len(matches), os.path.getsize(jp), torch.__version__, outdir))


def main_t2(outdir):
    """testdata/<set>/load_expected.json: the values torch 2.x reads from its fixture set and the DCP
    directories it wrote."""
    seen = set()
    entries = loads_of(HERE, t2_rels(HERE, os.path.basename(os.path.normpath(outdir))), seen)
    new = [d for d in NEW_IN_TORCH2 if d in seen]

    doc = collections.OrderedDict()
    doc["generator"] = "testdata/gen_load.py"
    doc["torch_version"] = torch.__version__
    doc["crc32"] = CRC_DOC_T2
    doc["nan_inf"] = NAN_INF_DOC_T2
    doc["not_materialized"] = NOT_MAT_DOC_T2
    doc["dtypes_new_in_torch2_doc"] = NEW_DOC
    doc["dtypes_new_in_torch2"] = new
    doc["loads"] = entries
    jp = os.path.join(outdir, "load_expected.json")
    write_json(jp, doc)

    for e in entries:
        print("%-26s %2d tensors, %2d not materialized" % (e["file"], len(e["tensors"]),
                                                           len(e["not_materialized"])))
    print("%d loads, %d tensors, new dtypes %s; %d bytes; torch %s -> %s" % (
        len(entries), sum(len(e["tensors"]) for e in entries), new, os.path.getsize(jp),
        torch.__version__, jp))


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":   # arch.pt's code/ lists Final constants in set order
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(HERE, SET if T2 else "load"))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    if T2:
        main_t2(args.outdir)
    else:
        torch.use_deterministic_algorithms(True)
        main_t113(args.outdir)


if __name__ == "__main__":
    main()
