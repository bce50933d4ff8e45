#!/usr/bin/python3
"""Write torch.export `.pt2` fixtures (issue 15) and, beside each, the truth torch computes for it.

Run with the torch whose archive layout you want (see testdata/README.md, "pt2/"):

    chroot /work/jtests-trixie python3 /MNT/gen_pt2.py /MNT/pt2/t26     # torch 2.6
    chroot /work/sid           python3 /MNT/gen_pt2.py /MNT/pt2/t214    # torch 2.14

For every fixture `<name>.pt2` it writes `<name>.expected.json` (format: testdata/EXPECTED.md,
"testdata/pt2/"). Everything in it comes from torch in this run: the ExportedProgram, its graph
nodes, graph_signature, range_constraints, FlopCounterMode over ep.module(), and zipfile's own listing
of the archive written. Model-level facts are also cross-checked against the serialized JSON inside
the archive (targets, nn_module_stack), so the names recorded are the names the file spells.

Seeded and deterministic: torch 2.6's torch.export.save writes its zip with Python's zipfile, which
stamps members with the wall clock, so the save runs with zipfile's clock pinned to 1980-01-01 (the
member bytes are torch's own). Newer torch writes through PyTorchFileWriter (fixed timestamps).
"""

import contextlib
import glob
import hashlib
import io
import json
import math
import operator
import os
import random
import sys
import time as _time
import zipfile

# A cold, fixed inductor cache: a warm one appends compile commands to the packaged .cpp.
_CACHE = "/tmp/ckpt-gen-pt2-inductor"
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE
import shutil as _shutil  # noqa: E402

_shutil.rmtree(_CACHE, ignore_errors=True)

import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim, export
from torch.utils.flop_counter import FlopCounterMode

TV = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
HAS_PT2_ARCHIVE = TV >= (2, 7)  # torch.export.save writes the pt2 archive format from 2.7 on


def seed(n=0):
    torch.manual_seed(n)
    random.seed(n)


# ----------------------------------------------------------------------------------------- models


class ConvBN(nn.Module):
    """Parameters plus BatchNorm buffers (running stats, num_batches_tracked)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = F.max_pool2d(x, 2)
        return self.fc(x.flatten(1))


class Consts(nn.Module):
    """A plain tensor attribute (lifted as a constant), a non-persistent buffer, and two buffers that
    are views into one storage (offset, stride) so raw weights share a file."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.scale = torch.arange(6, dtype=torch.float32) / 10  # not registered: a tensor constant
        self.register_buffer("mask", torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.bool), persistent=False)
        base = torch.randn(4, 6)
        self.register_buffer("row_a", base[1])
        self.register_buffer("col_b", base[:, 2])
        self.register_buffer("steps", torch.tensor(7, dtype=torch.int64))

    def forward(self, x):
        y = self.lin(x) * self.scale
        y = torch.where(self.mask, y, torch.zeros_like(y))
        return y + self.row_a + self.col_b.sum() + self.steps


class Block(nn.Module):
    """A small pre-norm transformer block exported with a dynamic batch and sequence length."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class SdpaBlock(nn.Module):
    """Same idea with scaled_dot_product_attention written out (q/k/v projections)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, s, d))


class Tied(nn.Module):
    """One Parameter reachable under two names (embedding and output head)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.proj(self.emb(idx))))


class Small(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


# ------------------------------------------------------------------------------------------ truth


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def dim_str(d):
    if isinstance(d, torch.SymInt):
        return str(d.node.expr)
    return int(d)


def tensor_facts(t):
    plain = t.data if isinstance(t, nn.Parameter) else t
    return {
        "dtype": dtype_name(t.dtype),
        "shape": [int(s) for s in t.shape],
        "stride": [int(s) for s in t.stride()],
        "storage_offset": int(t.storage_offset()),
        "requires_grad": bool(t.requires_grad),
        "numel": int(t.numel()),
        "nbytes": int(t.numel() * t.element_size()),
        "tensor_type": type(plain).__module__ + "." + type(plain).__qualname__,
    }


def op_name(target):
    """The serializer's spelling of a call_function target (torch/_export/serde/serialize.py)."""
    if isinstance(target, str):
        return target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)) or getattr(
        target, "__module__", ""
    ).startswith("torch._ops"):
        return "torch.ops." + (str(target) if isinstance(target, torch._ops.OpOverload) else target.__name__)
    return f"{target.__module__}.{target.__name__}"


