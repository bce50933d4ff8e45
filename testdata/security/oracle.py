#!/usr/bin/env python3
"""The oracle of the security corpus: what Python itself would call when it loads a file.

    python3 oracle.py ALLOWLIST.json OUT.json FILE...      (run by gen_security.py, never by a test)
    python3 oracle.py --allowlist OUT.json                  (this torch's weights_only allowlist)

Runs under Debian 12's /usr/bin/python3 (Python 3.11, torch 1.13) and under Debian 13's python3
(Python 3.13, torch 2.6). For every FILE it performs, in a forked child with a time limit and with
CKPT_SENTINEL pointing into an empty temporary directory:

- `torch.load(FILE, weights_only=False, map_location="cpu", pickle_module=Recorder)`: torch.load
  reads every pickle it would read anyway (the five of a legacy stream, `storages` / `tensors` /
  `pickle` of the legacy tar format, the zip's `data.pkl`) through `Recorder.Unpickler` or
  `Recorder.load`, from the same file objects it always uses (an `open()`ed file, or an
  `io.BytesIO` of the zip record), so framing and trailing bytes behave exactly as in a real load;
- for a file that is not a zip, also `Recorder.Unpickler(open(FILE, "rb")).load()`: what
  `pickle.load(f)` would do, and `Recorder.Unpickler(io.BytesIO(bytes of FILE)).load()`: what
  `torch.load(io.BytesIO(b))` and any reader of a file object without peek() do (loader
  `pickle.load(BytesIO)`): the C unpickler reads a FRAME there into a buffer of exactly its length and
  goes on at the frame's end when a read does not fit, where over an open()ed file it mostly reads on
  contiguously (peek), so a pickle that splits an opcode across a FRAME's end can name other globals;
- for *.npy / *.npz, also `numpy.load(FILE, allow_pickle=True)` (informational only).

`Recorder.Unpickler` is the C `pickle.Unpickler` (the one torch uses) with `find_class` replaced:

- the names are first resolved by the C unpickler itself (Python 2 names mapped for protocols < 3,
  dotted names walked for protocols >= 4), with `__import__` and `sys.modules` swapped for
  recording placeholders during that call, so nothing is imported;
- a global on ALLOWLIST (the union of `torch._weights_only_unpickler._get_allowed_globals()` of
  torch 1.13 and 2.6) is imported for real and returned; a function among them is wrapped, so that
  whatever it calls is marked as called *indirectly* (an allowlisted function calling an argument);
- a few pure builtins (`int`, `str`, `float`, `bytes`, `bool`, `tuple`, `list`, `dict`,
  `frozenset`) are returned for real but every call is recorded (a computed magic number needs a
  real `int`);
- `torch.storage._load_from_bytes` is recorded and then followed: its bytes are loaded with
  `torch.load(io.BytesIO(b), weights_only=False, pickle_module=Recorder)`, as the real one does;
- a global whose module imports here but lacks the name is reported `missing` and raises, as the
  real find_class would (the load stops there); a module that is not installed here, `__main__`, a
  `*.__main__` script or a module with import side effects is not imported and counts as present;
- every other global is a STUB class, created on the spot, that records being referenced (returned
  by find_class), called (REDUCE, OBJ, INST: `stub(*args)`; NEWOBJ / NEWOBJ_EX / OBJ without
  arguments: `stub.__new__(stub, ...)`) and built (BUILD: `__setstate__`, on the class or on an
  instance it returned). It runs nothing.

Output: {FILE: {"loaders": {NAME: {"events": [...], "error": str|null, "crashed": bool}}}} where
an event is {"global", "event": "referenced"|"call"|"new"|"build"|"missing", "indirect": bool, "nested": int}.
A sentinel that appears after any file aborts the run (exit 2): the oracle must run nothing. So
does an audit event of real execution in a child (a process, a socket, ctypes, a write outside the
temporary directory, building a code object or a function): an audit hook stops the child at once.
"""

import builtins
import importlib
import io
import json
import os
import pickle
import signal
import sys
import tempfile
import types

TIME_LIMIT = 20

EVENTS = []
STATE = {"indirect": 0, "nested": 0}
REAL_ALLOWED = {}
PASS_THROUGH = {"builtins." + n: getattr(builtins, n)
                for n in ("int", "str", "float", "bytes", "bool", "tuple", "list", "dict", "frozenset")}
_MISSING = object()


def record(name, event):
    EVENTS.append({"global": name, "event": event, "indirect": STATE["indirect"] > 0,
                   "nested": STATE["nested"]})


