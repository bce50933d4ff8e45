#!/usr/bin/env python3
"""Adversarial corpus for ckpt (hand-edited bytes are allowed for hostile inputs only): writes
testdata/bad/<name> from real fixtures in testdata/t113 plus hand-made pickles. The exact error ckpt must
print for each lives in testdata/bad/expected.json, maintained by hand: it is the specification of the
message (file, member, offset, what), not a number PyTorch could give. Run: python3 testdata/gen_bad.py"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bad")
SRC = open(os.path.join(HERE, "t113", "plain_state_dict.pt"), "rb").read()


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def first_local_data(b):
    n, e = struct.unpack_from("<HH", b, 26)
    return 30 + n + e


def pkl_bytes(b):
    start = first_local_data(b)
    stop = b.index(b"PK\x03\x04", start)
    return start, stop


def replace_pkl(b, new_pkl):
    """Same archive, data.pkl replaced by `new_pkl` padded to the same length with STOP-after bytes."""
    start, stop = pkl_bytes(b)
    room = stop - start
    assert len(new_pkl) <= room, (len(new_pkl), room)
    return b[:start] + new_pkl + b"\x00" * (room - len(new_pkl)) + b[stop:]


os.makedirs(OUT, exist_ok=True)
eocd = SRC.rfind(b"PK\x05\x06")
z64 = SRC.rfind(b"PK\x06\x06")

# Truncations: in the tensor data (no directory left) and inside the end record.
write("truncated_half.pt", SRC[: len(SRC) // 2])
write("truncated_end_record.pt", SRC[: eocd + 10])
# A data.pkl whose first BINUNICODE claims 1 MiB.
b = bytearray(SRC)
start, _ = pkl_bytes(SRC)
x = b.index(b"X", start)
struct.pack_into("<I", b, x + 1, 1 << 20)
write("lying_binunicode.pt", bytes(b))
# zip64 lies: central directory offset beyond the file; entry count larger than the directory.
b = bytearray(SRC)
struct.pack_into("<Q", b, z64 + 48, 1 << 40)
write("zip64_cd_offset.pt", bytes(b))
b = bytearray(SRC)
struct.pack_into("<Q", b, z64 + 32, 1 << 20)
write("zip64_count.pt", bytes(b))
# Local header name differs from the central directory name.
b = bytearray(SRC)
name_at = 30
b[name_at + len(b"plain_state_dict/data.p")] = ord("x")
write("name_mismatch.pt", bytes(b))
# Two central records pointing at the same local header (overlapping entries).
cd = struct.unpack_from("<Q", SRC, z64 + 48)[0]
b = bytearray(SRC)
# second central record: make it point at the first entry's local header
second = SRC.index(b"PK\x01\x02", cd + 4)
struct.pack_into("<I", b, second + 42, 0)
write("overlapping_entries.pt", bytes(b))
# A deflated data/ entry (zip bomb shape): storage data must be stored, never inflated.
b = bytearray(SRC)
rec = SRC.index(b"PK\x01\x02" , cd)
while True:
    nlen = struct.unpack_from("<H", SRC, rec + 28)[0]
    nm = SRC[rec + 46: rec + 46 + nlen]
    if b"/data/0" in nm:
        break
    rec = SRC.index(b"PK\x01\x02", rec + 4)
struct.pack_into("<H", b, rec + 10, 8)  # method 8 in the central record
write("deflated_storage.pt", bytes(b))

# Hand-made pickles.
write("deep_nesting.pkl", b"\x80\x02N" + b"\x85" * 5000 + b".")
write("memo_abuse.pkl", b"\x80\x02Nr\xff\xff\xff\xffj\xfe\xff\xff\xff.")
write("memo_missing.pkl", b"\x80\x02h\x07.")
write("lying_frame.pkl", b"\x80\x04\x95" + struct.pack("<Q", 1 << 30) + b"N.")
write("no_stop.pkl", b"\x80\x02}q\x00")
name = b"serialization.os.system"
write("dotted_stack_global.pkl", b"\x80\x04\x8c\x05torch\x8c" + bytes([len(name)]) + name + b"\x93\x8c\x04true\x85R.")
write("obj_hidden.pkl", b"(cos\nsystem\nS'true'\no0}.")
write("inst_hidden.pkl", b"(S'true'\nios\nsystem\n0}.")
write("huge_string.pkl", b"\x80\x04\x8d" + struct.pack("<Q", 1 << 40) + b"abc.")
write("unknown_opcode.pkl", b"\x80\x02\xff.")
# data.pkl whose first storage claims 1 element: its tensor reaches past it.
b = bytearray(SRC)
cpu = b.index(b"cpu", start)
k = b.index(b"K", cpu)  # BININT1 numel after the location (and its BINPUT)
b[k + 1] = 1
write("storage_overrun.pt", bytes(b))
