#!/usr/bin/python3
"""Write the state dicts whose `_metadata` (module versions) ckpt's packing unpickler skims (issue 43).

Run with Debian's Python, which has torch 1.13:

    /usr/bin/python3 testdata/gen_metadata.py [OUTDIR]      # OUTDIR defaults to testdata/metadata

torch.save writes a state dict as an OrderedDict of tensors whose BUILD state, after the last tensor, is
{'_metadata': OrderedDict({'': {'version': 1}, '0': {'version': 1}, ...})}. ckpt reads that state without
making its values, and must give the same answers as reading it in full whenever the pickle goes on to
use them. Each file is torch.save's own output of a case where it does (tests/test_pickle.cc compares the
skimmed graph with the full one, value by value):

  refetch_dict.pt   {'model': sd, 'versions': sd._metadata['0']}: the second reference to a version dict
                    is a memo fetch of a value that was never made (the pickle is read again unpacked)
  refetch_str.pt    {'model': sd, 'prefix': '', 'key': 'version'}: '' and 'version' are fetched from the
                    memo, where the skim left them unmade
  odd_metadata.pt   sd with sd._metadata['0'] = {'version': 1, 'note': [1, 2]}: not the shape torch writes,
                    read in full
  two.pt            {'model': sd, 'ema': sd2}: the second state dict's '_metadata' key is a memo fetch
  protocol_4.pt     sd saved with pickle_protocol=4: FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL
"""
import os
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "metadata")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


def model():
    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2), torch.nn.Sequential(torch.nn.Linear(2, 2)))


sd = model().state_dict()
torch.save({"model": sd, "versions": sd._metadata["0"]}, os.path.join(out, "refetch_dict.pt"))
torch.save({"model": sd, "prefix": "", "key": "version"}, os.path.join(out, "refetch_str.pt"))
odd = model().state_dict()
odd._metadata["0"] = {"version": 1, "note": [1, 2]}
torch.save(odd, os.path.join(out, "odd_metadata.pt"))
torch.save({"model": sd, "ema": model().state_dict()}, os.path.join(out, "two.pt"))
torch.save(sd, os.path.join(out, "protocol_4.pt"), pickle_protocol=4)

# The claims above, checked on the files torch wrote.
import pickletools
import zipfile

for name in ["refetch_dict.pt", "refetch_str.pt", "odd_metadata.pt", "two.pt", "protocol_4.pt"]:
    path = os.path.join(out, name)
    z = zipfile.ZipFile(path)
    pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
    ops = [op.name for op, _, _ in pickletools.genops(pkl)]
    assert ops.count("BUILD") == (2 if name == "two.pt" else 1), name
    if name == "protocol_4.pt":
        assert "FRAME" in ops and "MEMOIZE" in ops and "STACK_GLOBAL" in ops, ops
    loaded = torch.load(path)
    if name == "refetch_dict.pt":
        assert loaded["versions"] is loaded["model"]._metadata["0"]
    print(f"{name}: {len(pkl)} bytes of pickle, {len(ops)} opcodes")
