#!/usr/bin/env python3
"""Generate the TorchScript fixtures of testdata/ts113/ and their *.expected.json (torch 1.13).

    /usr/bin/python3 testdata/gen_torchscript.py              # rewrites testdata/ts113
    /usr/bin/python3 testdata/gen_torchscript.py /tmp/other   # or somewhere else

Use /usr/bin/python3 (Debian 12's python3-torch 1.13); the python3 first on PATH may have no torch.
The script re-executes itself with PYTHONHASHSEED=0 (code/ lists Final constants in set order) and
seeds torch, so reruns give identical json and byte-identical archives (as long as it runs from the
same path: the .debug_pkl records hold the source file names).

Every number comes from PyTorch: the live ScriptModule (named_modules, named_parameters,
named_buffers, original_name, _c._type().qualified_name(), training, _c._method_names()) and the
archive loaded back with torch.jit.load, which must agree (asserted).  The expected-json format is
testdata/EXPECTED.md plus the TorchScript fields described in testdata/README.md:

- "modules": every named_modules() entry (root = ""), with "type" (original_name), "qualified_type"
  (as in the data.pkl GLOBAL), recursive "parameters" / "trainable" / "buffers", "training" (null when
  the module has no training attribute: frozen modules).
- "shared_paths": [{"name", "same_as"}] for module paths that are the *same C++ object* (shown by
  flipping `training` through one path and reading it through the other).  torch.jit.script copies
  a Python submodule shared at two paths into two module objects that share their tensors, so
  shared.pt has none; shared_object.pt re-points one attribute at the other object.
  "eager_shared_paths": the same by id() over named_children() of the eager nn.Module.
- "tensors": named_parameters() ("parameter") and named_buffers() ("buffer") in state_dict order.
  torch 1.13 has no remove_duplicate=False, so tied tensors appear once; where that differs from
  every path ("tensors_all", "totals_all") both are given.
- "totals": EXPECTED.md totals over "tensors", parameters / trainable / buffers as
  sum(numel) over module.parameters() / buffers() (each tensor once), plus "modules",
  "modules_train", "modules_eval" (over named_modules(); a module without training flag counts in
  neither).
- "methods": {"all": sorted _c._method_names() of the root, "from_forward": root methods reachable
  from forward (forward included), "entry_points": the others (known by construction)}.
- "frozen", "records" (small zip records), "extra" (extra/ files), "entries" (zip entries without
  prefix), "file" (data/ records), "globals" (GLOBALs of data.pkl), frozen: "constants_tensors",
  "constants_elements", "constants_storage_bytes"; mobile: "bytecode_version";
  edited: "edited", "libtorch_load_error".
"""
import collections
import copy
import io
import json
import os
import pickle
import pickletools
import struct
import sys
import zipfile
from typing import Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.jit.mobile
from torch import Tensor

TORCH_VERSION = torch.__version__


# ----------------------------------------------------------------------------- helpers

def dtype_name(dt):
    return str(dt).replace("torch.", "")


def storage_key(t):
    st = t.storage()
    return st.data_ptr(), st.nbytes()


def storage_bytes(t):
    st = t.storage()
    return bytes(st.untyped()) if hasattr(st, "untyped") else bytes(st)