# ---------------------------------------------------------------------------------------------
# Stubs
# ---------------------------------------------------------------------------------------------

class _SetState:
    """__setstate__ for the stub class and its instances: BUILD finds it either way."""

    def __get__(self, obj, owner):
        def setstate(*state):
            record(owner._ckpt_global, "build")
        return setstate


class _Derived:
    """Anything obtained from a stub's result (an attribute, a call of the result): inert."""

    def __init__(self, origin):
        self._origin = origin

    def __call__(self, *a, **k):
        return _Derived(self._origin)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Derived(self._origin)

    def __iter__(self):
        return iter(())

    def __setitem__(self, k, v):
        pass

    def __repr__(self):
        return "<result of %s>" % self._origin


class _StubMeta(type):
    def __call__(cls, *args, **kwargs):
        record(cls._ckpt_global, "call")
        return object.__new__(cls)

    def __repr__(cls):
        return "<stub %s>" % cls._ckpt_global


def _stub_new(cls, *args, **kwargs):
    record(cls._ckpt_global, "new")
    return object.__new__(cls)


def _inst_getattr(self, name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    return _Derived(type(self)._ckpt_global)


def make_stub(fullname):
    ns = {
        "_ckpt_global": fullname,
        "__new__": staticmethod(_stub_new),
        "__init__": lambda self, *a, **k: None,
        "__setstate__": _SetState(),
        "__getattr__": _inst_getattr,
        "__setitem__": lambda self, k, v: None,
        "__iter__": lambda self: iter(()),
        "__call__": lambda self, *a, **k: _Derived(fullname),
        "__reduce__": lambda self: (str, ("<stub>",)),
        "__repr__": lambda self: "<%s instance>" % fullname,
    }
    return _StubMeta("Stub", (object,), ns)


def wrap_allowed(fullname, obj):
    """A real allowlisted function, marking what it calls as indirect."""
    if not isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return obj

    def call_through(*args, **kwargs):
        STATE["indirect"] += 1
        try:
            return obj(*args, **kwargs)
        finally:
            STATE["indirect"] -= 1
    call_through.__name__ = getattr(obj, "__name__", "allowed")
    call_through.__qualname__ = getattr(obj, "__qualname__", "allowed")
    call_through.__module__ = getattr(obj, "__module__", None)
    return call_through


def pass_through(fullname, obj):
    def call_through(*args, **kwargs):
        record(fullname, "call")
        return obj(*args, **kwargs)
    return call_through


def load_from_bytes(*args, **kwargs):
    record("torch.storage._load_from_bytes", "call")
    (b,) = args  # the real one takes exactly one argument
    import torch
    STATE["nested"] += 1
    try:
        return torch.load(io.BytesIO(b), weights_only=False, pickle_module=Recorder, map_location="cpu")
    finally:
        STATE["nested"] -= 1


# ---------------------------------------------------------------------------------------------
# Name resolution by the C unpickler itself, with nothing imported
# ---------------------------------------------------------------------------------------------

class _PathRecorder:
    def __init__(self, path):
        self._ckpt_path = path

    def __getattr__(self, name):
        if "." in name:  # a real module has no attribute whose name holds a dot
            raise AttributeError(name)
        return _PathRecorder(self._ckpt_path + [name])


class _ResolveModule(types.ModuleType):
    def __repr__(self):  # (in the unpickler's error messages: no object address)
        return "<module %r>" % self.__name__

    def __getattr__(self, name):
        if "." in name:
            raise AttributeError(name)
        return _PathRecorder([name])


def resolve_names(base_find_class, unpickler, module, name):
    """(module, dotted attribute path) as the C find_class would import and walk them."""
    captured = {}
    saved = {}
    real_import = builtins.__import__

    def fake_import(mname, *a, **k):
        captured["module"] = mname
        if mname not in saved:
            saved[mname] = sys.modules.get(mname, _MISSING)
        mod = _ResolveModule(mname)
        sys.modules[mname] = mod
        return mod

    builtins.__import__ = fake_import
    try:
        got = base_find_class(unpickler, module, name)
    finally:
        builtins.__import__ = real_import
        for k, v in saved.items():
            if v is _MISSING:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    if isinstance(got, _PathRecorder):
        return captured["module"], ".".join(got._ckpt_path)
    raise pickle.UnpicklingError("unexpected resolution of %s %s" % (module, name))


def real_global(mod, path):
    obj = __import__(mod, fromlist=["_"])
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# Modules whose import does something (or runs a program): never imported to check a name.
NO_IMPORT = {"antigravity", "this", "__hello__", "__phello__", "idlelib.idle"}


def exists(mod, path):
    """Whether Python could resolve mod + path here: True, False (the module imports but lacks the
    name: the real load stops there), or None (not checked: the module is not installed here, it is
    __main__ or a *.__main__ script, or importing it has side effects). Imports happen only in the
    forked child, as torch.load itself would import them."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in mod + path):
        return False  # no installed module or attribute is named with control characters
    if mod in NO_IMPORT or "__main__" in mod.split("."):
        return None
    STATE["importing"] = True
    try:
        obj = importlib.import_module(mod)
    except BaseException:  # noqa: BLE001 - not importable here: environment, not file
        return None
    finally:
        STATE["importing"] = False
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except BaseException:  # noqa: BLE001
            return False
    return True


_CUnpickler = pickle.Unpickler  # the C unpickler, captured before install_recorder()


class _Unpickler(_CUnpickler):
    def find_class(self, module, name):
        mod, path = resolve_names(_CUnpickler.find_class, self, module, name)
        full = "%s.%s" % (mod, path)
        if full in REAL_ALLOWED:
            obj = REAL_ALLOWED[full]
            if obj is None:
                try:
                    obj = wrap_allowed(full, real_global(mod, path))
                except (ImportError, AttributeError):
                    obj = _MISSING
                REAL_ALLOWED[full] = obj
            if obj is _MISSING:  # on the other torch version's allowlist, absent from this one
                record(full, "missing")
                raise AttributeError("Can't get attribute %r on module %r" % (path, mod))
            return obj
        if full in PASS_THROUGH:
            return pass_through(full, PASS_THROUGH[full])
        if full == "torch.storage._load_from_bytes":
            return load_from_bytes
        if exists(mod, path) is False:
            record(full, "missing")
            raise AttributeError("Can't get attribute %r on module %r" % (path, mod))
        record(full, "referenced")
        return make_stub(full)


Recorder = types.ModuleType("ckpt_oracle_pickle")
Recorder.__dict__.update({k: v for k, v in pickle.__dict__.items() if not k.startswith("__")})
Recorder.Unpickler = _Unpickler
Recorder.load = lambda f, **kw: _Unpickler(f, **kw).load()
Recorder.loads = lambda b, **kw: _Unpickler(io.BytesIO(b), **kw).load()


def install_recorder():
    """Make every unpickling in this (child) process go through the Recorder.

    Needed, not only prudent: Debian's torch 1.13 ignores `pickle_module` when weights_only=False
    (`else: pickle_module = pickle` in torch.load), so torch.serialization's own `pickle` name is
    replaced too, and so are the stdlib's pickle / _pickle entry points, for anything else."""
    import _pickle
    for m in (pickle, _pickle):
        m.Unpickler = _Unpickler
        m.load = Recorder.load
        m.loads = Recorder.loads
    import torch.serialization
    torch.serialization.pickle = Recorder


# Audit events that mean something ran for real: the child aborts at once (exit 97) and the
# generator stops. Imports made by exists() may open and exec files, nothing else.
REAL_EVENTS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
               "subprocess.Popen", "socket.", "webbrowser.open", "ctypes.", "os.kill", "os.putenv",
               "os.unsetenv", "os.link", "os.symlink", "urllib.Request", "http.client.", "ftplib.", "smtplib.",
               "imaplib.", "poplib.", "telnetlib.", "nntplib.", "code.__new__", "function.__new__",
               "pty.")
