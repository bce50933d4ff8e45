#!/usr/bin/env python3
"""TorchScript fixtures whose tensors hide from named_parameters()/named_buffers(), and state dicts of
torch.nn parametrizations, with the truth from torch: testdata/tshidden/ (torch 1.13) or
testdata/tshidden/t26/ (torch 2.6; another torch 2.x: tshidden/t<major><minor>/).

    /usr/bin/python3 testdata/gen_ts_hidden.py                 # torch 1.13
    chroot /work/jtests-trixie python3 /gen-ts/gen_ts_hidden.py  # torch 2.6 (testdata bind-mounted)

Seeded; PYTHONHASHSEED=0. Only the qnnpack engine exists in Debian's torch builds (no fbgemm).

<name>.expected.json (read by tests/test_ts_hidden.cc):
- "fixture", "torch": file name, torch version.
- "tensors": every tensor the archive's data.pkl holds, in no particular order:
  named_parameters() -> "parameter", named_buffers() -> "buffer" (torch.jit.load of the file);
  anything else -> "attribute": a tensor attribute outside __parameters__/__buffers__ (named_attributes
  of the module), tensors inside torch.classes objects (ScriptObject.__getstate__(), flattened:
  "<module>.<attr>.<i>[.<j>...]") and inside the state of a module that defines __getstate__ (the
  compiled method run by torch: "<module>.<name>" where __getstate__ returns a variable that reads
  self.<name> or is a local <name>, else "<module>.<i>").  Each with dtype, shape, numel, bytes
  (numel * element_size), layout ("strided"/"quantized"), qscheme and q_scale for per-tensor ones.
- "modules": [{name, training}] over named_modules() of the loaded module (training: null when the
  module has no training attribute).
- "parameters", "buffers", "attributes": sum of numel per kind (each tensor object once).
- "file_storage_bytes", "storages": the archive's data/ and constants/ records (all are referenced),
  each once (zipfile sizes).
- "frozen": the model went through torch.jit.freeze (optimize_for_mobile freezes), by construction.
- "constants": {tensors, elements, bytes}: unique tensors (by storage and view) among the constants of
  every method's graph of the loaded module (prim::Constant nodes, tensors inside ScriptObjects through
  __getstate__), or null when the archive has no constants.pkl.  For that count constants.pkl and
  bytecode.pkl are unpickled by Python's pickle with torch's rebuild functions (torch.classes / __torch__
  objects as stubs keeping their state); the constants the loaded graphs use (prim::Constant nodes,
  ScriptObjects through __getstate__) are checked to be no more.
State dicts ("state_dict": true): "tensors" is named_parameters() / named_buffers() of the module.
"""
import io
import json
import os
import re
import sys
import zipfile

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch
import torch.nn as nn
import torch.ao.quantization as tq
import torch.nn.utils.prune
from torch.utils.mobile_optimizer import optimize_for_mobile

V2 = not torch.__version__.startswith("1.")
HERE = os.path.dirname(os.path.abspath(__file__))
# torch 2.x writes tshidden/t<major><minor> (2.6: tshidden/t26, the committed torch 2 set)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    HERE, "tshidden", "t%s%s" % tuple(torch.__version__.split("+")[0].split(".")[:2]) if V2 else "")
os.makedirs(OUT, exist_ok=True)
torch.backends.quantized.engine = "qnnpack"


def iters(m):
    return torch._C._jit_debug_module_iterators(m._c)


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_entry(name, t, kind):
    e = {"name": name, "kind": kind, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
         "numel": t.numel(), "bytes": t.numel() * t.element_size(),
         "layout": "quantized" if t.is_quantized else "strided"}
    if t.is_quantized:
        e["qscheme"] = str(t.qscheme()).replace("torch.", "")
        if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            e["q_scale"] = t.q_scale()
            e["q_zero_point"] = t.q_zero_point()
    return e


def flatten(v, name, out):
    if isinstance(v, torch.Tensor):
        out.append((name, v))
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            flatten(x, "%s.%d" % (name, i), out)
    elif isinstance(v, dict):
        for k, x in v.items():
            flatten(x, "%s.%s" % (name, k), out)
    elif isinstance(v, torch.ScriptObject):
        st = v.__getstate__()
        # torch.classes objects answer (state, qualified class name)
        if isinstance(st, tuple) and len(st) == 2 and isinstance(st[1], str) and st[1].startswith("__torch__"):
            st = st[0]
        flatten(st, name, out)