def same_tensor(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    assert a.stride() == b.stride()
    assert a.storage_offset() == b.storage_offset()
    assert a.requires_grad == b.requires_grad, (a.requires_grad, b.requires_grad)
    assert a.device == b.device
    assert torch.equal(a.detach(), b.detach())


def entry(name, t, kind):
    return {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
            "stride": list(t.stride()), "numel": t.numel(), "bytes": t.numel() * t.element_size(),
            "kind": kind, "state": "materialized", "requires_grad": bool(t.requires_grad),
            "device": str(t.device), "offset": t.storage_offset()}


def pickle_globals(data):
    """'module.name' of every GLOBAL of a protocol-2 pickle, first-occurrence order."""
    found = []
    for op, arg, _pos in pickletools.genops(io.BytesIO(data)):
        if op.name == "GLOBAL":
            g = arg.replace(" ", ".")
            if g not in found:
                found.append(g)
    return found


def zip_facts(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/", 1)[0]
        assert all(n.startswith(prefix + "/") for n in names), names
        rels = [n[len(prefix) + 1:] for n in names]
        records, extra = {}, {}
        data_bytes = n_data = 0
        for n, rel in zip(names, rels):
            if rel.startswith("data/"):
                data_bytes += z.getinfo(n).file_size
                n_data += 1
            elif rel.startswith("extra/"):
                extra[rel[len("extra/"):]] = z.read(n).decode("utf-8")
            elif not (rel.endswith(".pkl") or rel.startswith("code/") or rel.startswith("constants/")
                      or rel.endswith(".debug_pkl")):
                records[rel] = z.read(n).decode("utf-8").strip()
        globs = pickle_globals(z.read(prefix + "/data.pkl"))
    return {"prefix": prefix, "entries": rels, "records": records, "extra": extra,
            "file": {"storages": n_data, "storage_bytes": data_bytes}, "globals": globs}


def read_constants(path):
    """Tensors of constants.pkl, unpickled here with the tensors read from constants/<key>."""
    with zipfile.ZipFile(path) as z:
        prefix = z.namelist()[0].split("/", 1)[0]
        raw = z.read(prefix + "/constants.pkl")
        nbytes = 0

        class U(pickle.Unpickler):
            def persistent_load(self, pid):
                nonlocal nbytes
                typename, storage_type, key, location, numel = pid
                assert typename == "storage" and location == "cpu", pid
                data = z.read("%s/constants/%s" % (prefix, key))
                nbytes += len(data)
                st = storage_type.from_buffer(data, "little")
                assert st.size() == numel, (st.size(), numel)
                return st

        consts = U(io.BytesIO(raw)).load()
    return consts, nbytes


def training_of(m):
    try:
        return bool(m.training)
    except AttributeError:      # frozen modules have no training attribute
        return None


def module_facts(m):
    out = []
    for name, s in m.named_modules():
        ps = list(s.parameters())
        out.append({"name": name, "type": s.original_name,
                    "qualified_type": s._c._type().qualified_name(),
                    "parameters": sum(p.numel() for p in ps),
                    "trainable": sum(p.numel() for p in ps if p.requires_grad),
                    "buffers": sum(b.numel() for b in s.buffers()),
                    "training": training_of(s)})
    return out


def cpp_shared_paths(m):
    """Module paths that reach the same C++ module object as an earlier path: flip `training`
    through one and read it through the other (Python wrappers are distinct per path)."""
    mods = list(m.named_modules())
    out = []
    for i, (name, s) in enumerate(mods):
        if training_of(s) is None:
            continue
        for pname, ps in mods[:i]:
            if training_of(ps) is None or \
                    ps._c._type().qualified_name() != s._c._type().qualified_name():
                continue
            old = ps._c.getattr("training")
            ps._c.setattr("training", not old)
            same = s._c.getattr("training") == (not old)
            ps._c.setattr("training", old)
            if same:
                out.append({"name": name, "same_as": pname})
                break
    return out


def eager_shared_paths(model):
    """Second paths of a submodule shared in the eager nn.Module: id() over the children
    (_modules.items(): named_children() itself skips a child it has seen)."""
    seen, out = {id(model): ""}, []

    def rec(mod, prefix):
        for n, c in mod._modules.items():
            p = prefix + "." + n if prefix else n
            if id(c) in seen:
                out.append({"name": p, "same_as": seen[id(c)]})
                continue
            seen[id(c)] = p
            rec(c, p)

    rec(model, "")
    return out


def every_path_tensors(m):
    """(name, tensor, kind) for every path, duplicates included (what torch >= 2.0's
    remove_duplicate=False gives), in state_dict order."""
    out = []

    def rec(mod, prefix):
        for n, p in mod._parameters.items():
            if p is not None:
                out.append((prefix + n, p, "parameter"))
        for n, b in mod._buffers.items():
            if b is not None:
                out.append((prefix + n, b, "buffer"))
        for n, c in mod.named_children():
            rec(c, prefix + n + ".")

    rec(m, "")
    return out


def tensor_list(m):
    """named_parameters() / named_buffers() (deduplicated in torch 1.13), state_dict order."""
    kinds = collections.OrderedDict()
    for n, _ in m.named_parameters():
        kinds[n] = "parameter"
    for n, _ in m.named_buffers():
        assert n not in kinds
        kinds[n] = "buffer"
    sd = m.state_dict(keep_vars=True)
    order = [k for k in sd if k in kinds]
    assert sorted(order) == sorted(kinds), (order, list(kinds))
    return [(k, sd[k], kinds[k]) for k in order]


def totals_of(named):
    seen_t, seen_s = set(), {}
    elements = unique = nbytes = 0
    for _n, t, _k in named:
        elements += t.numel()
        key = (storage_key(t), t.storage_offset(), tuple(t.shape), t.stride())
        if key not in seen_t:
            seen_t.add(key)
            unique += t.numel()
            nbytes += t.numel() * t.element_size()
        seen_s[storage_key(t)] = t.storage().nbytes()
    return {"tensors": len(named), "elements": elements, "unique_elements": unique,
            "storage_bytes": sum(seen_s.values()), "bytes": nbytes}


def methods_of(m, entry_points):
    names = sorted(m._c._method_names())
    assert "forward" in names
    assert set(entry_points) <= set(names), (entry_points, names)
    return {"all": names, "from_forward": sorted(set(names) - set(entry_points)),
            "entry_points": sorted(entry_points)}


def expected_for(path, live, loaded, *, entry_points=(), frozen=False, notes="", extra=None,
                 eager=None):
    """The expected json of one archive: live = the ScriptModule that was saved, loaded = it
    loaded back with torch.jit.load; every fact is computed on both and must agree."""
    fname = os.path.basename(path)
    assert os.path.getsize(path) < 60_000, (fname, os.path.getsize(path))
    zf = zip_facts(path)

    mods = module_facts(live)
    assert module_facts(loaded) == mods, (module_facts(loaded), mods)
    # every module class appears as a data.pkl GLOBAL (module + class with '.' joined)
    for d in mods:
        assert d["qualified_type"] in zf["globals"], (d["qualified_type"], zf["globals"])

    named_live, named_back = tensor_list(live), tensor_list(loaded)
    assert [(n, k) for n, _, k in named_live] == [(n, k) for n, _, k in named_back]
    for (_, a, _k), (_, b, _k2) in zip(named_live, named_back):
        same_tensor(a, b)
    tt = totals_of(named_back)

    def sums(m):
        ps = list(m.parameters())
        return (sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad),
                sum(b.numel() for b in m.buffers()))

    params, trainable, buffers = sums(live)
    assert sums(loaded) == (params, trainable, buffers)
    n_train = sum(1 for d in mods if d["training"] is True)
    n_eval = sum(1 for d in mods if d["training"] is False)
    totals = {"tensors": tt["tensors"], "elements": tt["elements"],
              "unique_elements": tt["unique_elements"], "storage_bytes": tt["storage_bytes"],
              "bytes": tt["bytes"], "parameters": params, "trainable": trainable,
              "non_trainable": params - trainable, "buffers": buffers, "uninitialized": 0,
              "meta": 0, "modules": len(mods), "modules_train": n_train, "modules_eval": n_eval}
    # the storages behind the entries are exactly the data/ records
    assert tt["storage_bytes"] == zf["file"]["storage_bytes"], (tt, zf["file"])

    methods = methods_of(live, entry_points)
    assert methods_of(loaded, entry_points) == methods

    shared = cpp_shared_paths(live)
    assert cpp_shared_paths(loaded) == shared

    exp = {"fixture": fname, "torch_version": TORCH_VERSION, "format": "torchscript",
           "prefix": zf["prefix"], "records": zf["records"], "totals": totals,
           "tensors": [entry(n, t, k) for n, t, k in named_back],
           "modules": mods, "shared_paths": shared, "methods": methods, "frozen": frozen}
    if eager is not None:
        exp["eager_shared_paths"] = eager_shared_paths(eager)
    all_back = every_path_tensors(loaded)
    if [n for n, _, _ in all_back] != [n for n, _, _ in named_back]:
        all_live = every_path_tensors(live)
        assert [(n, k) for n, _, k in all_live] == [(n, k) for n, _, k in all_back]
        exp["tensors_all"] = [entry(n, t, k) for n, t, k in all_back]
        exp["totals_all"] = totals_of(all_back)
    if zf["extra"]:
        exp["extra"] = zf["extra"]
    if extra:
        exp.update(extra)
    consts, const_bytes = read_constants(path)
    const_tensors = [t for t in consts if isinstance(t, torch.Tensor)]
    exp["constants_tensors"] = len(const_tensors)
    exp["constants_elements"] = sum(t.numel() for t in const_tensors)
    exp["constants_storage_bytes"] = const_bytes
    exp["entries"] = zf["entries"]
    exp["file"] = zf["file"]
    exp["globals"] = zf["globals"]
    exp["notes"] = notes
    return exp


def write_json(out, exp):
    stem = os.path.splitext(exp["fixture"])[0]
    with open(os.path.join(out, stem + ".expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    t = exp["totals"]
    print("wrote %-20s %6d bytes; params %d trainable %d buffers %d modules %d (train %d, eval %d)"
          % (exp["fixture"], os.path.getsize(os.path.join(out, exp["fixture"])), t["parameters"],
             t["trainable"], t["buffers"], t["modules"], t["modules_train"], t["modules_eval"]))


def check_outputs(a, b, x):
    """a(x) == b(x), run on deep copies (train-mode BatchNorm would update the running stats)."""
    a, b = copy.deepcopy(a), copy.deepcopy(b)
    with torch.no_grad():
        ya, yb = a(x), b(x)
    if isinstance(ya, dict):
        assert ya.keys() == yb.keys()
        for k in ya:
            assert torch.allclose(ya[k], yb[k])
    else:
        assert torch.allclose(ya, yb)


# ----------------------------------------------------------------------------- models

class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Net(nn.Module):
    """(a) (b) (g) (h) (i): features=ConvBlock(conv, bn), head=Sequential(Linear, ReLU, Linear),
    buffer 'scale' on the root, non-tensor attributes temperature / labels, Final num_classes."""
    __constants__ = ["num_classes"]

    def __init__(self):
        super().__init__()
        self.features = ConvBlock(3, 4)
        self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.register_buffer("scale", torch.full((3,), 0.5))
        self.temperature = 2.0
        self.labels = ["cat", "dog", "bird"]
        self.num_classes = 3

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.mul(self.head(x), self.scale) / self.temperature


def make_net(seed):
    torch.manual_seed(seed)
    m = Net()
    with torch.no_grad():
        m(torch.randn(4, 3, 5, 5))         # running stats and num_batches_tracked non-trivial
    m.features.conv.weight.requires_grad_(False)      # frozen parameters
    m.features.bn.bias.requires_grad_(False)
    return m


class Mixer(nn.Module):
    """(c): ModuleList, ModuleDict, a ModuleList of mixed types, a root Parameter."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.norms = nn.ModuleList([nn.LayerNorm(4), nn.Identity()])
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1),
                                    "box-1": nn.Linear(4, 1)})
        self.gate = nn.Parameter(torch.ones(4))

    def forward(self, x) -> Dict[str, Tensor]:
        for layer in self.layers:
            x = torch.relu(layer(x))
        for norm in self.norms:
            x = norm(x)
        x = x * self.gate
        out: Dict[str, Tensor] = {}
        for name, head in self.heads.items():
            out[name] = head(x)
        return out


class Shared(nn.Module):
    """(d): one Linear at two paths (a, b) plus one inside a Sequential (body.0 / tail)."""

    def __init__(self):
        super().__init__()
        lin = nn.Linear(4, 4)
        self.a = lin
        self.b = lin
        self.body = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        self.tail = self.body[0]
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        x = self.b(torch.relu(self.a(x)))
        x = self.body(x)
        return self.out(x) + self.tail.bias.sum()


class Tower(nn.Module):
    """(e): Conv/BN/Dropout tower; the model is put in eval(), then head in train()."""

    def __init__(self):
        super().__init__()
        self.features = ConvBlock(3, 4)
        self.drop = nn.Dropout(0.25)
        self.head = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Dropout(0.1), nn.Linear(6, 2))

    def forward(self, x):
        x = self.features(x).mean(dim=(2, 3))
        return self.head(self.drop(x))


class WithMethods(nn.Module):
    """(f): forward calls the helper _forward_impl (like torchvision); evaluation_step is a
    separate @torch.jit.export entry point."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 6)
        self.fc = nn.Linear(6, 3)

    def _forward_impl(self, x):
        return self.fc(torch.relu(self.backbone(x)))

    def forward(self, x):
        return self._forward_impl(x)

    @torch.jit.export
    def evaluation_step(self, x, y):
        logits = self.forward(x)
        return (logits.argmax(dim=1) == y).float().mean()

    def not_compiled(self, x):             # neither exported nor called: not in the archive
        return x


# ----------------------------------------------------------------------------- fixtures

def fx_scripted(out):
    m = make_net(1)
    sm = torch.jit.script(m)
    path = os.path.join(out, "scripted.pt")
    torch.jit.save(sm, path)
    back = torch.jit.load(path)
    check_outputs(sm, back, torch.randn(2, 3, 5, 5))
    attrs = {"temperature": back._c.getattr("temperature"), "labels": back._c.getattr("labels")}
    assert attrs == {"temperature": sm.temperature, "labels": sm.labels}
    assert back.num_classes == 3
    exp = expected_for(
        path, sm, back, extra={"root_attributes": attrs, "root_final_constants": {"num_classes": 3}},
        notes="torch.jit.script of Net(features=ConvBlock(conv Conv2d bias=False, bn BatchNorm2d), "
              "head=Sequential(Linear, ReLU, Linear)), root buffer 'scale', non-tensor attributes "
              "temperature (float) and labels (List[str], restore_type_tag), Final num_classes "
              "(only in code/, not in data.pkl). features.conv.weight and features.bn.bias are "
              "frozen (requires_grad False, NEWFALSE in _rebuild_tensor_v2). features.conv.bias is "
              "None: listed in __parameters__ with 'bias : Optional[Tensor]', NONE in data.pkl, "
              "not a tensor entry. "
              "version is 4 because forward uses aten::div (upgrader-versioned operator).")
    write_json(out, exp)
    return sm, exp


def fx_traced(out):
    m = make_net(1)
    x = torch.randn(2, 3, 5, 5)
    tm = torch.jit.trace(m, x)
    path = os.path.join(out, "traced.pt")
    torch.jit.save(tm, path)
    back = torch.jit.load(path)
    check_outputs(tm, back, torch.randn(2, 3, 5, 5))
    exp = expected_for(
        path, tm, back,
        notes="torch.jit.trace of the same Net as scripted.pt (same seed, same frozen parameters), "
              "traced in train mode: BatchNorm updated its running stats during tracing and the "
              "trace check. Traced modules keep parameters, buffers, submodules and training only "
              "(temperature / labels are gone); code/ has only forward, every class is mangled "
              "(___torch_mangle_N), Conv2d without bias lists only weight in __parameters__. "
              "constants.pkl holds 2 tensors of the traced graph (temperature 2.0 as a float64 "
              "scalar, CONSTANTS.c0; the int64 1 that BatchNorm adds to num_batches_tracked, "
              "CONSTANTS.c1) in constants/0 and constants/1: not parameters or buffers.")
    write_json(out, exp)


def fx_containers(out):
    torch.manual_seed(3)
    m = Mixer()
    m.layers[1].bias.requires_grad_(False)
    sm = torch.jit.script(m)
    path = os.path.join(out, "containers.pt")
    torch.jit.save(sm, path)
    back = torch.jit.load(path)
    check_outputs(sm, back, torch.randn(2, 4))
    exp = expected_for(
        path, sm, back,
        notes="ModuleList of 3 Linear (layers), ModuleList of LayerNorm + Identity (norms), "
              "ModuleDict {cls: Linear, reg: Linear, box-1: Linear} (heads; reg and box-1 "
              "share one class type), root Parameter gate; layers.1.bias frozen. Children of "
              "ModuleList / ModuleDict are attributes named '0', '1', 'cls', 'box-1' (code/: "
              "__annotations__[\"0\"] = ... for names that are not identifiers, 'cls : ...' "
              "for those that are).")
    write_json(out, exp)


def fx_shared(out):
    torch.manual_seed(4)
    m = Shared()
    assert eager_shared_paths(m) == [{"name": "b", "same_as": "a"},
                                     {"name": "tail", "same_as": "body.0"}]
    sm = torch.jit.script(m)
    path = os.path.join(out, "shared.pt")
    torch.jit.save(sm, path)
    back = torch.jit.load(path)
    check_outputs(sm, back, torch.randn(2, 4))
    assert back.a.weight.data_ptr() == back.b.weight.data_ptr()
    exp = expected_for(
        path, sm, back, eager=m,
        notes="Eager model shares one Linear at a and b, and body.0 at tail (eager "
              "named_modules() lists each once). torch.jit.script copies each shared submodule: "
              "data.pkl has separate module objects (own NEWOBJ/BUILD, same class GLOBAL via "
              "BINGET) whose weight/bias are BINGETs of the first path's tensors, so "
              "named_modules() of the ScriptModule lists a, b, body.0 and tail (shared_paths is "
              "empty) while parameters() counts the tensors once. tensors = named_parameters() "
              "(deduplicated, torch 1.13 has no remove_duplicate); tensors_all / totals_all list "
              "every path.")
    write_json(out, exp)


def fx_shared_object(out):
    torch.manual_seed(4)
    sm = torch.jit.script(Shared())
    # Re-point attribute b at the C++ object of a (same class type): one module at two paths.
    sm._c.setattr("b", sm._c.getattr("a"))
    path = os.path.join(out, "shared_object.pt")
    torch.jit.save(sm, path)
    back = torch.jit.load(path)
    live = torch.jit.load(path)    # the python wrappers of sm still point to the old b
    check_outputs(live, back, torch.randn(2, 4))
    exp = expected_for(
        path, live, back,
        notes="shared.pt's model with sm._c.setattr('b', sm._c.getattr('a')) before saving: a "
              "and b are the same C++ module object, so data.pkl writes it once and 'b' is a "
              "BINGET of the memoized module (the pickler memoizes objects by pointer). "
              "named_modules() still lists both paths (one Python wrapper per path); "
              "shared_paths shows b is a. tail / body.0 stay separate objects with shared tensors. "
              "Expected values from the archive loaded back (twice).")
    write_json(out, exp)


def fx_mixed_mode(out):
    torch.manual_seed(5)
    m = Tower()
    with torch.no_grad():
        m(torch.randn(4, 3, 5, 5))
    m.eval()
    m.head.train()
    sm = torch.jit.script(m)
    path = os.path.join(out, "mixed_mode.pt")
    torch.jit.save(sm, path)
    back = torch.jit.load(path)
    check_outputs(sm.eval(), torch.jit.load(path).eval(), torch.randn(2, 3, 5, 5))
    sm.head.train()                      # back to the saved flags
    exp = expected_for(
        path, sm, back,
        notes="Tower(features=ConvBlock, drop=Dropout, head=Sequential(Linear, ReLU, Dropout, "
              "Linear)) put in eval(), then head.train(): head and its 4 children are in train "
              "mode, everything else in eval mode (training False in data.pkl).")
    write_json(out, exp)


def fx_methods(out):
    torch.manual_seed(6)
    m = WithMethods()
    sm = torch.jit.script(m)
    path = os.path.join(out, "methods.pt")
    extra_files = {"meta.json": '{"producer": "gen_torchscript.py", "task": "classification"}'}
    torch.jit.save(sm, path, _extra_files=extra_files)
    got = {"meta.json": ""}
    back = torch.jit.load(path, _extra_files=got)
    assert {k: v.decode() for k, v in got.items()} == extra_files, got
    check_outputs(sm, back, torch.randn(2, 4))
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    assert torch.equal(sm.evaluation_step(x, y), back.evaluation_step(x, y))
    assert not back._c._has_method("not_compiled")
    exp = expected_for(
        path, sm, back, entry_points=["evaluation_step"],
        notes="forward calls the helper _forward_impl ((self)._forward_impl(x, ) in code/); "
              "evaluation_step is @torch.jit.export and not called by forward (entry point); "
              "not_compiled is a plain Python method, absent from the archive. Saved with "
              "_extra_files={'meta.json': ...} (extra/meta.json).")
    write_json(out, exp)


def fx_frozen(out):
    m = make_net(7)
    m.eval()
    fr = torch.jit.freeze(torch.jit.script(m))
    path = os.path.join(out, "frozen.pt")
    torch.jit.save(fr, path)
    back = torch.jit.load(path)
    check_outputs(fr, back, torch.randn(2, 3, 5, 5))
    check_outputs(m, back, torch.randn(2, 3, 5, 5))
    consts = back.code_with_constants[1].const_mapping           # name -> tensor
    live_consts = fr.code_with_constants[1].const_mapping
    assert sorted(consts) == sorted(live_consts)
    for k in consts:
        same_tensor(consts[k], live_consts[k])
    pickled, _nbytes = read_constants(path)
    assert len(pickled) == len(consts)
    ordered = [consts["c%d" % i] for i in range(len(consts))]
    for a, b in zip(pickled, ordered):
        same_tensor(a, b)
    extra = {"constants": [{"name": "c%d" % i, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                            "numel": t.numel(), "requires_grad": bool(t.requires_grad)}
                           for i, t in enumerate(pickled)]}
    exp = expected_for(
        path, fr, back, frozen=True, extra=extra,
        notes="torch.jit.freeze(torch.jit.script(Net().eval())): submodules are inlined, "
              "BatchNorm is folded into the conv (c1 = folded bias), parameters and buffers become "
              "constants (constants.pkl tuple of tensors in constants/N, code uses CONSTANTS.cN), "
              "so named_parameters() and named_buffers() are empty; data.pkl is the root object "
              "with an empty BUILD dict (no training attribute: training is null, the module "
              "counts in neither modules_train nor modules_eval). The root class is a clone, "
              "__torch__.___torch_mangle_N.Net in code/__torch__/___torch_mangle_N.py. "
              "The eager model had %d parameters (%d trainable) and %d buffer elements."
              % (sum(p.numel() for p in m.parameters()),
                 sum(p.numel() for p in m.parameters() if p.requires_grad),
                 sum(b.numel() for b in m.buffers())))
    write_json(out, exp)


def fx_mobile(out, sm):
    path = os.path.join(out, "mobile.ptl")
    sm._save_for_lite_interpreter(path)
    back = torch.jit.load(path)
    check_outputs(sm, back, torch.randn(2, 3, 5, 5))
    lite = torch.jit.mobile._load_for_lite_interpreter(path)
    x = torch.randn(2, 3, 5, 5)
    with torch.no_grad():
        assert torch.allclose(lite(x), copy.deepcopy(sm)(x))
    ver = torch.jit.mobile._get_model_bytecode_version(path)
    exp = expected_for(
        path, sm, back, extra={"bytecode_version": ver},
        notes="scripted.pt's module saved with _save_for_lite_interpreter: the same records "
              "(data.pkl, code/, constants.pkl, version) plus bytecode.pkl (bytecode version "
              "%d: a tuple starting with the version int, then one (qualified method name, "
              "(instructions, operators, constants, types, register_size), schema) tuple per "
              "method). torch.jit.load and _load_for_lite_interpreter both load it." % ver)
    write_json(out, exp)


def aligned_extra(offset, name):
    """Local-header extra field 'FB' padding so that the data starts 64-byte aligned."""
    start = offset + 30 + len(name.encode("utf-8")) + 4
    pad = (-start) % 64
    return b"FB" + struct.pack("<H", pad) + b"Z" * pad


def fx_edited(out, base_exp):
    src = os.path.join(out, "scripted.pt")
    path = os.path.join(out, "edited_sdpa.pt")
    with zipfile.ZipFile(src) as zin, open(path, "wb") as f:
        with zipfile.ZipFile(f, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename.endswith("/code/__torch__.py"):
                    text = data.decode("utf-8")
                    assert text.count("torch.mul(") == 1, text
                    data = text.replace("torch.mul(", "torch.scaled_dot_product_attention(").encode()
                zi = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                zi.compress_type = info.compress_type
                zi.external_attr = info.external_attr
                zi.create_system = info.create_system
                zi.extra = aligned_extra(f.tell(), info.filename)     # as torch pads them
                zout.writestr(zi, data)
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(path) as b:
        assert a.namelist() == b.namelist()
        assert [i.compress_type for i in a.infolist()] == [i.compress_type for i in b.infolist()]
    with open(path, "rb") as f:
        raw = f.read()
    with zipfile.ZipFile(path) as b:
        for i in b.infolist():                  # every entry's data starts 64-byte aligned
            n, e = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
            assert (i.header_offset + 30 + n + e) % 64 == 0, i.filename
    try:
        torch.jit.load(path)
        raise AssertionError("torch %s loaded the edited archive" % TORCH_VERSION)
    except RuntimeError as e:
        err = str(e).strip()
    assert "scaled_dot_product_attention" in err, err
    exp = json.loads(json.dumps(base_exp))
    exp["fixture"] = "edited_sdpa.pt"
    zf = zip_facts(path)
    assert zf["entries"] == exp["entries"] and zf["globals"] == exp["globals"]
    assert zf["file"] == exp["file"] and zf["records"] == exp["records"]
    exp["edited"] = "forward calls torch.scaled_dot_product_attention, which LibTorch 1.13 cannot load"
    exp["libtorch_load_error"] = err
    exp["notes"] = ("scripted.pt with code/__torch__.py edited after saving: Net.forward's "
                    "torch.mul( is now torch.scaled_dot_product_attention( (the zip rewritten by "
                    "Python's zipfile, every entry kept with the same name, order and compression, "
                    "each entry's data 64-byte aligned again by an 'FB' extra field as torch does). "
                    "data.pkl is unchanged, so every expected number equals scripted.pt's; the "
                    "zip prefix stays 'scripted'. "
                    "torch 1.13 torch.jit.load fails (libtorch_load_error). The .debug_pkl source "
                    "ranges no longer match the text.")
    write_json(out, exp)


def check_t26_transformer():
    """testdata/t26/transformer.ts.pt (gen_fixtures.py under torch 2.6) calls
    torch.scaled_dot_product_attention: this torch must refuse to load it (read-only check)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t26", "transformer.ts.pt")
    if not os.path.exists(path):
        return
    try:
        torch.jit.load(path)
        raise AssertionError("torch %s loaded %s" % (TORCH_VERSION, path))
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0]
    assert first == "Unknown builtin op: aten::scaled_dot_product_attention.", first
    print("checked t26/transformer.ts.pt: torch", TORCH_VERSION, "says:", first)


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "ts113")
    os.makedirs(out, exist_ok=True)
    print("torch", TORCH_VERSION, "python", sys.version.split()[0])
    sm, exp_a = fx_scripted(out)
    fx_traced(out)
    fx_containers(out)
    fx_shared(out)
    fx_shared_object(out)
    fx_mixed_mode(out)
    fx_methods(out)
    fx_frozen(out)
    fx_mobile(out, sm)
    fx_edited(out, exp_a)
    check_t26_transformer()


if __name__ == "__main__":
    main()
