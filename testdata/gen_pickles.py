#!/usr/bin/env python3
"""Writes testdata/pickles/: one object pickled with every protocol 0-5 by Python's own pickle module,
and expected.json holding the same object as JSON in the shape ckpt's inert unpickler reports it:
tuples/lists/sets as arrays, dict keys as strings, bytes as "<N bytes>", ints beyond 64 bits as decimal
strings, instances as {"__class__": "module.Name", **state}.  Run: /usr/bin/python3 testdata/gen_pickles.py

Also frames_p4.pkl: pickle.dump (protocol 4) of an object large enough for several FRAMEs with a bytes
object written between two frames (CPython writes a payload of 64 KiB or more outside any frame), the
shape a well-formed framed pickle has: both of the security scan's parses (bytes, file object) agree.
"""
import json
import os
import pickle
import sys


class Point:  # pickled by reference as __main__.Point, never imported by ckpt
    def __init__(self, x, y):
        self.x, self.y = x, y


def build():
    shared = [1, 2, 3]
    return {
        "none": None, "true": True, "false": False,
        "ints": [0, 1, -1, 255, 256, 65535, 65536, -65536, 2**31 - 1, -2**31, 2**31, 2**63 - 1, -2**63],
        "big": [2**64, -2**70, 0x1950a86a20f9469cfc6c],
        "floats": [0.0, -0.5, 1e300, 3.141592653589793],
        "text": ["", "ascii", "naïve ünïcode ✓ 🚀", "quote ' and \" and \\ back", "line\nbreak"],
        "bytes": [b"", b"\x00\x01\xff" * 100],
        "tuple0": (), "tuple1": (1,), "tuple2": (1, 2), "tuple3": (1, 2, 3), "tuple5": (1, 2, 3, 4, 5),
        "nested": {"a": {"b": {"c": [[], {}, ()]}}},
        "shared": [shared, shared],
        "set": {1, 2, 3}, "frozenset": frozenset({7}),
        "long_list": list(range(1500)),
        "point": Point(1, "two"),
        "intkeys": {1: "one", 2: "two"},
    }


def to_json(o):
    if isinstance(o, bool) or o is None or isinstance(o, str) or isinstance(o, float):
        return o
    if isinstance(o, int):
        return o if -2**63 <= o < 2**63 else str(o)
    if isinstance(o, bytes):
        return "<%d bytes>" % len(o)
    if isinstance(o, (list, tuple, set, frozenset)):
        return [to_json(x) for x in o]
    if isinstance(o, dict):
        return {str(k): to_json(v) for k, v in o.items()}
    d = {"__class__": "%s.%s" % (type(o).__module__, type(o).__qualname__)}
    d.update({k: to_json(v) for k, v in vars(o).items()})
    return d


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "pickles")
    os.makedirs(out, exist_ok=True)
    obj = build()
    for proto in range(6):
        data = pickle.dumps(obj, protocol=proto)
        assert pickle.loads(data)["point"].y == "two"
        with open(os.path.join(out, "p%d.pkl" % proto), "wb") as f:
            f.write(data)
    framed = {"small": list(range(300)), "big": b"y" * 66000, "many": [None] * 70000, "tail": "end"}
    with open(os.path.join(out, "frames_p4.pkl"), "wb") as f:
        pickle.dump(framed, f, protocol=4)
    with open(os.path.join(out, "frames_p4.pkl"), "rb") as f:
        assert pickle.load(f) == framed
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(to_json(obj), f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
