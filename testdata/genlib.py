"""Helpers the testdata generators share, so that each is written once.

Imported as `genlib` from the generators' own folder: a script's folder comes first on sys.path, and
gen_fixtures.py / gen_load.py also insert it for when they are imported. So it must stay beside them
in testdata/ (the torch 2.x chroots bind-mount testdata/ at /gen) and depend on nothing but torch, as
it runs under Debian's torch 1.13 (/usr/bin/python3) and under torch 2.x alike.

Users: gen_fixtures.py, gen_load.py, gen_forward.py, gen_diff_values.py (gen_formats.py, gen_large.py
and gen_pt2_load.py reach it through gen_fixtures / gen_load; gen_formats.py copies it into its chroot
with gen_fixtures.py). Mind the line numbers when moving code here: a generator's TorchScript
archives record its file name and the lines of its scripted classes (.debug_pkl), so code taken
out above those classes changes the archives a rerun writes.
"""

import re

import torch
import torch.nn as nn

# The running torch picks what a generator writes: 1.13 the sets committed for it (t113/, load/,
# forward/), 2.x a set of its own, t<major><minor> (2.6: testdata/t26, 2.14: testdata/t214,
# 2.15 (PyPI, the truth environment): testdata/t215).
TORCH_MM = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
T2 = TORCH_MM[0] >= 2
SET = "t%d%d" % TORCH_MM

# Base of the lazy modules' UninitializedParameter / UninitializedBuffer.
UNINIT = nn.parameter.UninitializedTensorMixin


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def is_uninit(t):
    return isinstance(t, UNINIT)


def untyped(t):
    """The untyped storage behind t (torch 1.13 reaches it through the typed one)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


def storage_bytes(t):
    """All bytes of the storage behind t."""
    st = untyped(t)
    u = torch.empty(0, dtype=torch.uint8)
    u.set_(st, 0, (st.nbytes(),), (1,))
    return u.numpy().tobytes()


def one_line_lists(text):
    """json.dumps(..., indent=1) text with every list of numbers / strings (shapes, key and path
    lists) on one line."""
    return re.sub(r"\[\s*((?:-?\d+|\"[^\"\n]*\")(?:,\s*(?:-?\d+|\"[^\"\n]*\"))*)\s*\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
