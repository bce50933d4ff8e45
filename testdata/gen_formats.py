#!/usr/bin/python3
"""Write safetensors files, Hugging Face sharded checkpoints, torch.distributed.checkpoint (DCP)
directories and `ckpt diff` pairs, with the numbers PyTorch reports about them.

    /usr/bin/python3 testdata/gen_formats.py [OUTDIR]      # OUTDIR defaults to testdata/formats

Stage 1 (Debian 12, torch 1.13, no safetensors package): safetensors files are written BY HAND
following the reference implementation (huggingface/safetensors, safetensors/src/tensor.rs
`prepare` / `Metadata::validate`), plus hostile variants, sharded checkpoints and diff pairs.

Stage 2 (optional, needs root and a Debian 13 chroot with torch 2.6 and python3-safetensors at
/work/chroot-trixie, or --chroot PATH): this script is copied into the chroot (with gen_fixtures.py
and genlib.py, which it imports) and run there with `--stage trixie`. It proves the hand-written
files match the reference library (safetensors deserialize / load_file read every valid one to the
same bytes and tensors, and re-serialising them gives the same bytes), records what the reference
library says about each hostile file, and writes the files torch 1.13 cannot: real_st.safetensors
(written by safetensors.torch.save_file), dtypes2.safetensors (float8 / uint16-64), dcp/ and
dcp_2rank/ (torch 2.6 DCP; torch 1.13's prototype cannot even be imported on Python 3.11). Without
the chroot, those files are left as they are (they are committed) and the run says so.

Every valid fixture gets an expected json in the shape of testdata/EXPECTED.md (extra fields:
testdata/formats/README.md); numbers come from PyTorch (numel, element_size,
dtype, torch.equal, float64 differences), never from ckpt.
"""

import argparse
import collections
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import warnings

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_fixtures as gf  # noqa: E402  (same entry() / kind_by_name() / module_list() rules)

warnings.filterwarnings("ignore")

# ---------------------------------------------------------------------------------------------
# safetensors, by hand
# ---------------------------------------------------------------------------------------------

# (safetensors name, torch attribute, bits) in the order of the reference `enum Dtype`
# (safetensors/src/tensor.rs: "They MUST be in increasing alignment order"); the writer sorts
# by this order descending, then by name. Dtypes the reference knows but no torch can produce
# bytes for here (F4, F6_*, F8_E8M0, F8_*FNUZ, C64 in old readers) are left out.
ST_DTYPES = [
    ("BOOL", "bool", 8), ("U8", "uint8", 8), ("I8", "int8", 8), ("F8_E5M2", "float8_e5m2", 8),
    ("F8_E4M3", "float8_e4m3fn", 8), ("I16", "int16", 16), ("U16", "uint16", 16),
    ("F16", "float16", 16), ("BF16", "bfloat16", 16), ("I32", "int32", 32), ("U32", "uint32", 32),
    ("F32", "float32", 32), ("C64", "complex64", 64), ("F64", "float64", 64), ("I64", "int64", 64),
    ("U64", "uint64", 64),
]
ST_RANK = {n: i for i, (n, _a, _b) in enumerate(ST_DTYPES)}
ST_BITS = {n: b for n, _a, b in ST_DTYPES}
ST_TORCH = {n: getattr(torch, a) for n, a, _b in ST_DTYPES if hasattr(torch, a)}
TORCH_ST = {v: k for k, v in ST_TORCH.items()}
MAX_HEADER_SIZE = 100_000_000
FORMAT_PT = {"format": "pt"}


class StError(Exception):
    pass


def st_bytes(t):
    """Raw little-endian bytes of a tensor: tensor.contiguous().numpy().tobytes(); bf16 through
    int16, float8 through uint8, unsigned >8-bit through their signed twin (numpy lacks them)."""
    t = t.detach().contiguous()
    twin = {"bfloat16": torch.int16, "float8_e4m3fn": torch.uint8, "float8_e5m2": torch.uint8,
            "uint16": torch.int16, "uint32": torch.int32, "uint64": torch.int64}
    name = str(t.dtype).replace("torch.", "")
    if name in twin:
        t = t.view(twin[name])
    return t.numpy().tobytes()


