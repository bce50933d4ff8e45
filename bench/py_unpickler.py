#!/usr/bin/env python3
"""The hand-written Python baseline for `ckpt summary` (DESIGN.md section 7).

  python3 bench/py_unpickler.py FILE [--time]

Opens a torch.save zip, reads only its `*/data.pkl` member and unpickles it with a
pickle.Unpickler whose find_class hands back stub callables and whose persistent_load hands back
a stub storage, so no storage (`*/data/N`) is ever read. Prints the entry count and the total numel
(all entries, and unique by storage/offset/shape/stride, so a tied weight counts once).
Does not import torch: this is what the fastest reasonable Python tool could do.
With --time, also prints to stderr the seconds spent inside Python on open + unpickle + count,
which leaves out interpreter start-up.
"""
import time

T0 = time.perf_counter()  # before the other imports: they are part of the work

import collections  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import zipfile  # noqa: E402


class Stub:
    """What a stubbed global returns when called: its qualified name and arguments."""
    __slots__ = ("name", "args", "state")

    def __init__(self, name, args):
        self.name = name
        self.args = args
        self.state = None

    def __setstate__(self, state):  # BUILD on a stubbed object
        self.state = state


class StubGlobal:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, *args):
        return Stub(self.name, args)


class StubStorage:
    """persistent_load's answer: ('storage', storage_type, key, location, numel) kept as data."""
    __slots__ = ("key", "location", "numel")

    def __init__(self, pid):
        self.key = pid[2] if len(pid) > 2 else None
        self.location = pid[3] if len(pid) > 3 else None
        self.numel = pid[4] if len(pid) > 4 else None


class StubUnpickler(pickle.Unpickler):
    # Containers that carry the structure are real; everything else is a stub.
    REAL = {("collections", "OrderedDict"): collections.OrderedDict}

    def find_class(self, module, name):
        real = self.REAL.get((module, name))
        return real if real is not None else StubGlobal(module + "." + name)

    def persistent_load(self, pid):
        return StubStorage(pid)


REBUILD_TENSOR = {"torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor"}
REBUILD_PARAMETER = {"torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"}


def tensor_of(v):
    """(storage key, offset, size, stride) for a rebuilt tensor or parameter stub, else None."""
    if isinstance(v, Stub) and v.name in REBUILD_PARAMETER and v.args:
        v = v.args[0]
    if isinstance(v, Stub) and v.name in REBUILD_TENSOR and len(v.args) >= 4:
        storage, offset, size, stride = v.args[:4]
        key = storage.key if isinstance(storage, StubStorage) else id(storage)
        return key, offset, tuple(size), tuple(stride)
    return None


def numel(size):
    n = 1
    for d in size:
        n *= d
    return n


def main():
    args = [a for a in sys.argv[1:] if a != "--time"]
    if len(args) != 1:
        sys.exit("usage: py_unpickler.py FILE [--time]")
    with zipfile.ZipFile(args[0]) as z:
        names = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not names:
            sys.exit("py_unpickler: %s: no */data.pkl member" % args[0])
        with z.open(names[0]) as f:
            obj = StubUnpickler(f).load()

    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]  # Lightning checkpoint: the model is its state_dict
    if not isinstance(obj, dict):
        sys.exit("py_unpickler: top-level object is %s, not a dict" % type(obj).__name__)

    entries = len(obj)
    tensors = 0
    total = 0
    unique = {}
    for v in obj.values():
        t = tensor_of(v)
        if t is None:
            continue
        tensors += 1
        n = numel(t[2])
        total += n
        unique[t] = n
    print("entries %d tensors %d numel %d unique_numel %d" % (entries, tensors, total, sum(unique.values())))
    if "--time" in sys.argv[1:]:
        print("py_unpickler: %.4f s in Python (after start-up)" % (time.perf_counter() - T0), file=sys.stderr)


if __name__ == "__main__":
    main()