def type_name(ty):
    if isinstance(ty, str):
        return ty
    return f"{ty.__module__}.{ty.__qualname__}"


def meta_spec(node):
    """dtype and shape (symbolic dims as strings) of a node's example value."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return {"dtype": dtype_name(val.dtype), "shape": [dim_str(s) for s in val.shape]}
    if isinstance(val, (int, float, bool)) or isinstance(val, torch.SymInt):
        return {"value": dim_str(val) if isinstance(val, torch.SymInt) else val}
    return {"value_type": type(val).__name__}


def bound(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if math.isinf(f):
        return None
    return int(v)


def flops(ep, args):
    """FlopCounterMode over ep.module() (the total) and over torch.export.unflatten(ep), whose module
    hierarchy gives the per-module split: path ("" = root) -> {op: flops}, ops as
    "torch.ops.aten.mm" (FlopCounterMode counts per overload packet)."""

    def count(mod):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            mod(*args)
        return counter

    total = count(ep.module()).get_total_flops()
    un = count(torch.export.unflatten(ep))
    assert un.get_total_flops() == total, (un.get_total_flops(), total)
    per = {}
    for mname, ops in un.get_flop_counts().items():
        if mname == "Global":
            continue
        path = mname.split(".", 1)[1] if "." in mname else ""
        per[path] = {"torch.ops." + str(k): int(v) for k, v in sorted(ops.items(), key=lambda kv: str(kv[0]))}
    return {"total": int(total), "per_module": dict(sorted(per.items()))}


def model_truth(ep, args, json_doc):
    sig = ep.graph_signature
    params = set(sig.parameters)
    buffers = set(sig.buffers)
    nonpersistent = set(sig.non_persistent_buffers)
    tensors = []
    for name, t in ep.state_dict.items():
        # A tied Parameter appears in state_dict under every name but in the signature once.
        kind = "parameter" if name in params else "buffer" if name in buffers else None
        in_sig = kind is not None
        if kind is None:
            kind = "parameter" if isinstance(t, nn.Parameter) else "buffer"
        row = {"name": name, "kind": kind, "source": "state_dict", "in_signature": in_sig}
        if kind == "buffer":
            row["persistent"] = name not in nonpersistent
        row.update(tensor_facts(t))
        tensors.append(row)
    for name, c in ep.constants.items():
        if isinstance(c, torch.Tensor):
            kind = "buffer" if name in buffers else "constant"
            row = {"name": name, "kind": kind, "source": "constants", "in_signature": True}
            if kind == "buffer":
                row["persistent"] = name not in nonpersistent
            row.update(tensor_facts(c))
        else:
            row = {"name": name, "kind": "custom_object", "source": "constants", "type": type(c).__name__}
        tensors.append(row)

    # Totals the way nn.Module counts them: ep.module() dedups tied parameters.
    mod = ep.module()
    ps = list(mod.named_parameters())
    bs = list(mod.named_buffers())
    consts = [c for c in ep.constants.values() if isinstance(c, torch.Tensor) and not any(c is b for _, b in bs)]
    nb = lambda t: t.numel() * t.element_size()
    totals = {
        "parameter_tensors": len(ps),
        "parameters": sum(p.numel() for _, p in ps),
        "trainable": sum(p.numel() for _, p in ps if p.requires_grad),
        "buffer_tensors": len(bs),
        "buffers": sum(b.numel() for _, b in bs),
        "persistent_buffers": sum(b.numel() for n, b in bs if n not in nonpersistent),
        "constant_tensors": len(consts),
        "constants": sum(c.numel() for c in consts),
        "bytes": sum(nb(p) for _, p in ps) + sum(nb(b) for _, b in bs) + sum(nb(c) for c in consts),
        "named_parameters": [n for n, _ in ps],
        "named_buffers": [n for n, _ in bs],
    }

    modules = {}
    census = {}
    for node in ep.graph.nodes:
        for key, (path, ty) in (node.meta.get("nn_module_stack") or {}).items():
            modules.setdefault(path, type_name(ty))
        # The serializer folds operator.getitem into the outputs of the node it indexes, so the
        # file has no getitem nodes; the census counts what the file holds.
        if node.op == "call_function" and node.target is not operator.getitem:
            n = op_name(node.target)
            census[n] = census.get(n, 0) + 1

    # Cross-check against the serialized graph: names must be the file's.
    g = json_doc["graph_module"]["graph"]
    file_census = {}
    file_modules = {}
    for n in g["nodes"]:
        file_census[n["target"]] = file_census.get(n["target"], 0) + 1
        stack = n.get("metadata", {}).get("nn_module_stack")
        if stack:
            for item in stack.split(";"):
                key, path, ty = item.split(",", 2) if item.count(",") >= 2 else (item, "", "")
                file_modules.setdefault(path, ty)
    assert file_census == census, (file_census, census)
    assert file_modules == modules, (file_modules, modules)

    nodes = {n.name: n for n in ep.graph.nodes}
    inputs = []
    for spec in sig.input_specs:
        name = getattr(spec.arg, "name", None)
        row = {"kind": spec.kind.name, "name": name, "target": spec.target}
        if spec.kind.name == "BUFFER":
            row["persistent"] = bool(spec.persistent)
        if name in nodes:
            row.update(meta_spec(nodes[name]))
        inputs.append(row)
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    out_nodes = {a.name: a for a in out_node.args[0] if isinstance(a, torch.fx.Node)}
    outputs = []
    for spec in sig.output_specs:
        name = getattr(spec.arg, "name", None)
        row = {"kind": spec.kind.name, "name": name, "target": spec.target}
        if name in out_nodes:
            row.update(meta_spec(out_nodes[name]))
        outputs.append(row)

    ranges = {str(k): [bound(v.lower), bound(v.upper)] for k, v in ep.range_constraints.items()}
    return {
        "tensors": tensors,
        "totals": totals,
        "modules": dict(sorted(modules.items())),
        "ops": dict(sorted(census.items())),
        "call_function_nodes": sum(census.values()),
        "inputs": inputs,
        "outputs": outputs,
        "range_constraints": ranges,
        "flops": flops(ep, args),
    }


def layout(path):
    with zipfile.ZipFile(path) as z:
        return [
            {"name": i.filename, "size": i.file_size, "compressed_size": i.compress_size,
             "compress_type": i.compress_type}
            for i in z.infolist()
        ]


def model_jsons(path):
    """name -> parsed serialized ExportedProgram, from whichever layout this torch wrote."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if n.endswith("serialized_exported_program.json"):
                out["model"] = json.loads(z.read(n))
            elif "/models/" in n and n.endswith(".json"):
                out[os.path.basename(n)[: -len(".json")]] = json.loads(z.read(n))
    return out


