#!/usr/bin/env python3
"""Files torch.load accepts although nothing in torch writes them that way, and their near misses that it
refuses (issue [K], part 3). Writes testdata/permissive/<name> and testdata/permissive/expected.json with
what PyTorch itself does with each file: torch 1.13 (this interpreter) and torch 2.6 (the Debian trixie
chroot, with its default weights_only=True and with weights_only=False). ckpt must read every file some
torch accepts, with the tensors torch returns, and refuse the others (tests/test_formats.cc).

  /usr/bin/python3 testdata/gen_permissive.py            fixtures + torch 1.13 + torch 2.6 (needs root
                                                         and /work/jtests-trixie; --chroot DIR to change)
  python3 gen_permissive.py --probe DIR                  (inside the chroot) the running torch's answers

Families (the bytes are edited by hand on purpose: torch cannot write them, torch.load reads them):
  zip_*     torch.save archives with bytes after the end record, duplicate member names (miniz finds a name
            by a binary search over a heap-sorted, case-insensitive index: which copy it reads depends on
            the order), case and prefix games (torch's prefix is the first central record's folder).
  legacy_*  torch.save(_use_new_zipfile_serialization=False) streams whose magic number / protocol version /
            sys_info / key list pickles are encoded differently (torch compares values: magic_number !=
            MAGIC_NUMBER).
  tar_*     the tar format of torch <= 0.1.9 (members sys_info, pickle, tensors, storages), written here
            following torch/serialization.py's legacy_load reader exactly (and the 0.1.x writer's layout).
  self_*    containers that contain themselves, saved by torch.save itself.
"""
import collections
import hashlib
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "permissive")
MAGIC = 0x1950A86A20F9469CFC6C

# ckpt refuses these on purpose although a torch accepts them (the reason goes into expected.json).
DELIBERATE = {
    "legacy_magic_reduce_int.pt": (
        "magic number is computed by a call",
        "the magic number is computed by a call (builtins.int): ckpt does not run pickled code",
    ),
    "legacy_keys_missing.pt": (
        "is missing from the stream",
        "torch leaves the storage uninitialized (its values are whatever memory held); ckpt reports the file as damaged",
    ),
}
# torch returns uninitialized memory for some tensor of these: their values are not recorded.
UNINITIALIZED = {"legacy_keys_missing.pt"}
# ckpt cannot read these yet because its pickle VM (src/core/pickle.cc) needs a change; each names it.
PENDING = {
    "self_dict_many.pt": "a container that receives itself many times must not count each insertion as one more level of nesting",
}

# --------------------------------------------------------------------------------------------------------
# What torch.load returns, as ckpt names it


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def describe_tensor(name, t):
    c = t.detach().contiguous()
    raw = c.numpy().tobytes() if c.numel() else b""
    d = {
        "name": name,
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "numel": t.numel(),
        "bytes": t.numel() * t.element_size(),
        "crc32": zlib.crc32(raw),  # of the elements in row-major order
    }
    if len(raw) <= 64:
        d["hex"] = raw.hex()
    return d


def walk(obj, path, on_path, out):
    """Tensors of a loaded object by dotted path, as ckpt names them. A container met again on the way
    down from the root (a cycle) is not entered again: torch's object has each tensor once there."""
    import torch

    if isinstance(obj, torch.Tensor):
        out.append(describe_tensor(path, obj))
        return
    if isinstance(obj, torch.nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            out.append(describe_tensor(k if not path else path + "." + k, v))
        return
    if id(obj) in on_path:
        return
    on_path = on_path | {id(obj)}
    join = (lambda k: str(k)) if not path else (lambda k: path + "." + str(k))
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, (str, int)):
                walk(v, join(k), on_path, out)
    elif isinstance(obj, (list, tuple)):
        for k, v in enumerate(obj):
            walk(v, join(k), on_path, out)


def load_one(path, kwargs):
    import torch

    try:
        obj = torch.load(path, map_location="cpu", **kwargs)
    except BaseException as e:  # noqa: BLE001 - torch raises anything (KeyError, RuntimeError, ...)
        msg = (type(e).__name__ + ": " + str(e)).splitlines()[0][:200]
        return {"accepted": False, "error": msg}
    out = []
    walk(obj, "", set(), out)
    return {"accepted": True, "tensors": out}