FS_EVENTS = ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.utime", "os.rename",
             "os.truncate", "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
             "shutil.copytree", "shutil.move", "shutil.chown", "shutil.make_archive", "shutil.unpack_archive")


def install_guard(tmp_root):
    sentinel = os.environ.get("CKPT_SENTINEL", "")

    def under_tmp(path):
        try:
            path = os.path.realpath(os.fsdecode(path))
        except Exception:  # noqa: BLE001 - a file descriptor or bytes we cannot read: refuse
            return False
        return path.startswith(tmp_root + os.sep) and "ckpt-sentinel" not in path and path != sentinel

    def hook(event, args):
        bad = False
        if event.startswith(REAL_EVENTS) or (event.startswith("shutil.") and event not in FS_EVENTS):
            # importing a module to check a name may load libraries and build code objects
            # (urllib3 binds a loopback socket at import to probe IPv6): never connect or resolve
            bad = not (STATE.get("importing") and event.startswith(("ctypes.", "code.__new__",
                                                                     "function.__new__", "socket.__new__",
                                                                     "socket.bind")))
        elif event in FS_EVENTS:  # a file system change: only inside the temporary directory
            paths = [x for x in args if isinstance(x, (str, bytes, os.PathLike))]
            dir_fd = args[-1] if args and isinstance(args[-1], int) and not isinstance(args[-1], bool) else None
            if dir_fd is not None and dir_fd >= 0:  # relative to an open directory (tarfile, shutil)
                try:
                    base = os.readlink("/proc/self/fd/%d" % dir_fd)
                    paths = [os.path.join(base, os.fsdecode(x)) for x in paths]
                except OSError:
                    pass
            bad = not paths or not all(under_tmp(x) for x in paths)
        elif event == "open" and args[1] is not None and isinstance(args[0], (str, bytes, os.PathLike)):
            mode = args[1] if isinstance(args[1], str) else ""
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writes = any(c in mode for c in "wax+") or (flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            bad = bool(writes) and not under_tmp(args[0])
        if bad:
            os.write(2, ("oracle: REAL EXECUTION blocked: %s %r\n" % (event, args)[:300]).encode())
            os._exit(97)
    sys.addaudithook(hook)


# ---------------------------------------------------------------------------------------------
# Loaders, each in a forked child
# ---------------------------------------------------------------------------------------------

def run_torch(path):
    import torch
    torch.load(path, weights_only=False, map_location="cpu", pickle_module=Recorder)


def run_pickle(path):
    with open(path, "rb") as f:
        Recorder.Unpickler(f).load()


def run_pickle_bytesio(path):
    with open(path, "rb") as f:
        data = f.read()
    Recorder.Unpickler(io.BytesIO(data)).load()


def run_numpy(path):
    """numpy.load(allow_pickle=True), for .npy / .npz: informational, not part of the verdict."""
    import numpy as np
    r = np.load(path, allow_pickle=True)
    for k in getattr(r, "files", []):
        r[k]


def in_child(fn, path):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        err = None
        try:
            install_recorder()
            install_guard(os.path.realpath(tempfile.gettempdir()))
            signal.alarm(TIME_LIMIT)
            fn(path)
        except BaseException as e:  # noqa: BLE001 - a refusal is a result
            err = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:300])
        signal.alarm(0)
        data = json.dumps({"events": EVENTS, "error": err}).encode()
        with os.fdopen(w, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 97:
        print("oracle: something ran for real while reading %s: stopping" % path, file=sys.stderr)
        sys.exit(2)
    if not data:
        return {"events": [], "error": "child died (status %d)" % status, "crashed": True}
    res = json.loads(data)
    res["crashed"] = False
    return res


def main():
    if sys.argv[1] == "--allowlist":
        import torch
        from torch import _weights_only_unpickler as wo
        with open(sys.argv[2], "w") as f:
            json.dump({"torch": torch.__version__, "python": sys.version.split()[0],
                       "allow": sorted(wo._get_allowed_globals())}, f)
        return
    allow_path, out_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(allow_path) as f:
        for name in json.load(f):
            REAL_ALLOWED[name] = None
    import torch  # noqa: F401 - imported once, before forking
    import torch._weights_only_unpickler
    sentinel = os.environ.get("CKPT_SENTINEL")
    if not sentinel or os.path.exists(sentinel):
        sys.exit("oracle: CKPT_SENTINEL must name a file that does not exist")
    out = {}
    for path in files:
        with open(path, "rb") as f:
            head = f.read(4)
        loaders = {"torch.load": in_child(run_torch, path)}
        if head != b"PK\x03\x04":
            loaders["pickle.load"] = in_child(run_pickle, path)
            loaders["pickle.load(BytesIO)"] = in_child(run_pickle_bytesio, path)
        if path.endswith((".npy", ".npz")):
            loaders["numpy.load"] = in_child(run_numpy, path)
        out[path] = {"loaders": loaders}
        if os.path.exists(sentinel):
            print("oracle: SENTINEL CREATED while reading %s" % path, file=sys.stderr)
            sys.exit(2)
    info = {"python": sys.version.split()[0], "torch": torch.__version__,
            "weights_only_allowlist": sorted(torch._weights_only_unpickler._get_allowed_globals().keys())}
    with open(out_path, "w") as f:
        json.dump({"info": info, "files": out}, f)


if __name__ == "__main__":
    main()
