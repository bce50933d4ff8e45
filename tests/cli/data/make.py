#!/usr/bin/env python3
"""Hostile inputs for the CLI cases, cut from real fixtures (hand-edited bytes are for hostile tests only).
Run from anywhere: python3 tests/cli/data/make.py"""
import io
import os
import struct
import tarfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
src = open(os.path.join(root, "testdata", "t113", "plain_state_dict.pt"), "rb").read()

# Cut in the middle of the tensor data: the end-of-central-directory record is gone.
open(os.path.join(here, "truncated.pt"), "wb").write(src[: len(src) // 2])

# The first BINUNICODE in data.pkl claims 1 MiB.
b = bytearray(src)
name_len, extra_len = struct.unpack_from("<HH", b, 26)
data = 30 + name_len + extra_len
x = b.index(b"X", data)
struct.pack_into("<I", b, x + 1, 1 << 20)
open(os.path.join(here, "lying_length.pt"), "wb").write(bytes(b))

# A tar archive: the format of torch <= 0.1.9, reported as unsupported.
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
    info = tarfile.TarInfo("sys_info")
    payload = b"{}"
    info.size = len(payload)
    t.addfile(info, io.BytesIO(payload))
open(os.path.join(here, "old.tar"), "wb").write(buf.getvalue())