def probe(directory):
    """The running torch's answer for every fixture. All loads run in one child process per mode; should
    that process die (a crash is an answer too), each file is loaded in a process of its own."""
    import torch

    modes = {"default": {}}
    if not torch.__version__.startswith("1."):
        modes["weights_only_false"] = {"weights_only": False}
    names = sorted(n for n in os.listdir(directory) if n != "expected.json")
    answers = {"torch": torch.__version__, "files": {n: {} for n in names}}
    me = os.path.abspath(__file__)
    for mode, kw in modes.items():
        r = subprocess.run([sys.executable, me, "--load-all", directory, json.dumps(kw)], capture_output=True, text=True)
        if r.returncode == 0:
            for n, a in json.loads(r.stdout).items():
                answers["files"][n][mode] = a
            continue
        for n in names:
            r = subprocess.run([sys.executable, me, "--load", os.path.join(directory, n), json.dumps(kw)],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                answers["files"][n][mode] = json.loads(r.stdout)
            else:
                answers["files"][n][mode] = {"accepted": False,
                                             "error": "process died (%d): %s" % (r.returncode, r.stderr.strip()[-200:])}
    return answers


# --------------------------------------------------------------------------------------------------------
# Writers


def torch_save(obj, **kw):
    import torch

    b = io.BytesIO()
    torch.save(obj, b, **kw)
    return b.getvalue()


def zip_members(data):
    """(name, bytes) of a torch.save archive, in central directory order."""
    import zipfile

    z = zipfile.ZipFile(io.BytesIO(data))
    return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_zip(members, align=64):
    """A stored zip like torch's (data aligned to 64 bytes by an 'FB' extra field, sizes in the central
    directory), but of whatever members we list: duplicates and odd names included."""
    out = bytearray()
    central = bytearray()
    for name, data in members:
        nb = name.encode("utf-8")
        off = len(out)
        pad = (-(off + 30 + len(nb) + 4)) % align
        extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        crc = zlib.crc32(data)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, crc, len(data), len(data), len(nb), len(extra))
        out += nb + extra + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, crc, len(data), len(data), len(nb), 0, 0,
                               0, 0, 0, off) + nb
    cd = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), cd, 0)
    return bytes(out)


def renamed(members, old_prefix, new_prefix):
    return [(new_prefix + n[len(old_prefix):] if n.startswith(old_prefix) else n, d) for n, d in members]


def pickle_end(data, start):
    import pickletools

    f = io.BytesIO(data)
    f.seek(start)
    for _ in pickletools.genops(f):
        pass
    return f.tell()


def stable_legacy(data):
    """A legacy stream whose storage keys (str(storage._cdata): addresses, new at every run, and so in a
    new sorted order each time) are renamed '0', '1', ... in the order the object first names them, with
    the key list and the storage bytes after it put in that order: the fixtures stay the same from run to
    run. Nothing in a legacy stream is an absolute offset, so the strings may change length."""
    itemsize = {"FloatStorage": 4, "LongStorage": 8, "HalfStorage": 2, "DoubleStorage": 8, "IntStorage": 4,
                "ByteStorage": 1, "BoolStorage": 1}
    ends = [0]
    for _ in range(5):
        ends.append(pickle_end(data, ends[-1]))
    old_keys = pickle.loads(data[ends[4]:ends[5]])
    order, cls = [], {}

    class Names(pickle.Unpickler):  # runs nothing of torch's: records the persistent ids in order
        def find_class(self, module, name):
            if module == "torch" and name.endswith("Storage"):
                return name
            if module.startswith("torch"):
                return lambda *a, **k: None
            return super().find_class(module, name)

        def persistent_load(self, pid):
            if pid[2] not in cls:
                order.append(pid[2])
                cls[pid[2]] = pid[1]

    Names(io.BytesIO(data[ends[3]:ends[4]])).load()
    assert sorted(order) == sorted(old_keys) and len(order) <= 10
    rename = {k: str(i) for i, k in enumerate(order)}
    blocks, pos = {}, ends[5]
    for k in old_keys:
        count = struct.unpack_from("<q", data, pos)[0]
        size = 8 + count * itemsize[cls[k]]
        blocks[k] = data[pos:pos + size]
        pos += size
    assert pos == len(data)
    obj = data[ends[3]:ends[4]]
    for k, new in rename.items():  # an old key has 2+ digits, a new one 1: no record matches another
        obj = obj.replace(b"X" + struct.pack("<I", len(k)) + k.encode(), b"X" + struct.pack("<I", len(new)) + new.encode())
    keys = pickle.dumps([rename[k] for k in order], 2)
    return data[:ends[3]] + obj + keys + b"".join(blocks[k] for k in order)


def frame(body):
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


class OldTorchPickler(pickle.Pickler):
    """torch 0.1.x's pickler for the tar format: a plain tensor becomes the persistent id str(key); a
    module class becomes (class, source_file, source) once (torch then only checks the source)."""

    def __init__(self, f, keys):
        super().__init__(f, protocol=2)
        self.keys = keys
        self.classes = set()

    def persistent_id(self, obj):
        import torch

        if type(obj) is torch.Tensor:
            return str(self.keys[tensor_sig(obj)])
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            if obj in self.classes:
                return None
            self.classes.add(obj)
            return (obj, None, None)
        return None


