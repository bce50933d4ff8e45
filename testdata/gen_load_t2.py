#!/usr/bin/env python3
"""Write t26/load_expected.json: the values torch 2.6 reads from the torch 2.6 fixtures, for `ckpt load`.

The counterpart of gen_load.py (torch 1.13) for the files torch 1.13 cannot read or cannot represent:
every fixture in t26/ and the torch.distributed.checkpoint directories formats/dcp and
formats/dcp_2rank. Debian 12 only ships torch 1.13, so this runs in the Debian 13 (trixie) chroot, which
ships python3-torch 2.6:

    mount -t proc proc /work/chroot-trixie/proc
    mkdir -p /work/chroot-trixie/gen
    mount --bind /work/main/testdata /work/chroot-trixie/gen
    chroot /work/chroot-trixie python3 /gen/gen_load_t2.py /gen      # TESTDATA, the folder of this file
    umount /work/chroot-trixie/gen; umount /work/chroot-trixie/proc

Writes only TESTDATA/t26/load_expected.json (format: testdata/EXPECTED.md, section "testdata/load/", the
"loads" part; no "matches"). It reads the fixtures and changes none of them.

All values come from PyTorch 2.6: torch.load(weights_only=False) of each file (its model part, as in
gen_load.py), torch.jit.load(...).state_dict() of the TorchScript archives (*.ts.pt), and for a DCP
directory torch.distributed.checkpoint.load into tensors allocated from its metadata (one process, no
process group), cross-checked against format_utils.dcp_to_torch_save + torch.load. Nothing here comes
from ckpt. The tensor names are checked against each fixture's own <name>.expected.json.

Cross-checks (assertions): for a tensor that is exactly one whole storage the crc32 is the CRC-32 the
zip stores for its data/ record, and its bytes are the storage's bytes; for each DCP chunk, the CRC-32
of the data/0 record of the torch.save zip embedded in the .distcp file at the offset the directory's
expected.json names equals the crc32 of that piece of the tensor; the bytes numpy gives equal the
uint8 view wherever numpy has the dtype; NaN / Inf counts of float8 dtypes equal those of the same
tensor converted to float32.

Reading is deterministic, so a rerun writes a byte-identical json.
"""

import argparse
import collections
import io
import json
import os
import re
import sys
import tempfile
import warnings
import zipfile
import zlib

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # ComplexHalf / TypedStorage / DCP-without-process-group chatter

UNINIT = nn.parameter.UninitializedTensorMixin

# Dtypes Debian's LibTorch 1.13 lacks (ScalarType added later); reported when they occur.
NEW_IN_TORCH2 = ["float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32",
                 "uint64", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]
