#!/usr/bin/env python3
"""Checkpoints whose names carry terminal controls (issue K): writes testdata/untrusted/. Each name
would do something to a terminal that printed it raw: ESC[2K ESC[1A erases the line above (a finding),
OSC 0 / OSC 52 set the window title / the clipboard, U+202E reverses what follows, U+009B is the C1
form of CSI, DEL, TAB, CR and LF break the line. ckpt must show them as \\x1b, \\u202e, ... in text and
Markdown and keep them lossless in JSON (tests/cli/cases.json, "untrusted-*").

Written by real PyTorch (torch.save) where PyTorch can write it: names.pt, prefix.pt (its zip prefix
comes from the file name it was saved under), lightning.ckpt. PyTorch cannot write a key that is not
valid UTF-8, so invalid_utf8.pt is names.pt-style torch output with same-length placeholders in
data.pkl overwritten by hand (and the zip CRC-32s fixed); prefix_overrun.pt lies about a storage size
so that the error names a hostile member and tensor; global.pkl and metadata.safetensors are
hand-made, in the manner of gen_bad.py.

Run: /usr/bin/python3 testdata/gen_untrusted.py (torch 1.13)"""
import collections
import io
import json
import os
import shutil
import struct
import tempfile
import zipfile
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "untrusted")

ERASE = "\x1b[2K\x1b[1A"  # erase the line, cursor up: hides the line printed before
OSC_TITLE = "\x1b]0;owned\x07"
OSC_CLIP = "\x1b]52;c;cm0gLXJmIH4=\x07"  # clipboard := base64 "rm -rf ~"


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def saved(obj, stem="archive"):
    """torch.save bytes; the zip prefix is the stem of the path saved to ('archive' for a buffer)."""
    if stem == "archive":
        buf = io.BytesIO()
        torch.save(obj, buf)
        return buf.getvalue()
    d = tempfile.mkdtemp()
    try:
        path = os.path.join(d, stem + ".pt")
        torch.save(obj, path)
        return open(path, "rb").read()
    finally:
        shutil.rmtree(d)


def member(b, suffix):
    """(local header, data start, data stop) of the first zip member whose name ends with `suffix`."""
    for info in zipfile.ZipFile(io.BytesIO(bytes(b))).infolist():
        if info.filename.encode("utf-8", "surrogateescape").endswith(suffix):
            at = info.header_offset
            n, e = struct.unpack_from("<HH", b, at + 26)
            start = at + 30 + n + e
            return at, start, start + info.compress_size
    raise KeyError(suffix)