def st_header_json(obj):
    """serde_json::to_string: compact, UTF-8 as is."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def st_pad(hjson):
    """The reference writer pads the header with spaces to a multiple of 8."""
    return hjson + b" " * (-len(hjson) % 8)


def st_serialize(tensors, metadata=None):
    """Bytes of a safetensors file, laid out as the reference `prepare` does: tensors sorted by
    dtype (enum order) descending, then name; offsets contiguous from 0; JSON keys in that order
    with __metadata__ first; fields dtype, shape, data_offsets; header space-padded to 8."""
    items = sorted(tensors.items(), key=lambda kv: (-ST_RANK[TORCH_ST[kv[1].dtype]], kv[0]))
    header = collections.OrderedDict()
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    blobs, off = [], 0
    for name, t in items:
        b = st_bytes(t)
        assert len(b) == t.numel() * t.element_size()
        header[name] = collections.OrderedDict(
            dtype=TORCH_ST[t.dtype], shape=list(t.shape), data_offsets=[off, off + len(b)])
        blobs.append(b)
        off += len(b)
    h = st_pad(st_header_json(header))
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def raw_st(header_text, data, n=None, pad=True):
    """A file from a header given as text (hostile files)."""
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    if pad:
        h = st_pad(h)
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def _no_dup(pairs):
    seen = set()
    for k, _v in pairs:
        if k in seen:
            raise StError("duplicate key %r in header" % k)
        seen.add(k)
    return collections.OrderedDict(pairs)


def st_read(data, torch_tensors=True):
    """Independent reader: the reference validation (read_metadata + Metadata::validate) plus
    duplicate keys (the reference's serde HashMap silently keeps one) and shape sanity.
    Returns dict(n, json_len, metadata, entries=[(name, info)] in offset order, tensors)."""
    if len(data) < 8:
        raise StError("header length: file has %d bytes, fewer than 8" % len(data))
    n = struct.unpack_from("<Q", data, 0)[0]
    if n > MAX_HEADER_SIZE:
        raise StError("header length %d exceeds the limit of %d" % (n, MAX_HEADER_SIZE))
    if 8 + n > len(data):
        raise StError("header length %d exceeds the file (%d bytes)" % (n, len(data)))
    try:
        text = data[8:8 + n].decode("utf-8")
    except UnicodeDecodeError as ex:
        raise StError("header is not valid UTF-8: %s" % ex)
    try:
        hdr = json.loads(text, object_pairs_hook=_no_dup)
    except StError:
        raise
    except ValueError as ex:
        raise StError("header is not valid JSON: %s" % ex)
    if not isinstance(hdr, dict):
        raise StError("header is not a JSON object")
    meta = hdr.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and
                                 all(isinstance(v, str) for v in meta.values())):
        raise StError("__metadata__ must map strings to strings")
    entries = []
    for name, info in hdr.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise StError("tensor %r: expected dtype, shape, data_offsets" % name)
        if info["dtype"] not in ST_BITS:
            raise StError("tensor %r: unknown dtype %r" % (name, info["dtype"]))
        shape = info["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                  and d >= 0 for d in shape):
            raise StError("tensor %r: bad shape %r" % (name, shape))
        offs = info["data_offsets"]
        if not (isinstance(offs, list) and len(offs) == 2 and
                all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)):
            raise StError("tensor %r: bad data_offsets %r" % (name, offs))
        entries.append((name, info))
    entries.sort(key=lambda e: tuple(e[1]["data_offsets"]))
    start = 0
    for name, info in entries:
        b, e = info["data_offsets"]
        if e < b:
            raise StError("tensor %r: data_offsets [%d, %d] end before they begin" % (name, b, e))
        if b < start:
            raise StError("tensor %r: data_offsets [%d, %d] overlap the previous tensor (ends at %d)"
                          % (name, b, e, start))
        if b > start:
            raise StError("tensor %r: gap of %d bytes before data_offsets [%d, %d]"
                          % (name, b - start, b, e))
        numel = 1
        for d in info["shape"]:
            numel *= d
        if numel * ST_BITS[info["dtype"]] >= 2 ** 64:
            raise StError("tensor %r: shape %r overflows" % (name, info["shape"]))
        if e - b != numel * ST_BITS[info["dtype"]] // 8:
            raise StError("tensor %r: data_offsets [%d, %d] hold %d bytes, %s %r needs %d"
                          % (name, b, e, e - b, info["dtype"], info["shape"],
                             numel * ST_BITS[info["dtype"]] // 8))
        start = e
    if 8 + n + start > len(data):
        raise StError("file truncated: data ends at %d, file has %d bytes" % (8 + n + start, len(data)))
    if 8 + n + start < len(data):
        raise StError("%d trailing bytes after the last tensor" % (len(data) - 8 - n - start))
    out = dict(n=n, json_len=len(text.rstrip(" ")), metadata=meta, entries=entries,
               tensors=collections.OrderedDict())
    if torch_tensors:
        base = 8 + n
        for name, info in entries:
            b, e = info["data_offsets"]
            dt = ST_TORCH[info["dtype"]]
            if e == b:
                t = torch.empty(info["shape"], dtype=dt)
            else:
                t = torch.frombuffer(bytearray(data[base + b:base + e]), dtype=dt).reshape(info["shape"])
            out["tensors"][name] = t
    return out


def contiguous_stride(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= max(d, 1)
    return list(reversed(st))


def st_items(path, shard=None):
    """(tensors list, facts) for one safetensors file: entries in header (= offset) order."""
    data = open(path, "rb").read()
    r = st_read(data)
    tensors = []
    plain = shard is None and gf.plain_tensors([name for name, _ in r["entries"]])  # no model: attributes
    for name, info in r["entries"]:
        t = r["tensors"][name]
        e = gf.entry(name, t, "attribute" if plain else gf.kind_by_name(name, t))
        assert e["stride"] == contiguous_stride(info["shape"]) and e["offset"] == 0
        b, end = info["data_offsets"]
        assert end - b == e["bytes"], (name, info, e)
        if shard is not None:
            e["shard"] = shard
        e["st_dtype"] = info["dtype"]
        e["data_offsets"] = [b, end]
        tensors.append(e)
    return tensors, r, data


def totals_of(tensors, counts=None):
    """EXPECTED.md totals for formats without sharing (safetensors, shards, DCP)."""
    elements = sum(e["numel"] for e in tensors)
    nbytes = sum(e["bytes"] for e in tensors)
    by_kind = {"parameter": 0, "buffer": 0, "attribute": 0}
    for e in tensors:
        by_kind[e["kind"]] += e["numel"]
    if counts is not None:
        assert counts["parameters"] == by_kind["parameter"] and counts["buffers"] == by_kind["buffer"], \
            (counts, by_kind)
    totals = collections.OrderedDict(
        tensors=len(tensors), elements=elements, unique_elements=elements, storage_bytes=nbytes,
        bytes=nbytes, parameters=by_kind["parameter"], trainable=by_kind["parameter"], non_trainable=0,
        buffers=by_kind["buffer"], uninitialized=0, meta=0)
    if by_kind["attribute"]:
        totals["attributes"] = by_kind["attribute"]
    return totals


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


class Out:
    def __init__(self, outdir):
        self.outdir = outdir
        self.written = []

    def path(self, *rel):
        return os.path.join(self.outdir, *rel)

    def write_bytes(self, rel, data):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        self.written.append((rel, len(data)))
        return p

    def note_file(self, rel):
        self.written.append((rel, os.path.getsize(self.path(rel))))


def st_expected(out, rel, live=None, model=None, notes=None, extra=None):
    """Read back a written safetensors file, compare with the live tensors, emit the json."""
    p = out.path(rel)
    tensors, r, data = st_items(p)
    if live is not None:
        assert list(sorted(live)) == list(sorted(r["tensors"])), rel
        for k, v in live.items():
            t = r["tensors"][k]
            assert t.dtype == v.dtype and t.shape == v.shape and torch.equal(t, v.detach()), k
    counts = gf.model_counts(model) if model is not None else None
    totals = totals_of(tensors, counts)
    assert totals["storage_bytes"] == len(data) - 8 - r["n"]
    doc = collections.OrderedDict(fixture=os.path.basename(rel), torch_version=torch.__version__,
                                  format="safetensors")
    doc["header"] = collections.OrderedDict(length=r["n"], json_length=r["json_len"],
                                            padding=r["n"] - r["json_len"], data_start=8 + r["n"])
    doc["file_size"] = len(data)
    doc["metadata"] = r["metadata"]
    doc["totals"] = totals
    doc["tensors"] = tensors
    if model is not None:
        doc["modules"] = gf.module_list(model)
    if extra:
        doc.update(extra)
    if notes:
        doc["notes"] = notes
    write_json(os.path.splitext(p)[0] + ".expected.json", doc)
    return doc


# ---------------------------------------------------------------------------------------------
# Stage 1 fixtures (torch 1.13)
# ---------------------------------------------------------------------------------------------

ST_NOTES = ("Written by hand as the reference writer does: header = compact JSON (serde_json "
            "to_string), __metadata__ first, then tensors sorted by dtype descending in the "
            "reference enum order (U64 > I64 > F64 > C64 > F32 > U32 > I32 > BF16 > F16 > U16 > I16 > "
            "F8_E4M3 > F8_E5M2 > I8 > U8 > BOOL) then by name, each {dtype, shape, data_offsets}; "
            "space-padded to a multiple of 8. `tensors` are listed in header order (= offset order), "
            "which is NOT state-dict order: compare by name. kind: gen_fixtures.kind_by_name "
            "(well-known buffer names, integer/bool dtypes = buffer). requires_grad false "
            "(safetensors has none), offset 0, stride contiguous. storage_bytes = sum of "
            "data_offsets spans; unique_elements = elements (no sharing in safetensors).")


def fx_model_st(out):
    net = gf.trained_small_net()
    sd = net.state_dict()
    out.write_bytes("model.safetensors", st_serialize(sd, FORMAT_PT))
    doc = st_expected(out, "model.safetensors", live=sd, model=net,
                      notes="SmallNet state dict (Conv2d + BatchNorm2d in a custom block, Sequential of "
                            "Linears; one train-mode forward), __metadata__ {'format': 'pt'} as "
                            "transformers writes. " + ST_NOTES,
                      extra={"state_dict_order": list(sd.keys())})
    assert doc["totals"]["parameters"] + doc["totals"]["buffers"] == doc["totals"]["elements"]


def dtype_tensors():
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
    live["scalar"] = torch.tensor(2.5)          # 0-dim: shape [], numel 1
    live["empty"] = torch.zeros(0, 3)           # data_offsets [x, x]
    live["bf16_scalar"] = torch.tensor(-1.5, dtype=torch.bfloat16)
    return live


def fx_dtypes_st(out):
    live = dtype_tensors()
    out.write_bytes("dtypes.safetensors", st_serialize(live))
    st_expected(out, "dtypes.safetensors", live=live,
                notes="One 2x3 tensor per dtype torch 1.13 can produce bytes for (F64 F32 F16 BF16 I64 "
                      "I32 I16 I8 U8 BOOL), a 0-dim F32 'scalar' (shape []), a 0-dim BF16 "
                      "'bf16_scalar' and an empty F32 [0, 3] 'empty' (zero-length data_offsets). No "
                      "__metadata__ (metadata null). float8 / U16-U64 are in dtypes2.safetensors "
                      "(torch 2.6). " + ST_NOTES)


def base_tensors():
    return collections.OrderedDict(a=torch.arange(4, dtype=torch.float32).reshape(2, 2),
                                   b=torch.arange(4, 8, dtype=torch.float32).reshape(2, 2))


def j(obj):
    return json.dumps(obj, separators=(",", ":"))


HOSTILE = collections.OrderedDict()


def hostile(name, phrase, what):
    def deco(fn):
        HOSTILE[name] = (phrase, what, fn)
        return fn
    return deco


F = "F32"
DATA16 = bytes(range(16))


@hostile("bad_huge_header.safetensors", "header length",
         "u64 header length N = 2**40 (over the reference's 100,000,000 limit; far past the file).")
def _huge():
    return raw_st(j({"a": {"dtype": F, "shape": [2, 2], "data_offsets": [0, 16]}}), DATA16, n=2 ** 40)


@hostile("bad_header_past_eof.safetensors", "header length",
         "N = 4096: under the 100,000,000 limit but more than the file holds (88 bytes).")
def _past_eof():
    return raw_st(j({"a": {"dtype": F, "shape": [2, 2], "data_offsets": [0, 16]}}), DATA16, n=4096)


@hostile("bad_overlap.safetensors", "overlap",
         "a [0,16] and b [8,24] overlap (both F32 [2,2]); data is 24 bytes.")
def _overlap():
    return raw_st(j({"a": {"dtype": F, "shape": [2, 2], "data_offsets": [0, 16]},
                     "b": {"dtype": F, "shape": [2, 2], "data_offsets": [8, 24]}}), bytes(24))


@hostile("bad_gap.safetensors", "gap",
         "a [0,16], b [24,40]: an 8-byte hole between them; data is 40 bytes.")
def _gap():
    return raw_st(j({"a": {"dtype": F, "shape": [2, 2], "data_offsets": [0, 16]},
                     "b": {"dtype": F, "shape": [2, 2], "data_offsets": [24, 40]}}), bytes(40))


@hostile("bad_trailing.safetensors", "trailing",
         "A valid file (a, b F32 [2,2]) followed by 8 extra bytes.")
def _trailing():
    return st_serialize(base_tensors()) + b"\xde\xad\xbe\xef" * 2


@hostile("bad_dtype.safetensors", "dtype", "dtype \"F7\" (no such dtype).")
def _dtype():
    return raw_st(j({"a": {"dtype": "F7", "shape": [2, 2], "data_offsets": [0, 16]}}), DATA16)


@hostile("bad_duplicate.safetensors", "duplicate",
         "Key \"a\" twice in the JSON text: first F32 [2], then I32 [2], both [0,8] over the same 8 "
         "bytes. Parsers that keep the first and parsers that keep the last disagree on the dtype; "
         "the reference (serde HashMap) silently keeps one (see reference.json).")
def _duplicate():
    return raw_st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                  '"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}', bytes(range(8)))


@hostile("bad_size.safetensors", "data_offsets",
         "a F32 [2,2] needs 16 bytes but data_offsets [0,12] span 12 (file is consistent otherwise).")
def _size():
    return raw_st(j({"a": {"dtype": F, "shape": [2, 2], "data_offsets": [0, 12]}}), bytes(12))


@hostile("bad_truncated.safetensors", "truncated",
         "model.safetensors cut in the middle of its tensor data (header intact).")
def _truncated():
    full = st_serialize(gf.trained_small_net().state_dict(), FORMAT_PT)
    n = struct.unpack_from("<Q", full)[0]
    return full[:8 + n + (len(full) - 8 - n) // 2]


@hostile("bad_json.safetensors", "JSON",
         "Header is not valid JSON (closing braces missing; space padded).")
def _json():
    return raw_st('{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]', DATA16)


@hostile("bad_negative_shape.safetensors", "shape",
         "shape [-1, 2] with data_offsets [0, 8].")
def _negshape():
    return raw_st(j({"a": {"dtype": F, "shape": [-1, 2], "data_offsets": [0, 8]}}), bytes(8))


@hostile("bad_shape_overflow.safetensors", "overflow",
         "shape [2**32, 2**32, 2**32] F32 with data_offsets [0, 8]: numel * itemsize overflows u64.")
def _overflow():
    return raw_st(j({"a": {"dtype": F, "shape": [2 ** 32] * 3, "data_offsets": [0, 8]}}), bytes(8))


def fx_hostile(out):
    for name, (phrase, what, fn) in HOSTILE.items():
        data = fn()
        out.write_bytes(name, data)
        try:
            st_read(data)
            raise AssertionError("%s: own reader accepted it" % name)
        except StError as ex:
            msg = str(ex)
        assert phrase.lower() in msg.lower(), (name, phrase, msg)
        write_json(out.path(name[:-len(".safetensors")] + ".expected.json"), collections.OrderedDict(
            fixture=name, format="safetensors", error_contains=phrase, what=what,
            generator_reader_error=msg,
            notes="Hostile file: ckpt must refuse it with an error containing error_contains "
                  "(case-insensitive is fine). generator_reader_error is what gen_formats.py's own "
                  "Python reader said (not a spec of ckpt's wording). The reference library's "
                  "verdict is in reference.json when the torch 2.6 chroot ran."))


def hf_shards(sd, split):
    """Split a state dict into shards at the given key index (transformers writes each shard
    as a dict in state-dict order)."""
    keys = list(sd.keys())
    return [collections.OrderedDict((k, sd[k]) for k in keys[:split]),
            collections.OrderedDict((k, sd[k]) for k in keys[split:])]


def index_json(weight_map, total_size):
    """transformers: json.dumps(index, indent=2, sort_keys=True) + "\\n"."""
    return (json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map},
                       indent=2, sort_keys=True) + "\n").encode()


def sharded_doc(out, dirname, index_name, shard_format, shard_docs, tensors, totals, model, notes,
                total_size):
    doc = collections.OrderedDict(fixture=dirname, index=dirname + "/" + index_name,
                                  torch_version=torch.__version__, format="sharded",
                                  shard_format=shard_format)
    doc["index_metadata"] = {"total_size": total_size}
    doc["shards"] = shard_docs
    doc["totals"] = totals
    doc["tensors"] = tensors
    doc["modules"] = gf.module_list(model)
    doc["notes"] = notes
    write_json(out.path(dirname + ".expected.json"), doc)


def fx_sharded_st(out):
    net = gf.trained_small_net()
    sd = net.state_dict()
    shards = hf_shards(sd, 6)  # features.conv.*, features.bn.{weight,bias,running_*}... | rest
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, len(shards)) for i in range(len(shards))]
    weight_map, tensors, shard_docs = {}, [], []
    for fname, shard in zip(names, shards):
        rel = "sharded_st/" + fname
        out.write_bytes(rel, st_serialize(shard, FORMAT_PT))
        ts, r, data = st_items(out.path(rel), shard=fname)
        for k, v in shard.items():
            assert torch.equal(r["tensors"][k], v)
            weight_map[k] = fname
        tensors += ts
        shard_docs.append(collections.OrderedDict(
            file=fname, format="safetensors", tensors=len(ts), storage_bytes=len(data) - 8 - r["n"],
            file_size=len(data), metadata=r["metadata"]))
    totals = totals_of(tensors, gf.model_counts(net))
    total_size = sum(v.numel() * v.element_size() for v in sd.values())
    assert total_size == totals["bytes"]
    out.write_bytes("sharded_st/model.safetensors.index.json", index_json(weight_map, total_size))
    sharded_doc(out, "sharded_st", "model.safetensors.index.json", "safetensors", shard_docs, tensors,
                totals, net,
                "Hugging Face sharded safetensors: index (transformers layout: indent=2, sort_keys) + 2 "
                "shards of the SmallNet state dict (first 6 state-dict keys in shard 1). total_size = "
                "sum of numel*element_size over all tensors (what transformers writes). Totals are over "
                "all shards; tensors are listed shard by shard, each in its header (offset) order, with "
                "'shard' = the file the weight_map names. Each shard has __metadata__ {'format': 'pt'}.",
                total_size)


def fx_sharded_bin(out):
    torch.manual_seed(1)
    lit = gf.LitModel()
    lit.model(torch.randn(4, 8))  # train-mode forward: BatchNorm1d running stats move
    model = lit.model
    sd = model.state_dict()
    shards = hf_shards(sd, 4)
    names = ["pytorch_model-%05d-of-%05d.bin" % (i + 1, len(shards)) for i in range(len(shards))]
    weight_map, tensors, shard_docs = {}, [], []
    for fname, shard in zip(names, shards):
        rel = "sharded_bin/" + fname
        p = out.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        torch.save(dict(shard), p)  # transformers saves each shard as a plain dict
        out.note_file(rel)
        loaded = torch.load(p, map_location="cpu")
        assert list(loaded) == list(shard)
        prefix, records, file_info, globs = gf.zip_facts(p)
        ts = []
        for k, v in loaded.items():
            assert torch.equal(v, shard[k])
            e = gf.entry(k, v, gf.kind_by_name(k, v))
            e["shard"] = fname
            ts.append(e)
            weight_map[k] = fname
        tensors += ts
        assert file_info["storage_bytes"] == sum(e["bytes"] for e in ts)
        shard_docs.append(collections.OrderedDict(
            file=fname, format="torch-zip", prefix=prefix, records=records, tensors=len(ts),
            storage_bytes=file_info["storage_bytes"], globals=globs))
    totals = totals_of(tensors, gf.model_counts(model))
    total_size = sum(v.numel() * v.element_size() for v in sd.values())
    out.write_bytes("sharded_bin/pytorch_model.bin.index.json", index_json(weight_map, total_size))
    sharded_doc(out, "sharded_bin", "pytorch_model.bin.index.json", "torch-zip", shard_docs, tensors,
                totals, model,
                "Hugging Face sharded .bin: index + 2 torch.save shards (plain dicts, as transformers "
                "writes them; zip prefix = shard file stem) of Sequential(Linear(8,16), "
                "BatchNorm1d(16), ReLU, Linear(16,4)) after one train-mode forward; first 4 "
                "state-dict keys in shard 1. Tensors listed shard by shard in pickle order with "
                "'shard'. modules are named as in the Sequential ('0', '1', '3').", total_size)


def fx_sharded_bad(out):
    net = gf.trained_small_net()
    sd = net.state_dict()
    shards = hf_shards(sd, 6)
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, len(shards)) for i in range(len(shards))]
    total_size = sum(v.numel() * v.element_size() for v in sd.values())
    # missing: the index names shard 2, which is not in the directory
    wm = {k: names[i] for i, s in enumerate(shards) for k in s}
    out.write_bytes("sharded_missing/" + names[0], st_serialize(shards[0], FORMAT_PT))
    out.write_bytes("sharded_missing/model.safetensors.index.json", index_json(wm, total_size))
    write_json(out.path("sharded_missing.expected.json"), collections.OrderedDict(
        fixture="sharded_missing", index="sharded_missing/model.safetensors.index.json",
        format="sharded", error_contains=names[1],
        what="The index maps %d tensors to %s, which does not exist (only %s is there)."
             % (len(shards[1]), names[1], names[0]),
        notes="ckpt must fail naming the missing shard file (a message with 'missing' and the name "
              "is natural)."))
    # wrong: the weight_map puts one tensor of shard 2 into shard 1
    moved = list(shards[1].keys())[-1]
    wm = {k: names[i] for i, s in enumerate(shards) for k in s}
    wm[moved] = names[0]
    for fname, shard in zip(names, shards):
        out.write_bytes("sharded_wrong/" + fname, st_serialize(shard, FORMAT_PT))
    out.write_bytes("sharded_wrong/model.safetensors.index.json", index_json(wm, total_size))
    write_json(out.path("sharded_wrong.expected.json"), collections.OrderedDict(
        fixture="sharded_wrong", index="sharded_wrong/model.safetensors.index.json", format="sharded",
        error_contains=moved,
        what="weight_map says %r lives in %s, but it is in %s (and %s holds a tensor the map does not "
             "assign to it)." % (moved, names[0], names[1], names[1]),
        notes="Both shards and the index are otherwise valid; every shard must be checked against "
              "the map."))


# ----------------------------------------------------------------------------------------- diff

ATOL, RTOL = 1e-2, 0.0


def prefix_explanation(ka, kb):
    """{'b_adds': p} if every key of B is p + a key of A (and vice versa for 'b_removes')."""
    def strip(src, dst):
        only = [k for k in dst if k not in src]
        if not only or len(dst) != len(src):
            return None
        cands = {k[:k.index(".") + 1] for k in only if "." in k}
        for p in sorted(cands, key=len):
            if sorted(p + k for k in src) == sorted(dst):
                return p
        return None
    p = strip(ka, kb)
    if p:
        return {"b_adds": p}
    p = strip(kb, ka)
    if p:
        return {"b_removes": p}
    return None


def compare(a, b):
    """Everything `ckpt diff` reports for A vs B, computed by PyTorch."""
    ka, kb = list(a.keys()), list(b.keys())
    prefix = prefix_explanation(ka, kb)
    if prefix and "b_adds" in prefix:
        pairs = [(k, prefix["b_adds"] + k) for k in ka]
    elif prefix:
        pairs = [(prefix["b_removes"] + k, k) for k in kb]
    else:
        pairs = [(k, k) for k in ka if k in b]
    paired_a = {x for x, _ in pairs}
    paired_b = {y for _, y in pairs}
    only_a = [k for k in ka if k not in paired_a]
    only_b = [k for k in kb if k not in paired_b]
    dtype_changed, shape_changed, changed, compared = [], [], [], 0
    max_abs_all = 0.0
    for x, y in pairs:
        ta, tb = a[x], b[y]
        if ta.dtype != tb.dtype:
            dtype_changed.append(collections.OrderedDict(
                a=x, b=y, a_dtype=gf.dtype_name(ta.dtype), b_dtype=gf.dtype_name(tb.dtype)))
        if ta.shape != tb.shape:
            shape_changed.append(collections.OrderedDict(a=x, b=y, a_shape=list(ta.shape),
                                                         b_shape=list(tb.shape)))
            continue
        compared += 1
        da, db = ta.to(torch.float64), tb.to(torch.float64)
        diff = (da - db).abs()
        max_abs = diff.max().item() if diff.numel() else 0.0
        nz = db != 0
        max_rel = (diff[nz] / db[nz].abs()).max().item() if bool(nz.any()) else 0.0
        equal = bool(ta.dtype == tb.dtype and torch.equal(ta, tb))
        max_abs_all = max(max_abs_all, max_abs)
        if not equal:
            changed.append(collections.OrderedDict(
                a=x, b=y, max_abs_diff=max_abs, max_rel_diff=max_rel,
                elements_differing=int((da != db).sum().item()), numel=ta.numel(),
                within_atol=bool(torch.allclose(da, db, rtol=RTOL, atol=ATOL))))
    keys_equal = ka == kb or sorted(ka) == sorted(kb)
    structure_equal = (keys_equal and not only_a and not only_b and not dtype_changed
                       and not shape_changed)
    values_equal = not changed
    return collections.OrderedDict(
        keys_equal=keys_equal, prefix=prefix, only_in_a=only_a, only_in_b=only_b,
        dtype_changed=dtype_changed, shape_changed=shape_changed, paired=len(pairs),
        values_compared=compared, values_changed=changed,
        max_abs_diff=max_abs_all,
        equal=bool(structure_equal and values_equal),
        equal_after_pairing=bool(not only_a and not only_b and not dtype_changed and not shape_changed
                                 and values_equal),
        within_tolerance=bool(structure_equal and all(c["within_atol"] for c in changed)),
        within_tolerance_after_pairing=bool(not only_a and not only_b and not dtype_changed
                                            and not shape_changed
                                            and all(c["within_atol"] for c in changed)))


def fx_diff(out):
    net = gf.trained_small_net()
    sd = net.state_dict()
    d = out.path("diff")
    os.makedirs(d, exist_ok=True)
    files = collections.OrderedDict()

    def save(name, obj, note):
        torch.save(obj, os.path.join(d, name))
        out.note_file("diff/" + name)
        files[name] = note

    save("a.pt", sd, "SmallNet state dict (OrderedDict), one train-mode forward.")
    save("same.pt", collections.OrderedDict((k, v.clone()) for k, v in sd.items()),
         "Identical content (cloned tensors) saved again: bytes differ (zip prefix 'same'), content equal.")
    save("renamed.pt", collections.OrderedDict(("_orig_mod." + k, v) for k, v in sd.items()),
         "Every key prefixed with '_orig_mod.' (torch.compile's OptimizedModule naming).")
    dt = collections.OrderedDict(sd)
    dt["classifier.0.weight"] = sd["classifier.0.weight"].half()
    save("dtype.pt", dt, "classifier.0.weight converted to float16; everything else equal.")
    vals = collections.OrderedDict((k, v.clone()) for k, v in sd.items())
    w = vals["classifier.0.weight"]
    for i, jdx in ((0, 0), (3, 7), (7, 15)):
        w[i, jdx] += 1e-3
    vals["classifier.2.bias"][1] += 1.0
    save("values.pt", vals, "classifier.0.weight: 3 elements +1e-3 (in float32); classifier.2.bias: "
                            "element 1 +1.0; everything else equal.")
    ms = collections.OrderedDict((k, v) for k, v in sd.items() if k != "classifier.2.bias")
    torch.manual_seed(5)
    ms["classifier.3.weight"] = torch.randn(3, 3)
    save("missing.pt", ms, "classifier.2.bias removed; classifier.3.weight (3x3 float32) added.")
    out.write_bytes("diff/a.safetensors", st_serialize(sd, FORMAT_PT))
    files["a.safetensors"] = ("Same tensors as a.pt written as safetensors (a conversion that kept every "
                              "weight; header order differs from a.pt's state-dict order).")

    a = torch.load(os.path.join(d, "a.pt"))
    pairs = collections.OrderedDict()
    for name in files:
        if name == "a.pt":
            continue
        p = os.path.join(d, name)
        b = st_read(open(p, "rb").read())["tensors"] if name.endswith(".safetensors") else torch.load(p)
        r = compare(a, b)
        pairs[name] = r
    # sanity: what each pair is meant to show
    assert pairs["same.pt"]["equal"] and pairs["a.safetensors"]["equal"]
    assert pairs["renamed.pt"]["prefix"] == {"b_adds": "_orig_mod."} and pairs["renamed.pt"]["equal_after_pairing"]
    assert not pairs["renamed.pt"]["equal"]
    assert [c["a"] for c in pairs["dtype.pt"]["dtype_changed"]] == ["classifier.0.weight"]
    assert [c["a"] for c in pairs["values.pt"]["values_changed"]] == ["classifier.0.weight", "classifier.2.bias"]
    assert not pairs["values.pt"]["within_tolerance"]
    assert pairs["missing.pt"]["only_in_a"] == ["classifier.2.bias"]
    assert pairs["missing.pt"]["only_in_b"] == ["classifier.3.weight"]
    doc = collections.OrderedDict(
        torch_version=torch.__version__, a="a.pt", atol=ATOL, rtol=RTOL, files=files,
        definitions=collections.OrderedDict(
            pairing="Keys are paired by name; if every key of B is P + a key of A (P a dotted "
                    "first component such as '_orig_mod.'), prefix = {'b_adds': P} and keys pair "
                    "through it ({'b_removes': P} for the reverse). only_in_a / only_in_b are AFTER "
                    "pairing.",
            keys_equal="Same key set without any prefix pairing.",
            dtype_changed="Paired keys whose dtypes differ (str(dtype) without 'torch.').",
            max_abs_diff="max over elements of |a - b|, both converted to float64 by torch "
                         "(tensor.to(torch.float64)); 0 for empty tensors. Top-level max_abs_diff is "
                         "the max over all compared tensors.",
            max_rel_diff="max over elements with b != 0 of |a - b| / |b| (float64, B is the "
                         "reference); elements with b == 0 are skipped; 0 if there are none.",
            within_atol="torch.allclose(a64, b64, rtol=0, atol=1e-2), i.e. |a - b| <= 1e-2 everywhere.",
            equal="keys_equal, no dtype / shape change, and torch.equal(a, b) for every tensor "
                  "(exact; what `ckpt diff A B` should exit 0 for).",
            equal_after_pairing="As equal, but keys compared after prefix pairing.",
            within_tolerance="keys_equal, no dtype / shape change, and every tensor within_atol "
                             "(what `--values --atol 1e-2 --rtol 0` should exit 0 for). A dtype "
                             "change makes it false even when values are close (dtype.pt).",
            within_tolerance_after_pairing="As within_tolerance, keys compared after prefix pairing.",
            values_changed="Paired, same-shape tensors that are not torch.equal (dtype change "
                           "counts), with the numbers above; all other paired tensors are "
                           "bitwise equal (max_abs_diff 0)."),
        pairs=pairs)
    write_json(os.path.join(d, "expected.json"), doc)


# ---------------------------------------------------------------------------------------------
# Stage 2: inside the torch 2.6 chroot
# ---------------------------------------------------------------------------------------------

def trixie_stage(inputs, outdir, manifest):
    import safetensors
    import safetensors.torch as stt
    out = Out(outdir)
    os.makedirs(outdir, exist_ok=True)
    ref = collections.OrderedDict(
        torch_version=torch.__version__, safetensors_version=safetensors.__version__,
        valid=collections.OrderedDict(), hostile=collections.OrderedDict())

    def flat(r, data):
        base = 8 + r["n"]
        return {name: {"dtype": info["dtype"], "shape": info["shape"],
                       "data": data[base + info["data_offsets"][0]:base + info["data_offsets"][1]]}
                for name, info in r["entries"]}

    def check_valid(rel, path):
        data = open(path, "rb").read()
        r = st_read(data)
        mine = flat(r, data)
        deser = safetensors.deserialize(data)  # the reference core: validates, raw bytes, any dtype
        assert sorted(n for n, _ in deser) == sorted(mine), rel
        for n, info in deser:
            assert info["dtype"] == mine[n]["dtype"] and list(info["shape"]) == mine[n]["shape"], (rel, n)
            assert bytes(info["data"]) == mine[n]["data"], (rel, n)
        # the reference writer gives the same bytes (layout, padding, order, metadata)
        reser = bytes(safetensors.serialize(
            {n: {"dtype": str(ST_TORCH[m["dtype"]]).replace("torch.", ""), "shape": m["shape"],
                 "data": m["data"]} for n, m in mine.items()}, metadata=r["metadata"]))
        assert reser == data, rel
        res = collections.OrderedDict(deserialize="ok", reserialize_identical=True)
        try:
            lf = stt.load_file(path)
            assert sorted(lf) == sorted(r["tensors"])
            for n, t in lf.items():
                u = r["tensors"][n]
                assert t.dtype == u.dtype and t.shape == u.shape and torch.equal(t, u), (rel, n)
            res["torch_load_file"] = "ok: same names, dtypes, shapes, values"
        except KeyError as ex:  # the python binding lacks U16/U32/U64 before 0.5
            res["torch_load_file"] = "unsupported by this safetensors.torch: KeyError %s" % ex
        ref["valid"][rel] = res

    for rel in manifest["valid"]:
        check_valid(rel, os.path.join(inputs, rel))
    for rel in manifest["hostile"]:
        data = open(os.path.join(inputs, rel), "rb").read()
        try:
            got = safetensors.deserialize(data)
            verdict = "ACCEPTED: " + json.dumps(
                {n: {"dtype": i["dtype"], "shape": list(i["shape"])} for n, i in got})
        except Exception as ex:
            verdict = "%s: %s" % (type(ex).__name__, ex)
        try:
            stt.load_file(os.path.join(inputs, rel))
            lf = "ACCEPTED"
        except Exception as ex:
            lf = "%s: %s" % (type(ex).__name__, ex)
        ref["hostile"][rel] = collections.OrderedDict(deserialize=verdict, load_file=lf)

    # real_st.safetensors: written by the reference library itself
    net = gf.trained_small_net()
    real = collections.OrderedDict(net.state_dict())
    for k, v in dtype_tensors().items():
        real["extra." + k] = v
    stt.save_file(real, out.path("real_st.safetensors"), metadata={"format": "pt"})
    out.note_file("real_st.safetensors")
    data = open(out.path("real_st.safetensors"), "rb").read()
    mine = st_serialize(real, {"format": "pt"})
    assert mine == data, "hand-written layout differs from safetensors.torch.save_file"
    st_expected(out, "real_st.safetensors", live=real,
                notes="Written by the REAL library (safetensors.torch.save_file, safetensors %s, "
                      "torch %s) with metadata {'format': 'pt'}: the SmallNet state dict plus "
                      "dtypes.safetensors' tensors under 'extra.'. gen_formats.py's hand writer "
                      "produces byte-identical output for the same input (asserted). "
                      % (safetensors.__version__, torch.__version__) + ST_NOTES)
    ref["real_st.safetensors"] = "save_file output == hand-written st_serialize output, byte for byte"
    check_valid("real_st.safetensors", out.path("real_st.safetensors"))

    # dtypes2.safetensors: dtypes torch 1.13 lacks
    torch.manual_seed(0)
    base = torch.randn(2, 3)
    d2 = collections.OrderedDict()
    d2["f8_e4m3"] = base.to(torch.float8_e4m3fn)
    d2["f8_e5m2"] = base.to(torch.float8_e5m2)
    d2["u16"] = torch.frombuffer(bytearray(struct.pack("<6H", 0, 1, 2, 65535, 40000, 7)),
                                 dtype=torch.uint16).reshape(2, 3)
    d2["u32"] = torch.frombuffer(bytearray(struct.pack("<6I", 0, 1, 2, 2 ** 32 - 1, 3000000000, 7)),
                                 dtype=torch.uint32).reshape(2, 3)
    d2["u64"] = torch.frombuffer(bytearray(struct.pack("<6Q", 0, 1, 2, 2 ** 64 - 1, 2 ** 40, 7)),
                                 dtype=torch.uint64).reshape(2, 3)
    out.write_bytes("dtypes2.safetensors", st_serialize(d2))
    st_expected(out, "dtypes2.safetensors", live=d2,
                extra={"values": collections.OrderedDict(
                    (k, v.to(torch.float64).tolist() if k.startswith("f8") else v.tolist())
                    for k, v in d2.items())},
                notes="Hand-written in torch %s: F8_E4M3 (float8_e4m3fn), F8_E5M2, U16, U32, U64, "
                      "each 2x3; u64[1][0] = 2**64-1, u32[1][0] = 2**32-1, u16[1][0] = 65535. "
                      "'values' = the values as torch reads them (float8 via float64). "
                      % torch.__version__ + ST_NOTES)
    check_valid("dtypes2.safetensors", out.path("dtypes2.safetensors"))

    ref["dcp"] = dcp_single(out)
    ref["dcp_2rank"] = dcp_two_ranks(out)
    write_json(out.path("reference.json"), ref)
    for rel, size in out.written:
        print("%-46s %7d bytes" % (rel, size))


def pickle_info(path):
    data = open(path, "rb").read()
    return data[1], gf.pickle_globals(data)


def dcp_expected(out, dirname, live, model, notes, extra=None):
    """Read the DCP back the way ckpt must: .metadata, then each chunk's region of its .distcp
    file as a torch.save zip; reassemble and compare with the live state dict."""
    import torch.distributed.checkpoint as dcp  # noqa: F401
    d = out.path(dirname)
    md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
    proto, globs = pickle_info(os.path.join(d, ".metadata"))
    by_fqn = collections.defaultdict(list)
    for idx, info in md.storage_data.items():
        by_fqn[idx.fqn].append((idx, info))
    tensors, byte_entries = [], []
    storage_bytes = 0
    files = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    for fqn, smd in md.state_dict_metadata.items():
        regions = by_fqn[fqn]
        if type(smd).__name__ == "BytesStorageMetadata":
            (idx, info), = regions
            blob = open(os.path.join(d, info.relative_path), "rb").read()[info.offset:info.offset + info.length]
            value = torch.load(io.BytesIO(blob), weights_only=False)
            byte_entries.append(collections.OrderedDict(
                name=fqn, file=info.relative_path, offset=info.offset, length=info.length,
                value=value if isinstance(value, (int, float, str, bool)) else repr(value),
                python_type=type(value).__name__))
            continue
        full = torch.empty(tuple(smd.size), dtype=smd.properties.dtype)
        covered = 0
        chunks = []
        for chunk_i, ch in enumerate(smd.chunks):
            (idx, info), = [(i, s) for i, s in regions if tuple(i.offset) == tuple(ch.offsets)]
            blob = open(os.path.join(d, info.relative_path), "rb").read()[info.offset:info.offset + info.length]
            t = torch.load(io.BytesIO(blob), weights_only=True)
            assert list(t.shape) == list(ch.sizes), (fqn, t.shape, ch)
            sl = tuple(slice(o, o + s) for o, s in zip(ch.offsets, ch.sizes))
            full[sl] = t
            covered += t.numel()
            sb = t.untyped_storage().nbytes()
            storage_bytes += sb
            with io.BytesIO(blob) as f:
                import zipfile
                with zipfile.ZipFile(f) as z:
                    names = z.namelist()
            chunks.append(collections.OrderedDict(
                offsets=list(ch.offsets), sizes=list(ch.sizes), index=idx.index, file=info.relative_path,
                offset=info.offset, length=info.length, storage_bytes=sb,
                zip_records=names))
        assert covered == full.numel(), fqn
        assert torch.equal(full, live[fqn]), fqn
        e = gf.entry(fqn, full, gf.kind_by_name(fqn, full))
        e["requires_grad"] = bool(smd.properties.requires_grad)
        e["chunks"] = chunks
        tensors.append(e)
    counts = gf.model_counts(model)
    totals = totals_of(tensors, counts)
    totals["storage_bytes"] = storage_bytes
    doc = collections.OrderedDict(fixture=dirname, metadata_file=dirname + "/.metadata",
                                  torch_version=torch.__version__, format="dcp")
    doc["totals"] = totals
    doc["tensors"] = tensors
    doc["bytes_entries"] = byte_entries
    doc["modules"] = gf.module_list(model)
    doc["files"] = files
    doc["metadata_pickle"] = collections.OrderedDict(
        protocol=proto, globals=globs, version=getattr(md, "version", None),
        planner_data={k: list(v) for k, v in (md.planner_data or {}).items()},
        storage_meta=None if md.storage_meta is None else collections.OrderedDict(
            checkpoint_id=str(md.storage_meta.checkpoint_id), save_id="(uuid4, random per run)",
            load_id=md.storage_meta.load_id))
    if extra:
        doc.update(extra)
    doc["notes"] = notes
    write_json(out.path(dirname + ".expected.json"), doc)
    for f in files:
        out.note_file(dirname + "/" + f)
    return doc


def dcp_single(out):
    import torch.distributed.checkpoint as dcp
    net = gf.trained_small_net()
    sd = collections.OrderedDict(net.state_dict())
    live = dict(sd)
    state = dict(sd)
    state["extra"] = {"step": 7, "note": "dcp"}
    d = out.path("dcp")
    shutil.rmtree(d, ignore_errors=True)
    cwd = os.getcwd()
    os.chdir(out.outdir)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dcp.save(state, checkpoint_id="dcp")  # relative: storage_meta.checkpoint_id = 'dcp'
        msgs = sorted({str(w.message) for w in caught if "single process" in str(w.message)})
    finally:
        os.chdir(cwd)
    # the library's own loader agrees
    back = {k: torch.empty_like(v) for k, v in sd.items()}
    back["extra"] = {"step": 0, "note": ""}
    dcp.load(back, checkpoint_id=d)
    assert all(torch.equal(back[k], v) for k, v in sd.items()) and back["extra"] == {"step": 7, "note": "dcp"}
    doc = dcp_expected(out, "dcp", live, net,
                       "torch.distributed.checkpoint.save(state, checkpoint_id='dcp') in ONE process "
                       "without init_process_group (torch %s: %s). state = SmallNet state dict + "
                       "'extra': {'step': 7, 'note': 'dcp'}; DCP flattens the nested dict to "
                       "'extra.step' / 'extra.note' (BytesStorageMetadata: each region is a torch.save "
                       "zip of the Python value). Every tensor region is a complete torch.save zip "
                       "(prefix 'archive', records data.pkl, byteorder, data/0, version, "
                       ".data/serialization_id) of one chunk. torch 1.13 cannot write DCP here: "
                       "importing torch.distributed._shard.checkpoint fails on Python 3.11 "
                       "(dataclass mutable default). .metadata differs per run (save_id uuid4)."
                       % (torch.__version__, "; ".join(msgs) or "no warning"))
    return collections.OrderedDict(single_process_warning=msgs, dcp_load_agrees=True,
                                   tensors=len(doc["tensors"]))


def _dcp_rank(rank, world, store, d, result_q):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    net = gf.trained_small_net()
    state = {}
    for k, v in net.state_dict().items():
        state[k] = distribute_tensor(v, mesh, [Shard(0)] if v.dim() else [Replicate()])
    state["step"] = 11
    dcp.save(state, checkpoint_id=d)
    dist.barrier()
    dist.destroy_process_group()


def dcp_two_ranks(out):
    import torch.multiprocessing as mp
    d = out.path("dcp_2rank")
    shutil.rmtree(d, ignore_errors=True)
    store = out.path(".dcp_store")
    if os.path.exists(store):
        os.remove(store)
    cwd = os.getcwd()
    os.chdir(out.outdir)
    try:
        mp.spawn(_dcp_rank, args=(2, store, "dcp_2rank", None), nprocs=2)
    finally:
        os.chdir(cwd)
        if os.path.exists(store):
            os.remove(store)
    net = gf.trained_small_net()
    live = dict(net.state_dict())
    # the library itself reassembles the chunks when loading into plain tensors in one process
    import torch.distributed.checkpoint as dcp
    back = {k: torch.zeros_like(v) for k, v in live.items()}
    back["step"] = 0
    dcp.load(back, checkpoint_id=d)
    assert all(torch.equal(back[k], v) for k, v in live.items()) and back["step"] == 11
    doc = dcp_expected(out, "dcp_2rank", live, net,
                       "Written by 2 ranks (torch.multiprocessing.spawn, gloo over a FileStore, "
                       "device mesh 'cpu' (2,)): every tensor with dim >= 1 is a DTensor Shard(0) "
                       "(so it has 2 chunks, one per rank file; uneven when dim 0 is odd: "
                       "classifier.2.* [3] -> [2] + [1]), 0-dim tensors are Replicate() (one chunk, "
                       "deduplicated to one rank), 'step': 11 is a bytes entry. Tensors are the full "
                       "(global) tensors; 'chunks' map each piece to its file region. "
                       "storage_bytes = sum of the chunk storages.")
    nchunks = {e["name"]: len(e["chunks"]) for e in doc["tensors"]}
    assert nchunks["classifier.2.bias"] == 2 and nchunks["features.bn.num_batches_tracked"] == 1
    return collections.OrderedDict(ranks=2, files=sorted(doc["files"]),
                                   dcp_load_agrees="yes: dcp.load into plain tensors in one process "
                                   "reassembles the live state dict (and so does the region reader)")


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def dcp_in_113():
    """Can torch 1.13's DCP prototype write a checkpoint here?"""
    try:
        import torch.distributed._shard.checkpoint as c  # noqa: F401
        return "importable"
    except Exception as ex:
        return "%s: %s" % (type(ex).__name__, ex)


def run_chroot(root, out, manifest):
    if os.geteuid() != 0:
        return "skipped: chroot needs root"
    if not os.path.isdir(os.path.join(root, "usr/lib/python3/dist-packages/safetensors")):
        return "skipped: %s has no python3-safetensors" % root
    work = os.path.join(root, "tmp/ckpt_gen_formats")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "in"))
    for f in ("gen_formats.py", "gen_fixtures.py", "genlib.py"):
        shutil.copy(os.path.join(HERE, f), work)
    for rel in manifest["valid"] + manifest["hostile"]:
        dst = os.path.join(work, "in", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(out.path(rel), dst)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    cmd = ["chroot", root, "/usr/bin/env", "GLOO_SOCKET_IFNAME=lo", "/usr/bin/python3",
           "/tmp/ckpt_gen_formats/gen_formats.py", "--stage", "trixie",
           "--inputs", "/tmp/ckpt_gen_formats/in", "--manifest", "/tmp/ckpt_gen_formats/manifest.json",
           "/tmp/ckpt_gen_formats/out"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    noise = ("UCX  ERROR", "Error in cpuinfo")
    print("\n".join(l for l in (p.stdout + p.stderr).splitlines() if not any(n in l for n in noise)))
    if p.returncode != 0:
        raise SystemExit("chroot stage failed (%d)" % p.returncode)
    src = os.path.join(work, "out")
    for name in sorted(os.listdir(src)):
        s, dst = os.path.join(src, name), out.path(name)
        if os.path.isdir(s):
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(s, dst)
            for f in os.listdir(dst):
                out.note_file(name + "/" + f)
        else:
            shutil.copy(s, dst)
            if not name.endswith(".json"):
                out.note_file(name)
    shutil.rmtree(work)
    return "ran"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(HERE, "formats"))
    ap.add_argument("--stage", choices=("main", "trixie"), default="main")
    ap.add_argument("--chroot", default="/work/chroot-trixie")
    ap.add_argument("--no-chroot", action="store_true")
    ap.add_argument("--inputs")
    ap.add_argument("--manifest")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.stage == "trixie":
        trixie_stage(args.inputs, args.outdir, json.load(open(args.manifest)))
        return
    os.makedirs(args.outdir, exist_ok=True)
    out = Out(args.outdir)
    fx_model_st(out)
    fx_dtypes_st(out)
    fx_hostile(out)
    fx_sharded_st(out)
    fx_sharded_bin(out)
    fx_sharded_bad(out)
    fx_diff(out)
    manifest = {"valid": ["model.safetensors", "dtypes.safetensors", "diff/a.safetensors"] +
                         ["sharded_st/" + f for f in sorted(os.listdir(out.path("sharded_st")))
                          if f.endswith(".safetensors")],
                "hostile": list(HOSTILE)}
    print("torch 1.13 DCP prototype:", dcp_in_113())
    if args.no_chroot or not os.path.isdir(args.chroot):
        status = "skipped: no chroot"
    else:
        status = run_chroot(args.chroot, out, manifest)
    print("torch 2.6 chroot stage:", status)
    total = 0
    for rel, size in out.written:
        total += size
        assert size <= 50 * 1024, (rel, size)
        print("%-46s %7d bytes" % (rel, size))
    print("%d files, %d bytes, torch %s -> %s" % (len(out.written), total, torch.__version__, args.outdir))


if __name__ == "__main__":
    main()