BITS = ["bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]

CRC_DOC = ("zlib.crc32 of the tensor's elements in row-major order as raw little-endian bytes "
           "(t.contiguous()), bf16/f16 as their 2-byte patterns, float8_* as their 1-byte patterns, "
           "uint16/32/64 as unsigned little-endian integers, bool as 1 byte, complex as (re, im) "
           "(complex32: two float16 patterns); the bytes are t.contiguous().reshape(-1).view(torch.uint8)")
NAN_INF_DOC = ("nan = int(torch.isnan(t).sum()), inf = int(torch.isinf(t).sum()) (+Inf and -Inf) for "
               "floating and complex dtypes (a complex element counts if either part is NaN / Inf), "
               "0 for other dtypes; torch 2.6 has no isinf for float8_e4m3fn / float8_e4m3fnuz / "
               "float8_e5m2fnuz (formats without Inf), so float8 counts are those of t.to(torch.float32) "
               "(exact; checked equal to isnan / isinf of t wherever torch has them)")
NOT_MAT_DOC = ("state-dict entries that are not materialized strided tensors, with a one-word reason: "
               "'uninitialized' (lazy UninitializedParameter / UninitializedBuffer), 'meta', "
               "'quantized', the layout for sparse tensors ('sparse_coo'), 'nested', or 'dtype' "
               "(bits1x8 / bits2x4 / bits4x2 / bits8 / bits16: ckpt materializes bits dtypes on no "
               "LibTorch). They have no crc32.")
NEW_DOC = ("dtypes_new_in_torch2: the dtypes occurring in these loads that Debian's LibTorch 1.13 lacks; "
           "a ckpt linked against LibTorch 1.13 reports such tensors as skipped ('dtype ... is unknown "
           "to LibTorch 1.13.0')")


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def not_materialized_reason(t):
    if isinstance(t, UNINIT):
        return "uninitialized"
    if t.device.type == "meta":
        return "meta"
    if t.is_quantized:
        return "quantized"
    if getattr(t, "is_nested", False):
        return "nested"
    if t.layout != torch.strided:
        return str(t.layout).replace("torch.", "")
    if dtype_name(t.dtype) in BITS:
        return "dtype"
    return None


def storage_bytes(t):
    """All bytes of the storage behind t."""
    st = t.untyped_storage()
    u = torch.empty(0, dtype=torch.uint8)
    u.set_(st, 0, (st.nbytes(),), (1,))
    return u.numpy().tobytes()


def raw_bytes(t):
    """Row-major little-endian element bytes of t, for every dtype (numpy lacks bf16, float8_*,
    complex32): the contiguous copy flattened (0-dim too) and viewed as uint8."""
    assert sys.byteorder == "little"
    c = t.detach().contiguous().reshape(-1)
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
    return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def tensor_values(t):
    data = raw_bytes(t)
    nan, inf = nan_inf(t)
    # Cross-check: for a tensor that is exactly its whole storage, the bytes are the storage's.
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == len(data):
        assert storage_bytes(t) == data
    return collections.OrderedDict(dtype=dtype_name(t.dtype), shape=list(t.shape),
                                   crc32=zlib.crc32(data) & 0xFFFFFFFF, nan=nan, inf=inf)


def whole_storage(t):
    return (not isinstance(t, str) and not not_materialized_reason(t) and t.is_contiguous()
            and t.storage_offset() == 0 and t.numel() > 0
            and t.untyped_storage().nbytes() == t.numel() * t.element_size())


def check_zip_crcs(path, named):
    """Independent check of the crc32 rule: a zip stores each data/ record with its CRC-32, so a
    tensor that is exactly one whole storage must have one of those CRCs."""
    with zipfile.ZipFile(path) as z:
        crcs = {i.CRC for i in z.infolist() if "/data/" in i.filename}
    n = 0
    for name, t in named:
        if whole_storage(t):
            assert tensor_values(t)["crc32"] in crcs, (path, name)
            n += 1
    return n


def load_entry(rel, named, seen, notes=None):
    """named: (name, tensor-or-reason) in file order; seen collects the dtypes of materialized
    tensors and of the entries not materialized for their dtype."""
    tensors, not_mat = collections.OrderedDict(), collections.OrderedDict()
    for name, t in named:
        assert name not in tensors and name not in not_mat, (rel, name)
        if isinstance(t, str):
            not_mat[name] = t
            continue
        reason = not_materialized_reason(t)
        if reason:
            not_mat[name] = reason
            if reason == "dtype":
                seen.add(dtype_name(t.dtype))
        else:
            tensors[name] = tensor_values(t)
            seen.add(tensors[name]["dtype"])
    e = collections.OrderedDict(file=rel, tensors=tensors, not_materialized=not_mat)
    if notes:
        e["notes"] = notes
    return e


# ---------------------------------------------------------------------------------------------
# Reading the fixtures with PyTorch 2.6
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
    if path.endswith(".ts.pt"):
        return list(torch.jit.load(path, map_location="cpu").state_dict().items())
    return model_part(torch.load(path, map_location="cpu", weights_only=False))


def dcp_dir(dirpath, expected):
    """Every tensor of a torch.distributed.checkpoint directory, in .metadata order, read in this one
    process (no process group: DCP warns and loads locally)."""
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
    p = os.path.join(testdata, rel)
    jp = p + ".expected.json" if os.path.isdir(p) else os.path.splitext(p)[0] + ".expected.json"
    with open(jp) as f:
        return json.load(f, object_pairs_hook=collections.OrderedDict)


def loads(testdata, seen):
    t26 = os.path.join(testdata, "t26")
    rels = ["t26/" + f for f in sorted(os.listdir(t26)) if not f.endswith(".json")]
    rels += ["formats/dcp", "formats/dcp_2rank"]
    entries = []
    for rel in rels:
        p = os.path.join(testdata, rel)
        fx = fixture_json(testdata, rel)
        want = [t["name"] for t in fx["tensors"]]
        notes = None
        if os.path.isdir(p):
            named, chunks = dcp_dir(p, fx)
            notes = ("torch.distributed.checkpoint directory read with dcp.load(state_dict of "
                     "torch.full tensors shaped from .metadata) in one process without a process "
                     "group, equal to format_utils.dcp_to_torch_save + torch.load; %d chunk CRCs "
                     "checked against the zips embedded in the .distcp files. Bytes entries are not "
                     "tensors." % chunks)
            assert sorted(n for n, _ in named) == sorted(want), (rel, [n for n, _ in named], want)
        else:
            named = torch_file(p)
            n = check_zip_crcs(p, named)
            assert [n for n, _ in named] == want, (rel, [n for n, _ in named], want)   # same order too
            print("%-26s %2d of %2d tensors are whole storages, zip CRC checked" % (rel, n, len(named)))
        entries.append(load_entry(rel, named, seen, notes))
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("testdata", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    assert torch.__version__.startswith("2."), torch.__version__
    torch.set_num_threads(1)

    seen = set()
    entries = loads(args.testdata, seen)
    new = [d for d in NEW_IN_TORCH2 if d in seen]

    doc = collections.OrderedDict()
    doc["generator"] = "testdata/gen_load_t2.py"
    doc["torch_version"] = torch.__version__
    doc["crc32"] = CRC_DOC
    doc["nan_inf"] = NAN_INF_DOC
    doc["not_materialized"] = NOT_MAT_DOC
    doc["dtypes_new_in_torch2_doc"] = NEW_DOC
    doc["dtypes_new_in_torch2"] = new
    doc["loads"] = entries
    jp = os.path.join(args.testdata, "t26", "load_expected.json")
    text = json.dumps(doc, indent=1)
    # lists of numbers / strings (shapes, dtype lists) on one line each
    text = re.sub(r"\[\s*((?:-?\d+|\"[^\"\n]*\")(?:,\s*(?:-?\d+|\"[^\"\n]*\"))*)\s*\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    # and each tensor's {"dtype", "shape", "crc32", "nan", "inf"} on one line
    text = re.sub(r'\{\n\s*("dtype": [^{}\n]*(?:\n\s*"[a-z0-9_]+": [^{}\n]*)*)\n\s*\}',
                  lambda m: "{" + re.sub(r",\n\s*", ", ", m.group(1)) + "}", text)
    assert json.loads(text) == doc
    with open(jp, "w") as f:
        f.write(text + "\n")

    for e in entries:
        print("%-26s %2d tensors, %2d not materialized" % (e["file"], len(e["tensors"]),
                                                           len(e["not_materialized"])))
    print("%d loads, %d tensors, new dtypes %s; %d bytes; torch %s -> %s" % (
        len(entries), sum(len(e["tensors"]) for e in entries), new, os.path.getsize(jp),
        torch.__version__, jp))


if __name__ == "__main__":
    main()