def getstate_names(m, n):
    """Names of the n elements __getstate__ returns, read from its compiled code (see docstring)."""
    code = m._c._get_method("__getstate__").code
    body = code.splitlines()
    assigns = {}
    ret = None
    for line in body:
        s = line.strip()
        mm = re.match(r"^(\w+) = self\.(\w+)$", s)
        if mm:
            assigns[mm.group(1)] = mm.group(2)
        mm = re.match(r"^(\w+) = \((.*)\)$", s)
        if mm:
            assigns.setdefault("__tuple__" + mm.group(1), mm.group(2))
        mm = re.match(r"^return (.*)$", s)
        if mm:
            ret = mm.group(1)
    if ret is None:
        return [str(i) for i in range(n)]
    if not ret.startswith("("):
        ret = "(" + assigns.get("__tuple__" + ret, "") + ")"
    elems = [x.strip() for x in ret[1:-1].split(",") if x.strip()]
    names = []
    for i in range(n):
        e = elems[i] if i < len(elems) and len(elems) == n else ""
        if re.match(r"^self\.\w+$", e):
            names.append(e[5:])
        elif re.match(r"^\w+$", e) and not e[0].isdigit():
            names.append(assigns.get(e, e))
        else:
            names.append(str(i))
    return names


def hidden_tensors(m, path, out):
    """Tensors of the pickled state that are neither parameters nor buffers."""
    def join(a, b):
        return a + "." + b if a else b
    if m._c._has_method("__getstate__"):
        st = m._c._get_method("__getstate__")()
        if isinstance(st, tuple):
            names = getstate_names(m, len(st))
            for i, x in enumerate(st):
                flatten(x, join(path, names[i]), out)
        else:
            flatten(st, join(path, "0"), out)
        return
    params = {n for n, _ in iters(m)["named_parameters"]}
    bufs = {n for n, _ in iters(m)["named_buffers"]}
    for n, v in iters(m)["named_attributes"]:
        if isinstance(v, torch._C.ScriptModule):
            continue
        if n in params or n in bufs:
            continue
        flatten(v, join(path, n), out)
    for n, c in m.named_children():
        hidden_tensors(c, join(path, n), out)


def training_of(m):
    try:
        return bool(m.training)
    except AttributeError:
        return None


def graph_constants(m):
    vals = []
    def rec(mod):
        for name in mod._c._method_names():
            g = mod._c._get_method(name).graph
            for node in g.nodes():
                if node.kind() == "prim::Constant" and node.outputsSize() == 1:
                    t = node.output().type()
                    if isinstance(t, torch._C.TensorType) or "__torch__" in str(t):
                        vals.append(node.output().toIValue())
        for _, c in mod.named_children():
            rec(c)
    rec(m)
    ts = []
    for i, v in enumerate(vals):
        flatten(v, str(i), ts)
    seen, out = set(), []
    for _, t in ts:
        k = (t.data_ptr() if not t.is_quantized else t.int_repr().data_ptr(), tuple(t.shape), t.dtype, t.storage_offset())
        if t.is_quantized:
            k = id(t)
        if k in seen:
            continue
        seen.add(k)
        out.append(t)
    return out


class _Stub:
    """A __torch__ / torch.classes object: keeps what BUILD gives it."""
    def __init__(self, *args):
        self.args = args
        self.state = None

    def __setstate__(self, state):
        self.state = state