def patch_pkl(b, pairs):
    """data.pkl with each placeholder replaced by bytes of the same length, CRC-32s fixed."""
    b = bytearray(b)
    header, start, stop = member(b, b"/data.pkl")
    old_crc = zlib.crc32(b[start:stop])
    pkl = bytes(b[start:stop])
    for old, new in pairs:
        assert len(old) == len(new) and pkl.count(old) == 1, (old, new)
        pkl = pkl.replace(old, new)
    b[start:stop] = pkl
    new_crc = zlib.crc32(pkl)
    fixed = 0
    # torch writes the CRC after the data (a data descriptor, flag bit 3) and in the central directory
    for at in (header + 14, stop + 4 if b[stop:stop + 4] == b"PK\x07\x08" else stop):
        if struct.unpack_from("<I", b, at)[0] == old_crc:
            struct.pack_into("<I", b, at, new_crc)
            fixed += 1
    cd = b.index(b"PK\x01\x02")
    while cd >= 0:
        if struct.unpack_from("<I", b, cd + 42)[0] == header:
            assert struct.unpack_from("<I", b, cd + 16)[0] == old_crc
            struct.pack_into("<I", b, cd + 16, new_crc)
            fixed += 1
            break
        cd = b.find(b"PK\x01\x02", cd + 4)
    assert fixed >= 2, fixed
    return bytes(b)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    t = lambda *s: torch.randn(*s)  # noqa: E731

    # Every kind of control in tensor names (and so in module rows), and valid non-ASCII that stays.
    sd = collections.OrderedDict()
    sd["erase" + ERASE + ".weight"] = t(2, 3)
    sd["title" + OSC_TITLE + ".weight"] = t(2)
    sd["clip" + OSC_CLIP + ".weight"] = t(2)
    sd["rlo\u202egnp.exe.weight"] = t(2)
    sd["csi\u009b2J.weight"] = t(2)
    sd["del\x7f.weight"] = t(2)
    sd["line\nbreak.weight"] = t(2)
    sd["tab\there\rcr.weight"] = t(2)
    sd["lrm\u200e.weight"] = t(2)
    sd["\u4e2d\u6587.\u6743\u91cd"] = t(2)  # 中文.权重
    sd["caf\u00e9.weight"] = t(2)
    sd["back\\slash.weight"] = t(2)
    # compiled-prefix: the finding quotes these names in its message and where
    sd["cmp" + ERASE + "._orig_mod.weight"] = t(2)
    sd["cmp\u202e._orig_mod.bias"] = t(2)
    write("names.pt", saved(sd))

    # A zip prefix (every member name) with OSC and bidi controls: torch takes it from the file name.
    stem = "pre" + OSC_TITLE + "fix\u202e"
    write("prefix.pt", saved(collections.OrderedDict([("ok.weight", t(3))]), stem))
    # The same with a tensor reaching past its storage: the error names the member and the tensor.
    b = bytearray(saved(collections.OrderedDict([("over" + ERASE + "run", torch.zeros(27))]), stem))
    _, start, stop = member(b, b"/data.pkl")
    cpu = b.index(b"cpu", start)
    k = b.index(b"K", cpu)  # BININT1 numel after the location (and its BINPUT)
    assert b[k + 1] == 27
    b[k + 1] = 1
    write("prefix_overrun.pt", bytes(b))

    # Keys that are not UTF-8 (pickle's BINUNICODE need not be): invalid bytes, an overlong '/', a
    # surrogate, a lone continuation byte, Latin-1, and a sequence cut short at the end of a segment.
    inv = collections.OrderedDict()
    inv["ffXX.weight"] = t(2)
    inv["overXX.weight"] = t(2)
    inv["surrXXX.weight"] = t(2)
    inv["contX.weight"] = t(2)
    inv["mixed_\u00e9_XX.weight"] = t(2)
    inv["truncXX.weight"] = t(2)
    raw = saved(inv)
    write("invalid_utf8.pt", patch_pkl(raw, [
        (b"ffXX.", b"ff\xff\xfe."),
        (b"overXX.", b"over\xc0\xaf."),
        (b"surrXXX.", b"surr\xed\xa0\x80."),
        (b"contX.", b"cont\x80."),
        (b"_XX.weight", b"_\xe9\x41.weight"),  # a Latin-1 'é' then 'A'
        (b"truncXX.", b"trunc\xe4\xb8."),  # cut short at the end of the module name
    ]))

    # Lightning: version, hyper-parameter keys and values.
    hp = collections.OrderedDict()
    hp["lr\u202e"] = 1e-3
    hp["name"] = "run" + ERASE + "1"
    hp["note"] = "multi\nline\ttext \u009b31m"
    hp["path"] = "C:\\data\\\u65e5\u672c"  # backslashes and CJK stay
    ckpt = {
        "epoch": 0,
        "global_step": 1,
        "pytorch-lightning_version": "2.1.3" + OSC_TITLE,
        "state_dict": collections.OrderedDict([("model" + ERASE + ".weight", t(2, 2))]),
        "hyper_parameters": dict(hp),
    }
    write("lightning.ckpt", saved(ckpt))

    # A global whose name erases the finding that reports it (a real STACK_GLOBAL, never run).
    def binunicode(s):
        return b"X" + struct.pack("<I", len(s)) + s
    write("global.pkl", b"\x80\x04" + binunicode(b"os") + binunicode(b"system" + ERASE.encode() + OSC_CLIP.encode()) +
          b"\x93" + binunicode(b"true") + b"\x85R.")

    # safetensors metadata (keys and values) and a tensor name, all through JSON escapes.
    header = {"__metadata__": {"note\u202e": "a" + ERASE + "b", "c1": "\u009b31m", "ok": "caf\u00e9"},
              "st" + OSC_TITLE + ".w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    write("metadata.safetensors", struct.pack("<Q", len(h)) + h + struct.pack("<2f", 1.0, 2.0))


if __name__ == "__main__":
    main()