class _FrozenClock:
    """Stands in for the `time` module inside zipfile (torch 2.6 writes its zip with zipfile)."""

    def __getattr__(self, name):
        return getattr(_time, name)

    @staticmethod
    def time():
        return 315532800.0  # 1980-01-01 00:00:00 UTC

    @staticmethod
    def localtime(_t=None):
        return _time.gmtime(315532800)


@contextlib.contextmanager
def pinned_zip_clock():
    saved = zipfile.time
    zipfile.time = _FrozenClock()
    try:
        yield
    finally:
        zipfile.time = saved


def write_truth(out, name, eps, notes, extra=None):
    path = os.path.join(out, name + ".pt2")
    docs = model_jsons(path)
    truth = {
        "torch_version": torch.__version__,
        "file": name + ".pt2",
        "file_bytes": os.path.getsize(path),
        "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
        "archive_format": "pt2" if HAS_PT2_ARCHIVE else "legacy_zip",
        "notes": notes,
        "members": layout(path),
        "models": {},
    }
    for mname, (ep, args) in eps.items():
        truth["models"][mname] = model_truth(ep, args, docs[mname])
    if extra:
        truth.update(extra)
    with open(os.path.join(out, name + ".expected.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{name}.pt2: {truth['file_bytes']} bytes, models {list(eps)}")


def save(ep, path):
    with pinned_zip_clock():
        torch.export.save(ep, path)


# ------------------------------------------------------------------------------------------ cases


def case_convbn(out):
    seed(1)
    m = ConvBN()
    m.train()
    m(torch.randn(4, 3, 8, 8))  # move running stats and num_batches_tracked off their defaults
    m.eval()
    args = (torch.randn(2, 3, 8, 8),)
    ep = export(m, args)
    save(ep, os.path.join(out, "convbn.pt2"))
    write_truth(out, "convbn", {"model": (ep, args)}, "Conv2d+BatchNorm2d+Linear, eval mode, static shapes")


def case_consts(out):
    seed(2)
    m = Consts().eval()
    args = (torch.randn(3, 6),)
    ep = export(m, args)
    save(ep, os.path.join(out, "consts.pt2"))
    write_truth(
        out, "consts", {"model": (ep, args)},
        "plain tensor attribute lifted as a constant; non-persistent bool buffer; two buffers viewing one storage",
    )


def case_dynamic(out):
    seed(3)
    m = Block().eval()
    args = (torch.randn(2, 8, 16),)
    batch = Dim("batch", min=1, max=16)
    seq = Dim("seq", min=2, max=64)
    ep = export(m, args, dynamic_shapes={"x": {0: batch, 1: seq}})
    save(ep, os.path.join(out, "dynamic_mha.pt2"))
    write_truth(out, "dynamic_mha", {"model": (ep, args)}, "MultiheadAttention block, Dim batch [1,16], seq [2,64]")

    seed(4)
    m = SdpaBlock().eval()
    args = (torch.randn(2, 6, 16),)
    ep = export(m, args, dynamic_shapes={"x": {0: Dim("b", min=1, max=8), 1: Dim("s", min=2, max=128)}})
    save(ep, os.path.join(out, "dynamic_sdpa.pt2"))
    write_truth(out, "dynamic_sdpa", {"model": (ep, args)}, "scaled_dot_product_attention block, Dim b [1,8], s [2,128]")


def case_tied(out):
    seed(5)
    m = Tied().eval()
    args = (torch.tensor([[1, 2, 3], [4, 5, 6]]),)
    ep = export(m, args)
    save(ep, os.path.join(out, "tied.pt2"))
    write_truth(out, "tied", {"model": (ep, args)}, "emb.weight and head.weight are one Parameter")


def case_multi(out):
    if not HAS_PT2_ARCHIVE:
        return "multi: torch 2.6 has no API that stores several ExportedPrograms in one file"
    from torch.export.pt2_archive._package import package_pt2

    seed(6)
    a, b = Small(4, 3).eval(), ConvBN().eval()
    aa, ba = (torch.randn(2, 4),), (torch.randn(1, 3, 8, 8),)
    epa, epb = export(a, aa), export(b, ba)
    package_pt2(os.path.join(out, "multi.pt2"), exported_programs={"encoder": epa, "decoder": epb})
    write_truth(out, "multi", {"encoder": (epa, aa), "decoder": (epb, ba)},
                "package_pt2 with two ExportedPrograms named encoder and decoder")
    return None


def case_pickled(out):
    if not HAS_PT2_ARCHIVE:
        return "pickled_weights: torch 2.6's torch.export.save pickles the whole state dict (serialized_state_dict.pt); no use_pickle"
    from torch.testing._internal.two_tensor import TwoTensor

    class Sub(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(TwoTensor(torch.randn(3, 4), torch.randn(3, 4)))
            self.plain = nn.Linear(4, 3)

        def forward(self, x):
            return x @ self.w.t() + self.plain(x)

    seed(7)
    m = Sub().eval()
    args = (torch.randn(2, 4),)
    try:
        ep = export(m, args)
        torch.export.save(ep, os.path.join(out, "pickled_weights.pt2"))
    except Exception as e:  # noqa: BLE001 - report why the case is missing
        return f"pickled_weights: export/save of a TwoTensor parameter failed: {type(e).__name__}: {str(e)[:200]}"
    write_truth(out, "pickled_weights", {"model": (ep, args)},
                "w is a TwoTensor (a tensor subclass), which _should_use_pickle stores as a torch.save blob")
    return None


def artifact_kind(name):
    base = os.path.basename(name)
    if base.endswith((".json", ".txt", ".ld")):  # metadata, compile/link flags, linker scripts
        return "other"
    if base.endswith(".so"):
        return ".so"
    if base.endswith((".cpp", ".c", ".cc", ".cxx", ".cu")):
        return ".cpp"
    if base.endswith((".cubin", ".hsaco", ".spv", ".ptx", ".fatbin")) or "kernel" in base:
        return "kernel"
    if base.endswith(".o"):  # an ELF object; AOTI ships its weights as one (*.weights.o)
        return "weights" if ".weights." in base else "object"
    if base.endswith((".bin", ".blob")) or "/data/weights/" in name or "/data/constants/" in name:
        return "weights"
    return "other"


def case_aoti(out):
    """A full AOTInductor package (.so + .cpp) and, smaller, a package_cpp_only one (sources only)."""
    import shutil

    if not shutil.which("g++") and not shutil.which("c++"):
        return ["aoti: no C++ compiler in this root"]
    why = []
    for name, configs, note in (
        ("aoti_small", None, "aoti_compile_and_package of a one-Linear model on CPU"),
        ("aoti_cpp_only", {"aot_inductor.package_cpp_only": True},
         "aoti_compile_and_package with aot_inductor.package_cpp_only: C++ sources, no .so"),
    ):
        w = aoti_package(out, name, configs, note)
        if w:
            why.append(w)
    return why


def aoti_package(out, name, configs, note):
    seed(8)
    m = Small(8, 4).eval()
    args = (torch.randn(2, 8),)
    ep = export(m, args)
    path = os.path.join(out, name + ".pt2")
    try:
        with pinned_zip_clock():
            torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
    except Exception as e:  # noqa: BLE001
        return f"{name}: aoti_compile_and_package failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
    mem = layout(path)
    arts = [
        {"path": r["name"], "bytes": r["size"], "kind": artifact_kind(r["name"])}
        for r in mem
        if "/data/aotinductor/" in r["name"] or r["name"].startswith("data/aotinductor/")
    ]
    size = os.path.getsize(path)
    kept = size <= 1_000_000
    truth = {
        "torch_version": torch.__version__,
        "file": name + ".pt2",
        "file_bytes": size,
        "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
        "file_committed": kept,
        "notes": note,
        "members": mem,
        "aoti_artifacts": arts,
        "native_code": [a["path"] for a in arts if a["kind"] in (".so", ".cpp", "kernel", "object") or a["path"].endswith(".o")],
    }
    if not kept:
        os.remove(path)
    with open(os.path.join(out, name + ".expected.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(f"{name}.pt2: {size} bytes (kept: {kept})")
    return None if kept else f"{name}: package is {size} bytes, only its truth is kept"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "pt2", "t%d%d" % TV)
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "*.pt2")) + glob.glob(os.path.join(out, "*.expected.json")):
        os.remove(old)
    torch.set_num_threads(1)
    skipped = []
    case_convbn(out)
    case_consts(out)
    case_dynamic(out)
    case_tied(out)
    for case in (case_multi, case_pickled, case_aoti):
        why = case(out)
        for w in [why] if isinstance(why, str) else why or []:
            skipped.append(w)
            print("skipped:", w)
    with open(os.path.join(out, "skipped.json"), "w") as f:
        json.dump({"torch_version": torch.__version__, "skipped": skipped}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