def pickled_constant_tensors(path):
    """Tensors of constants.pkl and bytecode.pkl, unpickled by Python's pickle with torch's own rebuild
    functions and storages read from constants/ (bytecode/ in old archives); unique views."""
    import pickle
    with zipfile.ZipFile(path) as z:
        prefix = z.namelist()[0].split("/", 1)[0]
        storages, key_of = {}, {}

        class U(pickle.Unpickler):
            def find_class(self, mod, name):
                if mod.startswith("__torch__"):
                    return type(name, (_Stub,), {})
                fn = super().find_class(mod, name)
                if mod == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_qtensor"):
                    def rebuild(storage, offset, size, stride, *rest):
                        t = fn(storage, offset, size, stride, *rest)
                        t._view = (key_of[id(storage)], offset, tuple(size), tuple(stride), str(t.dtype))
                        return t
                    return rebuild
                return fn

            def persistent_load(self, pid):
                typename, storage_type, key, location, numel = pid
                if key not in storages:
                    for d in ("constants", "bytecode"):
                        n = "%s/%s/%s" % (prefix, d, key)
                        if n in z.namelist():
                            data = z.read(n)
                            break
                    untyped = getattr(torch, "UntypedStorage", None) or torch._UntypedStorage
                    typed = getattr(torch.storage, "TypedStorage", None) or torch.storage._TypedStorage
                    st = typed(wrap_storage=untyped.from_buffer(data, dtype=torch.uint8), dtype=storage_type.dtype)
                    assert st.size() >= numel
                    storages[key] = st
                    key_of[id(st)] = key
                return storages[key]

        found = []

        def walk(v, seen):
            if id(v) in seen:
                return
            seen.add(id(v))
            if isinstance(v, torch.Tensor):
                found.append(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x, seen)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x, seen)
            elif isinstance(v, _Stub):
                walk(getattr(v, "args", ()), seen)
                walk(getattr(v, "state", None), seen)

        seen, roots = set(), []  # roots stay alive: seen holds id()s
        for member in ("constants.pkl", "bytecode.pkl"):
            n = "%s/%s" % (prefix, member)
            if n in z.namelist():
                roots.append(U(io.BytesIO(z.read(n))).load())
                walk(roots[-1], seen)
    out, keys = [], set()
    for t in found:
        k = t._view  # (storage key, offset, size, stride, dtype)
        if k in keys:
            continue
        keys.add(k)
        out.append(t)
    return out


def archive_storages(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/", 1)[0] + "/"
        recs = [z.getinfo(n) for n in names if n.startswith(prefix + "data/") or n.startswith(prefix + "constants/")]
        has_constants = (prefix + "constants.pkl") in names
    return len(recs), sum(r.file_size for r in recs), has_constants


def unique_numel(ts):
    seen, n = set(), 0
    for t in ts:
        if id(t) in seen:
            continue
        seen.add(id(t))
        n += t.numel()
    return n


def write_ts(name, fname, frozen):
    path = os.path.join(OUT, fname)
    m = torch.jit.load(path)
    tensors = []
    for n, p in m.named_parameters():
        tensors.append(tensor_entry(n, p, "parameter"))
    for n, b in m.named_buffers():
        tensors.append(tensor_entry(n, b, "buffer"))
    hid = []
    hidden_tensors(m, "", hid)
    for n, t in hid:
        tensors.append(tensor_entry(n, t, "attribute"))
    nst, sbytes, has_consts = archive_storages(path)
    consts = None
    if has_consts:
        # every tensor constant the loaded graphs use is among the pickled ones
        gcs = graph_constants(m)
        cts = pickled_constant_tensors(path)
        assert len(cts) >= len(gcs), (len(cts), len(gcs))
        consts = {"tensors": len(cts), "elements": sum(t.numel() for t in cts),
                  "bytes": sum(t.numel() * t.element_size() for t in cts)}
    e = {"fixture": fname, "torch": torch.__version__, "tensors": tensors,
         "modules": [{"name": n, "training": training_of(s)} for n, s in m.named_modules()],
         "parameters": unique_numel([p for _, p in m.named_parameters()]),
         "buffers": unique_numel([b for _, b in m.named_buffers()]),
         "attributes": sum(t.numel() for _, t in hid),
         "storages": nst, "file_storage_bytes": sbytes, "frozen": frozen, "constants": consts}
    with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
        json.dump(e, f, indent=1, sort_keys=True)
        f.write("\n")


def write_sd(name, model):
    fname = name + ".pt"
    torch.save(model.state_dict(), os.path.join(OUT, fname))
    tensors = [tensor_entry(n, p, "parameter") for n, p in model.named_parameters()]
    tensors += [tensor_entry(n, b, "buffer") for n, b in model.named_buffers()]
    sd = model.state_dict()
    assert sorted(sd) == sorted(t["name"] for t in tensors), (sorted(sd), [t["name"] for t in tensors])
    e = {"fixture": fname, "torch": torch.__version__, "state_dict": True, "tensors": tensors}
    with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
        json.dump(e, f, indent=1, sort_keys=True)
        f.write("\n")


# ----------------------------------------------------------------------------- models

class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 5)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu(self.conv(self.quant(x)))
        return self.dequant(self.fc(x.reshape(x.shape[0], -1)))


class LstmNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.lstm = nn.LSTM(8, 4, num_layers=1)

    def forward(self, x):
        return self.lstm(self.fc(x))[0]