def tensor_sig(t):
    """One key per distinct view (a Parameter's .data is a new object at every access)."""
    return (t.storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def tensor_list(obj, out):
    import torch

    if type(obj) is torch.Tensor:
        out.append(obj)
    elif isinstance(obj, torch.nn.Module):
        for v in list(obj.parameters()) + list(obj.buffers()):
            out.append(v.data)
    elif isinstance(obj, dict):
        for v in obj.values():
            tensor_list(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            tensor_list(v, out)
    return out


def tar_parts(obj, views=(), fill=None):
    """The four members of a torch <= 0.1.9 tar checkpoint, as torch/serialization.py's legacy_load
    reads them back:
      sys_info  pickle({protocol_version, little_endian, type_sizes})
      pickle    the object; tensors are persistent ids str(key)
      tensors   pickle(n), then per tensor pickle((key, storage_key, tensor_type)), int32 ndim, 4 bytes
                (ndim was once 8 bytes), ndim x int64 sizes, ndim x int64 strides, int64 storage offset
      storages  pickle(n), then per storage pickle((key, location, storage_type)), int64 element count, the
                bytes; then pickle([(view_key, root_key, offset, numel), ...])
    `views`: (tensor, offset, numel) tensors whose storage is written as a view of their root storage;
    `fill`: every storage written full of this value instead of its own."""
    import torch

    tensors = tensor_list(obj, [])
    tkeys, skeys, roots = {}, {}, collections.OrderedDict()
    for t in tensors:
        if tensor_sig(t) in tkeys:
            continue
        tkeys[tensor_sig(t)] = 1000 + len(tkeys)
        st = t.storage()
        ptr = st.data_ptr()
        if ptr not in skeys:
            skeys[ptr] = 5000 + len(skeys)
            roots[skeys[ptr]] = st
    view_of = {tensor_sig(t): (off, n) for t, off, n in views}
    body = io.BytesIO()
    OldTorchPickler(body, tkeys).dump(obj)

    tens = io.BytesIO()
    seen = set()
    uniq = [t for t in tensors if not (tensor_sig(t) in seen or seen.add(tensor_sig(t)))]
    storage_views = []
    pickle.dump(len(uniq), tens, protocol=2)
    for t in uniq:
        sk = skeys[t.storage().data_ptr()]
        offset = t.storage_offset()
        if tensor_sig(t) in view_of:
            voff, vn = view_of[tensor_sig(t)]
            vk = 9000 + len(storage_views)
            storage_views.append((vk, sk, voff, vn))
            sk, offset = vk, offset - voff
        type_name = {torch.float32: "FloatTensor", torch.int64: "LongTensor", torch.float16: "HalfTensor",
                     torch.uint8: "ByteTensor", torch.float64: "DoubleTensor"}[t.dtype]
        pickle.dump((tkeys[tensor_sig(t)], sk, getattr(torch, type_name)), tens, protocol=2)
        tens.write(struct.pack("<i", t.dim()) + b"\0\0\0\0")
        tens.write(struct.pack("<%dq" % t.dim(), *t.shape))
        tens.write(struct.pack("<%dq" % t.dim(), *t.stride()))
        tens.write(struct.pack("<q", offset))

    stor = io.BytesIO()
    pickle.dump(len(roots), stor, protocol=2)
    for k, st in roots.items():
        storage_type = {torch.float32: torch.FloatStorage, torch.int64: torch.LongStorage, torch.float16: torch.HalfStorage,
                        torch.uint8: torch.ByteStorage, torch.float64: torch.DoubleStorage}[st.dtype]
        pickle.dump((k, "cpu", storage_type), stor, protocol=2)
        whole = torch.tensor([], dtype=st.dtype).set_(st)
        if fill is not None:
            whole = torch.full_like(whole, fill)
        raw = whole.numpy().tobytes()
        stor.write(struct.pack("<q", st.size()) + raw)
    pickle.dump(storage_views, stor, protocol=2)

    sys_info = io.BytesIO()
    pickle.dump(dict(protocol_version=1001, little_endian=True, type_sizes=dict(short=2, int=4, long=4)), sys_info,
                protocol=2)
    return collections.OrderedDict(
        [("sys_info", sys_info.getvalue()), ("pickle", body.getvalue()), ("tensors", tens.getvalue()),
         ("storages", stor.getvalue())])


def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    """members: list of (name, bytes) or (TarInfo, bytes). mtime 0, no owner: byte-for-byte stable."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            info = name if isinstance(name, tarfile.TarInfo) else tarfile.TarInfo(name)
            info.size = len(data) if data is not None else 0
            info.mtime = 0
            info.mode = info.mode or 0o644
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def tar_checksum(block):
    return 256 + sum(block[:148]) + sum(block[156:512])


def set_tar_checksum(b, at):
    b[at + 148:at + 156] = b" " * 8
    b[at + 148:at + 156] = b"%06o\0 " % tar_checksum(bytes(b[at:at + 512]))


# --------------------------------------------------------------------------------------------------------
# The fixtures


def build():
    import torch

    torch.manual_seed(0)
    files = {}  # name -> (bytes, case, notes)

    def add(name, data, case, notes):
        assert name not in files, name
        files[name] = (data, case, notes)

    def sd(**kv):
        return collections.OrderedDict(kv)

    # ---- zip: bytes after the archive -------------------------------------------------------------
    base_sd = sd(**{"fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "fc.bias": torch.tensor([0.5, -0.5]),
                    "steps": torch.tensor(7)})
    base = torch_save(base_sd)
    add("zip_trailing_1_byte.pt", base + b"\0", "trailing bytes", "torch.save archive + 1 zero byte")
    filler = bytes((k * 7 + 3) % 251 for k in range(4096))
    assert b"PK" not in filler
    # miniz reads the last 4 KiB first; when the end record is not in them it steps back 4093 bytes with
    # unsigned arithmetic, which for an offset under 4093 wraps to a negative one: torch's reader fails.
    add("zip_trailing_4074.pt", base + filler[:4074], "trailing bytes",
        "4074 bytes of filler: the end record is still within the last 4096 bytes")
    add("zip_trailing_4075.pt", base + filler[:4075], "trailing bytes",
        "4075 bytes of filler on a small archive: miniz's second step back wraps below 0 and the read fails")
    add("zip_trailing_4k.pt", base + filler, "trailing bytes", "4096 bytes of filler on a small archive (as above)")
    big = torch_save(sd(w=torch.arange(1100, dtype=torch.float32)))
    assert len(big) + 4096 >= 8189
    add("zip_trailing_4k_big.pt", big + filler, "trailing bytes",
        "4096 bytes of filler after a 5 KB archive: the second step back stays above 0")
    # miniz reads 4 KiB blocks backwards from the end and gives up once a block starts 65557 or more bytes
    # before it: the last byte it looks at is 69584 bytes from the end, so the 22-byte end record may be
    # followed by up to 69562 bytes.
    add("zip_trailing_69562.pt", base + bytes(69562), "trailing bytes",
        "69562 zero bytes after the end record: the farthest miniz's backward scan still finds it")
    add("zip_trailing_69563.pt", base + bytes(69563), "trailing bytes",
        "69563 zero bytes after the end record: one past miniz's backward scan")
    other = torch_save(sd(w=torch.arange(40, dtype=torch.float32)))
    add("zip_trailing_other_zip.pt", base + other, "trailing bytes",
        "another (larger) torch.save archive appended: its end record is the last, its offsets are its own")
    same = torch_save(sd(**{"fc.weight": torch.zeros(2, 3), "fc.bias": torch.ones(2), "steps": torch.tensor(1)}))
    assert len(same) == len(base)
    add("zip_trailing_same_size_zip.pt", base + same, "trailing bytes",
        "an archive of the same layout appended: its directory offsets land on the first archive's directory")
    add("zip_trailing_empty_end_record.pt", base + b"PK\x05\x06" + bytes(18), "trailing bytes",
        "a bare end record (0 entries) appended: the last end record wins")

    # ---- zip: duplicate member names ---------------------------------------------------------------
    m = zip_members(torch_save(sd(a=torch.arange(4, dtype=torch.float32))))
    pre = m[0][0].split("/")[0]
    named = dict(m)
    pkl_b = dict(zip_members(torch_save(sd(b=torch.arange(4, dtype=torch.float32)))))[pre + "/data.pkl"]
    pkl_c = dict(zip_members(torch_save(sd(c=torch.arange(4, dtype=torch.float32)))))[pre + "/data.pkl"]
    d0 = {v: (torch.arange(4, dtype=torch.float32) + v).numpy().tobytes() for v in (0, 10, 100, 1000)}
    P, D, V = pre + "/data.pkl", pre + "/data/0", pre + "/version"
    layouts = {
        "zip_dup_pkl_2_first.pt": [(P, named[P]), (P, pkl_b), (D, d0[0]), (V, named[V])],
        "zip_dup_pkl_2_last.pt": [(D, d0[0]), (V, named[V]), (P, named[P]), (P, pkl_b)],
        "zip_dup_pkl_3.pt": [(P, named[P]), (P, pkl_b), (P, pkl_c), (D, d0[0]), (V, named[V])],
        "zip_dup_pkl_3_spread.pt": [(P, named[P]), (D, d0[0]), (P, pkl_b), (V, named[V]), (P, pkl_c)],
        "zip_dup_data_2.pt": [(P, named[P]), (V, named[V]), (D, d0[0]), (D, d0[10])],
        "zip_dup_data_2_first.pt": [(D, d0[0]), (D, d0[10]), (P, named[P]), (V, named[V])],
        "zip_dup_data_3.pt": [(P, named[P]), (V, named[V]), (D, d0[0]), (D, d0[10]), (D, d0[100])],
        "zip_dup_data_4.pt": [(D, d0[0]), (P, named[P]), (D, d0[10]), (V, named[V]), (D, d0[100]), (D, d0[1000])],
        "zip_dup_version_and_pkl.pt": [(V, b"3\n"), (P, named[P]), (V, b"3\n"), (D, d0[0]), (P, pkl_b)],
    }
    for name, members in layouts.items():
        add(name, write_zip(members), "duplicate member names",
            "members in central directory order: " + ", ".join(n.split("/", 1)[1] for n, _ in members) +
            " (data.pkl copies name tensors a, b, c; data/0 copies hold 0.., 10.., 100.., 1000..)")

    # ---- zip: prefixes and names -------------------------------------------------------------------
    add("zip_plain_rewritten.pt", write_zip(m), "control", "the same members rewritten by the generator's zip writer")
    add("zip_prefix_case.pt",
        write_zip([("Archive/data.pkl", named[P]), ("ARCHIVE/DATA/0", d0[0]), ("archive/Version", named[V])]),
        "member prefixes", "the folder and names differ in case between members (miniz compares names case-blind)")
    add("zip_prefix_mixed.pt", write_zip([(P, named[P]), ("other/data/0", d0[0]), ("other/version", named[V])]),
        "member prefixes", "data.pkl under archive/, the rest under other/: torch's prefix is the first record's")
    add("zip_prefix_first_record_other.pt",
        write_zip([("other/readme", b"hello\n"), (P, named[P]), (D, d0[0]), (V, named[V])]),
        "member prefixes", "a first record in another folder: torch looks for other/data.pkl")
    add("zip_prefix_empty.pt", write_zip([("/data.pkl", named[P]), ("/data/0", d0[0]), ("/version", named[V])]),
        "member prefixes", "names start with '/': the prefix is the empty folder")
    add("zip_prefix_nested.pt", write_zip(renamed(m, pre + "/", "a/b/")), "member prefixes",
        "every member under a/b/: the prefix is 'a', so torch looks for a/data.pkl")
    add("zip_prefix_none.pt", write_zip([("data.pkl", named[P]), ("data/0", d0[0]), ("version", named[V])]),
        "member prefixes", "no folder at all")
    add("zip_prefix_directory_entry.pt", write_zip([(pre + "/", b"")] + m), "member prefixes",
        "a directory record 'archive/' first, then the usual members")
    add("zip_names_case.pt", write_zip([(P, named[P]), (pre + "/DATA/0", d0[10]), (pre + "/VERSION", named[V])]),
        "member prefixes", "the folder as the first record has it, the rest of the names in upper case")
    add("zip_no_version.pt", write_zip([(P, named[P]), (D, d0[0])]), "member prefixes", "no version record")
    for what, member in (("data", D), ("pkl", P)):
        renamed_local = bytearray(write_zip(m))
        at = renamed_local.index(member.encode())  # the local header's name comes before the directory's
        renamed_local[at + len(pre) + 1:at + len(pre) + 2] = b"X"
        add("zip_local_name_differs_%s.pt" % what, bytes(renamed_local), "local headers",
            "%s's local header names it X%s (torch reads names from the central directory only)"
            % (member.split("/", 1)[1], member.split("/", 1)[1][1:]))
    add("zip_extra_members.pt", write_zip(m + [(pre + "/notes.txt", b"x" * 300), ("elsewhere/data.pkl", pkl_b)]),
        "member prefixes", "unrelated members, one of them a data.pkl under another folder")

    # ---- legacy stream: the magic number and the pickles after it ----------------------------------
    legacy_sd = sd(w=torch.arange(6, dtype=torch.float32).reshape(2, 3), n=torch.tensor(7))
    legacy = stable_legacy(torch_save(legacy_sd, _use_new_zipfile_serialization=False))
    mag = pickle.dumps(MAGIC, protocol=2)
    assert legacy.startswith(mag)
    rest = legacy[len(mag):]
    pv = pickle.dumps(1001, protocol=2)
    assert rest.startswith(pv)
    after_pv = rest[len(pv):]
    mb = MAGIC.to_bytes(10, "little")
    magics = {
        "long1": (mag, "LONG1, as torch.save writes it (control)"),
        "long1_padded": (b"\x80\x02\x8a\x0b" + mb + b"\x00.", "LONG1 with a redundant sign byte (11 bytes)"),
        "long4": (b"\x80\x02\x8b" + struct.pack("<i", 10) + mb + b".", "LONG4"),
        "long1_no_proto": (b"\x8a\x0a" + mb + b".", "LONG1 without a PROTO opcode"),
        "proto5": (b"\x80\x05\x8a\x0a" + mb + b".", "PROTO 5 + LONG1"),
        "frame": (frame(b"\x8a\x0a" + mb + b"."), "PROTO 4 + FRAME + LONG1"),
        "memo": (b"\x80\x02\x8a\x0a" + mb + b"q\x000h\x00.", "LONG1, BINPUT, POP, BINGET: the value comes from the memo"),
        "text_long": (b"L%dL\n." % MAGIC, "protocol 0 LONG text, as pickle.dumps(protocol=0) writes it"),
        "text_long_no_suffix": (b"L%d\n." % MAGIC, "LONG text without the trailing L"),
        "text_long_proto2": (b"\x80\x02L%dL\n." % MAGIC, "PROTO 2 + LONG text"),
        "text_long_plus": (b"L+%dL\n." % MAGIC, "LONG text with a '+' sign"),
        "text_int": (b"I%d\n." % MAGIC, "INT text (too big for a C long: Python parses it)"),
        "hex_long": (b"L0x1950a86a20f9469cfc6cL\n.", "LONG text in hexadecimal (int(text, 0))"),
        "hex_int": (b"I0X1950A86A20F9469CFC6C\n.", "INT text in hexadecimal"),
        "octal_long": (b"L0o" + ("%o" % MAGIC).encode() + b"L\n.", "LONG text in octal, 0o prefix"),
        "binary_int": (b"I0b" + bin(MAGIC)[2:].encode() + b"\n.", "INT text in binary, 0b prefix"),
        "underscores_int": (b"I119_547_037_146_038_801_333_356\n.", "INT text with underscores between digits"),
        "spaces_int": (b"I %d \n." % MAGIC, "INT text with spaces around the digits"),
        "leading_zero_long": (b"L0%dL\n." % MAGIC, "LONG text with a leading zero (Python's int(text, 0) refuses it)"),
        "wrong": (b"\x80\x02\x8a\x0a" + (MAGIC + 1).to_bytes(10, "little") + b".", "LONG1 of the magic number + 1"),
        "negative": (b"\x80\x02\x8a\x0a" + (-MAGIC).to_bytes(10, "little", signed=True) + b".", "LONG1 of minus the magic"),
        "reduce_int": (b"\x80\x02cbuiltins\nint\nX\x14\x00\x00\x001950a86a20f9469cfc6cK\x10\x86R.",
                       "builtins.int('1950a86a20f9469cfc6c', 16) by REDUCE: computed when unpickled"),
    }
    for key, (enc, what) in magics.items():
        add("legacy_magic_%s.pt" % key, enc + rest, "legacy magic number", what + ", then the rest of a torch.save legacy stream")
    versions = {
        "float": (b"\x80\x02G" + struct.pack(">d", 1001.0) + b".", "BINFLOAT 1001.0 (1001.0 == 1001 in Python)"),
        "binint": (b"\x80\x02J" + struct.pack("<i", 1001) + b".", "BININT"),
        "int_text": (b"I1001\n.", "INT text"),
        "int_spaces": (b"I 1001 \n.", "INT text with spaces"),
        "long_text": (b"L1001L\n.", "LONG text"),
        "long1_padded": (b"\x80\x02\x8a\x09" + (1001).to_bytes(9, "little") + b".", "LONG1 of 9 bytes"),
        "1000": (b"\x80\x02M\xe8\x03.", "1000"),
        "true": (b"\x80\x02\x88.", "True"),
    }
    for key, (enc, what) in versions.items():
        add("legacy_version_%s.pt" % key, mag + enc + after_pv, "legacy protocol version", "protocol version pickle: " + what)
    sys_end = pickle_end(legacy, len(mag) + len(pv))
    after_sys = legacy[sys_end:]
    big_endian = pickle.dumps(dict(protocol_version=1001, little_endian=False, type_sizes=dict(short=2, int=4, long=4)), 2)
    for key, (enc, what) in {"none": (b"N.", "None"), "int": (b"K\x05.", "5"),
                             "big_endian": (big_endian, "little_endian=False (torch reads the bytes as they are)")}.items():
        add("legacy_sys_info_%s.pt" % key, mag + pv + enc + after_sys, "legacy sys_info", "sys_info pickle: " + what)
    obj_end = pickle_end(legacy, sys_end)
    keys_end = pickle_end(legacy, obj_end)
    keys = pickle.loads(legacy[obj_end:keys_end])
    add("legacy_keys_tuple.pt", legacy[:obj_end] + pickle.dumps(tuple(keys), 2) + legacy[keys_end:], "legacy key list",
        "the storage key list pickled as a tuple")
    add("legacy_keys_missing.pt", legacy[:obj_end] + pickle.dumps(keys[:1], 2) + legacy[keys_end:], "legacy key list",
        "a storage used by a tensor is left out of the key list (and its bytes follow unread)")

    # ---- tar (torch <= 0.1.9) ----------------------------------------------------------------------
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b_ = torch.tensor([1.5, 2.5, 3.5])
    tar_sd = sd(**{"fc.weight": w, "fc.bias": b_, "fc.weight_t": w.t(), "fc.bias_tail": b_[1:], "tied": w,
                   "half": torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float16),
                   "bn.num_batches_tracked": torch.tensor(3), "flags": torch.tensor([1, 0, 1], dtype=torch.uint8)})
    parts = tar_parts(tar_sd)
    add("tar_state_dict.pt", tar_bytes(list(parts.items())), "tar",
        "torch <= 0.1.9 layout (PAX format, members sys_info, pickle, tensors, storages); tied, transposed and offset views")
    add("tar_gnu.pt", tar_bytes([("x" * 150, b"long name\n")] + list(parts.items()), tarfile.GNU_FORMAT), "tar",
        "GNU format, a first member with a 150-byte name (././@LongLink)")
    add("tar_pax_long_name.pt", tar_bytes([("y" * 150, b"long name\n")] + list(parts.items()), tarfile.PAX_FORMAT), "tar",
        "PAX format, a first member with a 150-byte name (an 'x' extended header carries it)")
    add("tar_ustar_prefix.pt", tar_bytes([("d" * 90 + "/" + "z" * 90, b"prefixed\n")] + list(parts.items()),
                                         tarfile.USTAR_FORMAT), "tar",
        "ustar format, a first member whose 181-byte name is split into prefix + name")
    v7 = bytearray(tar_bytes(list(parts.items()), tarfile.USTAR_FORMAT))
    pos = 0
    while pos + 512 <= len(v7) and any(v7[pos:pos + 512]):
        size = int(v7[pos + 124:pos + 136].split(b"\0")[0] or b"0", 8)
        v7[pos + 257:pos + 265] = bytes(8)  # no magic, no version: a pre-POSIX (v7) header
        v7[pos + 265:pos + 500] = bytes(235)
        set_tar_checksum(v7, pos)
        pos += 512 + (size + 511) // 512 * 512
    add("tar_v7.pt", bytes(v7), "tar", "pre-POSIX (v7) headers: no 'ustar' magic, only the checksum says tar")
    nines = tar_parts(tar_sd, fill=9)["storages"]
    add("tar_dup_storages.pt", tar_bytes(list(parts.items()) + [("storages", nines)]), "tar",
        "two 'storages' members: tarfile's getmember gives the last one (its values are all 9)")
    add("tar_missing_tensors.pt", tar_bytes([(k, v) for k, v in parts.items() if k != "tensors"]), "tar",
        "no 'tensors' member")
    junk = tarfile.TarInfo("junk")
    junk.type = tarfile.DIRTYPE
    add("tar_directory_entry.pt", tar_bytes([(junk, None)] + list(parts.items())), "tar", "a directory member first")
    root = torch.arange(10, dtype=torch.float32)
    viewed = root[4:8]
    vparts = tar_parts(sd(root=root, viewed=viewed), views=[(viewed, 4, 4)])
    add("tar_storage_view.pt", tar_bytes(list(vparts.items())), "tar",
        "'viewed' uses a storage written as a view (root storage, offset 4, 4 elements)")
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3))
        lin.bias.copy_(torch.tensor([0.25, 0.75]))
    add("tar_module.pt", tar_bytes(list(tar_parts(lin).items())), "tar",
        "a whole nn.Linear pickled (class as a persistent id, parameters rebuilt around persistent-id tensors)")
    good = tar_bytes(list(parts.items()))
    bad_after = bytearray(tar_bytes(list(parts.items()) + [("trailer", b"t" * 10)]))
    at = bad_after.index(b"trailer\0")
    assert at % 512 == 0
    bad_after[at + 148:at + 156] = b"0000000\0"
    add("tar_bad_checksum_after.pt", bytes(bad_after), "tar",
        "a member with a bad checksum after the four members: tarfile ends the archive there")
    bad_before = bytearray(tar_bytes([("trailer", b"t" * 10)] + list(parts.items())))
    bad_before[148:156] = b"0000000\0"
    add("tar_bad_checksum_first.pt", bytes(bad_before), "tar",
        "the first header's checksum is wrong: not a tar, and not a pickle either")
    b256 = bytearray(good)
    assert b256[0:8] == b"sys_info"
    size = int(b256[124:136].split(b"\0")[0], 8)
    b256[124:136] = b"\x80" + size.to_bytes(11, "big")
    set_tar_checksum(b256, 0)
    add("tar_base256_size.pt", bytes(b256), "tar", "sys_info's size field in GNU base-256")
    cut = good.index(b"storages\0") + 512 + 40
    add("tar_truncated.pt", good[:cut], "tar", "cut 40 bytes into the storages member's data")
    long_size = bytearray(good)
    at = good.index(b"storages\0")
    long_size[at + 124:at + 136] = b"%011o\0" % (len(good) * 2)
    set_tar_checksum(long_size, at)
    add("tar_size_past_end.pt", bytes(long_size), "tar", "the storages member claims more bytes than the file has")

    # ---- containers that contain themselves -------------------------------------------------------
    d = {}
    d["self"] = d
    d["w"] = torch.arange(3, dtype=torch.float32)
    add("self_dict.pt", torch_save(d), "self-referencing containers", "d = {}; d['self'] = d; d['w'] = tensor")
    add("self_dict_legacy.pt", stable_legacy(torch_save(d, _use_new_zipfile_serialization=False)), "self-referencing containers",
        "the same dict in a legacy stream")
    od = collections.OrderedDict()
    od["w"] = torch.ones(2)
    od["me"] = od
    od["b"] = torch.zeros(1)
    add("self_ordered_dict.pt", torch_save(od), "self-referencing containers", "an OrderedDict state dict that holds itself")
    lst = [torch.arange(2, dtype=torch.int64)]
    lst.append(lst)
    lst.append({"back": lst, "t": torch.ones(1, dtype=torch.float64)})
    add("self_list.pt", torch_save(lst), "self-referencing containers", "a list holding itself, and a dict holding the list")
    inner = {"t": torch.full((2,), 5.0)}
    outer = {"inner": inner, "w": torch.ones(3)}
    inner["up"] = outer
    inner["same"] = inner
    add("self_mutual.pt", torch_save(outer), "self-referencing containers", "two dicts that hold each other")
    many = {}
    for k in range(1500):
        many["k%d" % k] = many
    many["w"] = torch.ones(1)
    add("self_dict_many.pt", torch_save(many), "self-referencing containers", "a dict holding itself under 1500 keys")
    return files


# --------------------------------------------------------------------------------------------------------


def dump_json(obj, indent=0):
    """json.dump(indent=1), but a tensor (a dict with "numel") on one line."""
    pad = " " * (indent + 1)
    if isinstance(obj, dict) and obj and "numel" not in obj:
        items = [pad + json.dumps(k) + ": " + dump_json(v, indent + 1) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        return "[\n" + ",\n".join(pad + dump_json(v, indent + 1) for v in obj) + "\n" + " " * indent + "]"
    return json.dumps(obj)


def brief(answer, uninitialized=False):
    """A torch answer without the values' bytes (the crc32 still shows what was read; not even that where
    torch returns uninitialized memory)."""
    if not answer["accepted"]:
        return answer
    drop = ("hex", "crc32") if uninitialized else ("hex",)
    return {"accepted": True, "tensors": [{k: v for k, v in t.items() if k not in drop} for t in answer["tensors"]]}


def merge(files, t113, t26):
    out = collections.OrderedDict()
    for name in sorted(files):
        data, case, notes = files[name]
        e = collections.OrderedDict()
        e["case"] = case
        e["notes"] = notes
        e["sha256"] = hashlib.sha256(data).hexdigest()
        answers = collections.OrderedDict()
        answers["torch_" + t113["torch"]] = t113["files"][name]["default"]
        if t26:
            answers["torch_" + t26["torch"]] = t26["files"][name]["default"]
            answers["torch_" + t26["torch"] + " weights_only=False"] = t26["files"][name]["weights_only_false"]
        e["torch"] = collections.OrderedDict((k, brief(a, name in UNINITIALIZED)) for k, a in answers.items())
        accepted = [a for a in answers.values() if a["accepted"]]
        ck = collections.OrderedDict()
        if accepted and name not in DELIBERATE:
            want = accepted[0]["tensors"]
            for a in accepted[1:]:
                assert a["tensors"] == want, name  # every torch that reads it reads the same
            ck["accepted"] = True
            ck["tensors"] = want
            if name in PENDING:
                ck["pending"] = PENDING[name]
        else:
            ck["accepted"] = False
            if name in DELIBERATE:
                ck["error_contains"], ck["why"] = DELIBERATE[name]
            else:
                ck["why"] = "no torch accepts it"
        e["ckpt"] = ck
        out[name] = e
    return out


def main():
    if sys.argv[1:2] == ["--load"]:
        print(json.dumps(load_one(sys.argv[2], json.loads(sys.argv[3]))))
        return
    if sys.argv[1:2] == ["--load-all"]:
        import warnings

        warnings.simplefilter("ignore")
        d, kw = sys.argv[2], json.loads(sys.argv[3])
        print(json.dumps({n: load_one(os.path.join(d, n), kw) for n in sorted(os.listdir(d)) if n != "expected.json"}))
        return
    if sys.argv[1:2] == ["--probe"]:
        print(json.dumps(probe(sys.argv[2])))
        return
    chroot = "/work/jtests-trixie"
    if sys.argv[1:2] == ["--chroot"]:
        chroot = sys.argv[2]
    files = build()
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for name, (data, _, _) in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    t113 = probe(OUT)
    # torch 2.6 runs in the chroot on a copy of the fixtures and of this script.
    work = os.path.join(chroot, "tmp", "gen_permissive")
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    shutil.copy(os.path.abspath(__file__), work)
    shutil.copytree(OUT, os.path.join(work, "permissive"))
    r = subprocess.run(["chroot", chroot, "python3", "/tmp/gen_permissive/gen_permissive.py", "--probe",
                        "/tmp/gen_permissive/permissive"], capture_output=True, text=True, check=True)
    t26 = json.loads(r.stdout)
    shutil.rmtree(work)
    expected = collections.OrderedDict()
    expected["generator"] = "testdata/gen_permissive.py"
    expected["torch_versions"] = [t113["torch"], t26["torch"]]
    expected["rule"] = ("ckpt reads a file when some torch accepts it (1.13, or 2.6 with or without weights_only), with "
                        "the tensors torch returns; it refuses the others, and the few under ckpt.error_contains on purpose. "
                        "ckpt.pending: accepted by torch, refused by ckpt until its pickle VM changes as said.")
    expected["fixtures"] = merge(files, t113, t26)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        f.write(dump_json(expected) + "\n")
    n_ok = sum(1 for e in expected["fixtures"].values() if e["ckpt"]["accepted"])
    print("wrote %d fixtures (%d to read, %d to refuse) to %s" % (len(files), n_ok, len(files) - n_ok, OUT))


if __name__ == "__main__":
    main()
