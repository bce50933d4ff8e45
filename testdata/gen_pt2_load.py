#!/usr/bin/python3
"""The values torch reads from the .pt2 fixtures, for `ckpt load` and `ckpt diff --values` (tests/cli/load_cases.py).

Run under torch 2.x (it reads the fixtures of its own version; testdata/README.md has the chroots):

    chroot /work/chroot-trixie python3 /gen/gen_pt2_load.py   # torch 2.6:  writes pt2/t26/load_expected.json
    chroot /work/sid python3 /gen/gen_pt2_load.py             # torch 2.14: writes pt2/t214/load_expected.json

Format: the "loads" list of testdata/t26/load_expected.json (EXPECTED.md, "testdata/load/"): per file, the
CRC-32 / NaN / Inf of every tensor of the model ckpt summarizes (the one named "model", else the first by
name), dtype and shape, all from torch: torch.export.load (or, for several models in one package,
torch.export.pt2_archive's load_pt2) and ExportedProgram.state_dict. Packages holding no ExportedProgram
(AOTInductor only) are left out. A tensor subclass (a pickled wrapper such as TwoTensor) has no storage
of its own: it is listed under not_materialized ("subclass"). Nothing is written to the fixtures.
"""
import collections
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_load as gl  # noqa: E402  (load_entry, the CRC-32 / NaN / Inf rules)


def programs(path):
    """{name: ExportedProgram} as torch loads the file."""
    try:
        from torch.export.pt2_archive._package import load_pt2
    except ImportError:  # torch 2.6: torch.export.save's zip holds one program
        return {"model": torch.export.load(path)}
    contents = load_pt2(path)
    return dict(contents.exported_programs)


def named_tensors(ep):
    out = []
    for name, t in ep.state_dict.items():
        plain = type(t) in (torch.Tensor, torch.nn.Parameter)
        out.append((name, t.detach() if plain else "subclass"))
    return out


def main():
    tag = "t26" if torch.__version__.startswith("2.6") else "t%s" % "".join(torch.__version__.split(".")[:2])
    folder = os.path.join(HERE, "pt2", tag)
    loads = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".pt2"):
            continue
        rel = "pt2/%s/%s" % (tag, f)
        truth = json.load(open(os.path.join(folder, f[:-4] + ".expected.json")))
        if not truth.get("models"):
            print("%-32s no ExportedProgram (AOTInductor package): left out" % rel)
            continue
        eps = programs(os.path.join(folder, f))
        assert sorted(eps) == sorted(truth["models"]), (rel, list(eps))
        name = "model" if "model" in eps else sorted(eps)[0]
        named = named_tensors(eps[name])
        want = [t["name"] for t in truth["models"][name]["tensors"] if t["source"] == "state_dict"]
        assert sorted(n for n, _ in named) == sorted(want), (rel, [n for n, _ in named], want)
        loads.append(gl.load_entry(rel, named))
        print("%-32s %d tensors of model %r" % (rel, len(named), name))
    out = collections.OrderedDict(torch_version=torch.__version__, loads=loads)
    with open(os.path.join(folder, "load_expected.json"), "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