class WithAttr(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("buf", torch.ones(2))
        self.table = torch.arange(6, dtype=torch.float32)  # a plain tensor attribute: no buffer
        self.scale = torch.tensor([2.0, 3.0])

    def forward(self, x):
        return self.lin(x) * self.scale + self.buf + self.table[:2]


class ScalarConst(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        return x * torch.tensor([0.5, 1.5, 2.5]) + self.offset + torch.tensor(1.0)


class QatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.fc = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.bn(self.fc(self.quant(x))))


# (name, file, frozen): pytorch/android-demo-app ViT4MNIST/mnist_vit.py quantizes (dynamic, Linear),
# traces and calls optimize_for_mobile, which freezes.
PUBLIC = [("public_vit4mnist", "public_vit4mnist.ptl", True)]


def conv_net():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()


def main():
    torch.manual_seed(0)
    # static quantization, qnnpack
    m = QNet().eval()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    p = tq.prepare(m)
    p(torch.randn(4, 3, 8, 8))
    q = tq.convert(p)
    torch.jit.save(torch.jit.script(q), os.path.join(OUT, "qstatic.pt"))
    write_ts("qstatic", "qstatic.pt", False)
    # the same, traced and in train mode on one submodule
    tr = torch.jit.trace(q, torch.randn(1, 3, 8, 8))
    tr.conv.train()
    torch.jit.save(tr, os.path.join(OUT, "qstatic_traced.pt"))
    write_ts("qstatic_traced", "qstatic_traced.pt", False)
    # dynamic quantization: Linear and LSTM
    d = tq.quantize_dynamic(LstmNet().eval(), {nn.Linear, nn.LSTM}, dtype=torch.qint8)
    torch.jit.save(torch.jit.script(d), os.path.join(OUT, "qdynamic.pt"))
    write_ts("qdynamic", "qdynamic.pt", False)
    # optimize_for_mobile (freezes; xnnpack op contexts as constants), lite interpreter archive
    s = torch.jit.script(conv_net())
    o = optimize_for_mobile(s)
    o._save_for_lite_interpreter(os.path.join(OUT, "mobile_opt.ptl"))
    write_ts("mobile_opt", "mobile_opt.ptl", True)
    # a lite archive that is not frozen
    torch.jit.script(conv_net())._save_for_lite_interpreter(os.path.join(OUT, "mobile_plain.ptl"))
    write_ts("mobile_plain", "mobile_plain.ptl", False)
    # torch.jit.freeze
    fr = torch.jit.freeze(torch.jit.script(conv_net()))
    torch.jit.save(fr, os.path.join(OUT, "frozen.pt"))
    write_ts("frozen", "frozen.pt", True)
    # traced with tensor constants, no parameters: not frozen
    torch.jit.save(torch.jit.trace(ScalarConst(), torch.randn(2, 3)), os.path.join(OUT, "scalar_const.pt"))
    write_ts("scalar_const", "scalar_const.pt", False)
    # tensor attributes outside __buffers__
    torch.jit.save(torch.jit.script(WithAttr()), os.path.join(OUT, "tensor_attr.pt"))
    write_ts("tensor_attr", "tensor_attr.pt", False)
    # public archives kept beside the fixtures (sources in testdata/README.md); the truth from torch here
    for name, fname, frozen in PUBLIC:
        if os.path.exists(os.path.join(OUT, fname)):
            write_ts(name, fname, frozen)
    # state dicts: parametrizations and old-style hooks
    from torch.nn.utils import parametrizations as P
    sn = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    P.spectral_norm(sn[0])
    if hasattr(P, "weight_norm"):
        P.weight_norm(sn[2])
    else:
        nn.utils.weight_norm(sn[2])
    write_sd("sd_parametrized", sn)
    old = nn.Sequential(nn.Linear(4, 3), nn.Conv1d(2, 2, 1), nn.BatchNorm1d(3, track_running_stats=True), nn.InstanceNorm1d(3, track_running_stats=True),
                        nn.Linear(3, 2))
    nn.utils.spectral_norm(old[0])
    torch.nn.utils.prune.l1_unstructured(old[4], "weight", amount=0.5)
    nn.utils.weight_norm(old[1])
    write_sd("sd_hooks", old)
    orth = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
    P.orthogonal(orth[0])
    write_sd("sd_orthogonal", orth)
    qat = QatNet().train()
    qat.qconfig = tq.get_default_qat_qconfig("qnnpack")
    pq = tq.prepare_qat(qat)
    pq(torch.randn(4, 3))
    write_sd("sd_qat", pq)


if __name__ == "__main__":
    main()
