#!/usr/bin/python3
"""Write the torch.compile fixtures (issue 31): TorchScript archives of small modules, one construct
each, and what dynamo itself says of the original Python module.

Run under torch 2.x (a Debian 13 chroot for torch 2.6, sid for 2.14; see README.md "Rerunning"):

    chroot /work/jtests-trixie python3 /gen/gen_compile.py      # writes /gen/compile/t26/
    chroot /work/jtests-sid    python3 /gen/gen_compile.py      # writes /gen/compile/t214/

Each construct (a few lines of Python on an input x of shape (4, 8)) is placed four ways where it can be:
  forward  - in the module's forward;
  sub      - in a submodule's forward, the root calling it;
  helper   - in a free function that forward calls (TorchScript keeps it outside the class);
  method   - in a @torch.jit.export method `step`, forward being clean (torch.compile(m.step) is what
             the truth is about; `forward_breaks` says what compiling forward alone gives).
A few are traced (torch.jit.trace bakes the branch taken into the graph and turns .item() into a
constant: the archive cannot show those, `shows` false; a one-argument torch.where still shows as the
nonzero it ran) or call a @torch.jit.unused method (the archive keeps a stub that raises). Constructs
that cannot be archived are listed in `skipped` with the error: torch.cond (lambdas do not script) and
a @torch.jit.ignore function (torch.jit.save refuses a prim::PythonOp).

OUTDIR/truth.json:
  {"torch": "<torch.__version__>",
   "cases": {"<archive file>": {
       "family": str, "placement": str, "entry": "forward"|"step", "shows": bool (the archive still
       shows the construct), "negative": bool (written as a clean construct; the verdict is still
       dynamo's),
       "source": the Python text of the construct,
       "dynamo": {"default"|"capture_scalar_outputs"|"capture_dynamic_output_shape_ops"|"allow_rnn":
                  {"graph_breaks": int, "reasons": [str], "fullgraph": null | "<Exception>: <first line>",
                   "breaks": bool}},   # breaks = graph_breaks > 0 or fullgraph raised
       "forward_breaks": bool (method placement only)}},
   "skipped": {"<family>_<placement>": "<why no archive>"}}
The flag configs (torch._dynamo.config.<name> = True) are run only where the default config breaks (a flag cannot add a break here).
Explain: torch._dynamo.explain(fn)(x); fullgraph: torch.compile(fn, backend="eager", fullgraph=True)(x);
torch._dynamo.reset() before each.
"""

import importlib.util
import json
import os
import sys
import textwrap
import traceback
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MM = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "compile", "t%d%d" % MM)
SRC_DIR = "/tmp/ckpt_compile_cases"

# name -> (kind, init lines or "", body). kind: "break" (written to break dynamo) or "clean"; the truth
# is dynamo's either way. Bodies use x (Tensor (4, 8)) and return a Tensor; `self.m` is the init's module
# (such constructs have no helper placement).
CONSTRUCTS = {
    # a tensor's truth value in a condition
    "cond_direct": ("break", "", """
        if x.sum() > 0:
            return x + 1
        return x - 1"""),
    "cond_var": ("break", "", """
        flag = bool(x.sum() > 0)
        y = x * 2
        if flag:
            y = y + 1
        return y"""),
    "cond_while": ("break", "", """
        n = x.abs().sum()
        while n > 1:
            n = n / 2
        return x + n"""),
    "cond_is_nonzero": ("break", "", """
        if torch.is_nonzero(x.sum() > 0):
            return x + 1
        return x"""),
    "cond_equal": ("break", "", """
        if torch.equal(x, x.abs()):
            return x + 1
        return x - 1"""),
    "cond_no_grad": ("break", "", """
        with torch.no_grad():
            if (x > 0).any():
                return x + 1
        return x"""),
    "cond_self_method": ("break", "", """
        return self.decide(x)"""),
    "cond_allclose": ("break", "", """
        if torch.allclose(x, x.abs()):
            return x + 1
        return x - 1"""),
    "cond_and": ("break", "", """
        if x.shape[0] > 2 and bool((x > 0).any()):
            return x + 1
        return x"""),
    # a tensor made a Python number
    "item_return": ("break", "", """
        return x * x.sum().item()"""),
    "item_if": ("break", "", """
        v = float(x.sum().item())
        if v > 0.0:
            return x + 1
        return x"""),
    "item_slice": ("break", "", """
        n = int(x[0, 0].abs().item()) % 2 + 1
        return x[:n]"""),
    "tolist_float": ("break", "", """
        v: List[float] = x[0].tolist()
        return x + v[0]"""),
    "tolist_bool": ("break", "", """
        v: List[bool] = (x[0] > 0).tolist()
        return x + float(v[0])"""),
    "tolist_int": ("break", "", """
        v: List[int] = x[0].long().tolist()
        return x + v[0]"""),
    "int_tensor": ("break", "", """
        return x * int(x.sum())"""),
    "float_tensor": ("break", "", """
        return x * float(x.sum())"""),
    # data-dependent output shapes
    "nonzero": ("break", "", """
        return torch.nonzero(x > 0).sum() + x"""),
    "unique": ("break", "", """
        return torch.unique(x.round()).sum() + x"""),
    "unique_dim": ("break", "", """
        return torch.unique(x.round(), dim=0).sum() + x"""),
    "nonzero_tuple": ("break", "", """
        return torch.nonzero(x > 0, as_tuple=True)[0].sum() + x"""),
    "item_range": ("break", "", """
        y = x
        for _ in range(int(x.abs().sum().item()) % 3):
            y = y + 1
        return y"""),
    "masked_select": ("break", "", """
        return torch.masked_select(x, x > 0).sum() + x"""),
    "bool_mask": ("break", "", """
        return x[x > 0].sum() + x"""),
    "where_one_arg": ("break", "", """
        return torch.where(x > 0)[0].sum() + x"""),
    "argwhere": ("break", "", """
        return torch.argwhere(x > 0).sum() + x"""),
    "bincount": ("break", "", """
        return torch.bincount(x.abs().long().flatten()).sum() + x"""),
    "repeat_tensor": ("break", "", """
        return torch.repeat_interleave(x, (x[:, 0] > 0).long() + 1, dim=0).sum() + x"""),
    # Python side effects dynamo does not trace
    "print": ("break", "", """
        print(x)
        return x + 1"""),
    "python_op": ("break", "", """
        return ignored_helper(x)"""),
    "warn": ("break", "", """
        warnings.warn("ckpt: a warning in forward")
        return x + 1"""),
    "lstm": ("break", "self.m = torch.nn.LSTM(8, 8)", """
        y, _ = self.m(x.unsqueeze(1))
        return y.squeeze(1)"""),
    "gru": ("break", "self.m = torch.nn.GRU(8, 8)", """
        y, _ = self.m(x.unsqueeze(1))
        return y.squeeze(1)"""),
    "rnn": ("break", "self.m = torch.nn.RNN(8, 8)", """
        y, _ = self.m(x.unsqueeze(1))
        return y.squeeze(1)"""),
    # clean constructs (some look like the ones above)
    "assert_tensor": ("clean", "", """
        assert (x > -1e9).all()
        return x + 1"""),
    "histc": ("clean", "", """
        return torch.histc(x, bins=4).sum() + x"""),
    "repeat_int": ("clean", "", """
        return torch.repeat_interleave(x, 2, dim=0)"""),
    "print_guarded": ("clean", "", """
        if not torch.compiler.is_compiling():
            print(x)
        return x + 1"""),
    "warn_guarded": ("clean", "", """
        if not torch.compiler.is_compiling():
            warnings.warn("ckpt: a warning outside torch.compile")
        return x + 1"""),
    "training_branch": ("clean", "", """
        if self.training:
            return x * 2
        return x"""),
    "module_list": ("clean", "self.m = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(3)])", """
        for layer in self.m:
            x = torch.relu(layer(x))
        return x"""),
    "shape_cond": ("clean", "", """
        if x.shape[0] > 2:
            return x + 1
        return x - 1"""),
    "int_of_size": ("clean", "", """
        n = int(x.size(0)) - 1
        return x[:n] * float(x.dim())"""),
    "where_three_arg": ("clean", "", """
        return torch.where(x > 0, x, -x)"""),
    "masked_fill": ("clean", "", """
        return x.masked_fill(x > 0, 0.0)"""),
    "setitem_mask": ("clean", "", """
        y = x.clone()
        y[y > 0] = 0.0
        return y"""),
    "inplace": ("clean", "", """
        y = x.clone()
        y.add_(1)
        y.relu_()
        return y"""),
    "index_put": ("clean", "", """
        y = x.clone()
        y.index_put_((torch.tensor([0, 2]),), torch.ones(8))
        return y"""),
    "none_check": ("clean", "", """
        b: Optional[Tensor] = None
        if x.dim() == 2:
            b = x + 1
        if b is not None:
            return b
        return x"""),
    "conv": ("clean", "self.m = torch.nn.Conv2d(1, 2, 3, padding=1)", """
        return self.m(x.view(1, 1, 4, 8)).sum(1).view(4, 8)"""),
    "mlp": ("clean", "self.m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.LayerNorm(16), "
            "torch.nn.Linear(16, 8))", """
        return self.m(x)"""),
    "batchnorm": ("clean", "self.m = torch.nn.BatchNorm1d(8)", """
        return self.m(x)"""),
    "attention": ("clean", "self.m = torch.nn.MultiheadAttention(8, 2, batch_first=True)", """
        q = x.unsqueeze(0)
        return self.m(q, q, q)[0].squeeze(0)"""),
    "sdpa": ("clean", "", """
        q = x.view(1, 2, 4, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q).view(4, 8)"""),
    "transformer": ("clean", "self.m = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)", """
        return self.m(x.unsqueeze(0)).squeeze(0)"""),
    "cond_op": ("clean", "", """
        return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))"""),
}

HEADER = ("import warnings\nfrom typing import List, Optional\n\nimport torch\nfrom torch import Tensor\n\n\n"
          "@torch.jit.ignore\ndef ignored_helper(x: Tensor) -> Tensor:\n    return x + 1\n\n\n")


def body(src, indent):
    return textwrap.indent(textwrap.dedent(src).strip("\n"), " " * indent)


def init_block(init, src=""):
    lines = "    def __init__(self):\n        super().__init__()\n"
    if init:
        lines += "        " + init + "\n"
    if "self.decide(" in src:  # a method of the class that forward calls (not exported)
        lines += ("\n    def decide(self, x: Tensor) -> Tensor:\n        if x.sum() > 0:\n            return x + 1\n"
                  "        return x - 1\n")
    return lines


def write_cases():
    """The module file with every case's classes: TorchScript wants real source files."""
    out = [HEADER]
    for name, (_, init, src) in CONSTRUCTS.items():
        uses_self = "self." in src
        out.append(f"class F_{name}(torch.nn.Module):\n{init_block(init, src)}"
                   f"    def forward(self, x: Tensor) -> Tensor:\n{body(src, 8)}\n\n")
        out.append(f"class S_{name}(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   f"        self.inner = F_{name}()\n\n"
                   f"    def forward(self, x: Tensor) -> Tensor:\n        return self.inner(x) * 2\n\n")
        if not uses_self:
            out.append(f"def helper_{name}(x: Tensor) -> Tensor:\n{body(src, 4)}\n\n")
            out.append(f"class H_{name}(torch.nn.Module):\n"
                       f"    def forward(self, x: Tensor) -> Tensor:\n        return helper_{name}(x + 1)\n\n")
        out.append(f"class M_{name}(torch.nn.Module):\n{init_block(init, src)}"
                   f"    def forward(self, x: Tensor) -> Tensor:\n        return x * 2\n\n"
                   f"    @torch.jit.export\n    def step(self, x: Tensor) -> Tensor:\n{body(src, 8)}\n\n")
    # what an archive cannot show
    out.append("class T_cond_direct(torch.nn.Module):\n    def forward(self, x: Tensor) -> Tensor:\n"
               + body(CONSTRUCTS["cond_direct"][2], 8) + "\n\n")
    out.append("class T_item_return(torch.nn.Module):\n    def forward(self, x: Tensor) -> Tensor:\n"
               + body(CONSTRUCTS["item_return"][2], 8) + "\n\n")
    out.append("class T_where_one_arg(torch.nn.Module):\n    def forward(self, x: Tensor) -> Tensor:\n"
               + body(CONSTRUCTS["where_one_arg"][2], 8) + "\n\n")
    out.append("class U_cond_direct(torch.nn.Module):\n    def forward(self, x: Tensor) -> Tensor:\n"
               "        return self.decide(x)\n\n    @torch.jit.unused\n    def decide(self, x: Tensor) -> Tensor:\n"
               + body(CONSTRUCTS["cond_direct"][2], 8) + "\n\n")
    os.makedirs(SRC_DIR, exist_ok=True)
    path = os.path.join(SRC_DIR, "compile_cases.py")
    with open(path, "w") as f:
        f.write("".join(out))
    spec = importlib.util.spec_from_file_location("compile_cases", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compile_cases"] = mod
    spec.loader.exec_module(mod)
    return mod


def first_line(e):
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"


def dynamo(fn, x, **config):
    import torch._dynamo as dyn
    res = {}
    with dyn.config.patch(**config), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dyn.reset()
        try:
            ex = dyn.explain(fn)(x)
            res["graph_breaks"] = ex.graph_break_count
            res["reasons"] = [str(r.reason).strip() for r in ex.break_reasons]
        except Exception as e:  # explain itself raised: that is a break with this reason
            res["graph_breaks"] = 1
            res["reasons"] = [first_line(e)]
        dyn.reset()
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(x)
            res["fullgraph"] = None
        except Exception as e:
            res["fullgraph"] = first_line(e)
        dyn.reset()
    res["breaks"] = res["graph_breaks"] > 0 or res["fullgraph"] is not None
    return res


def verdicts(fn, x):
    d = {"default": dynamo(fn, x)}
    if d["default"]["breaks"]:
        d["capture_scalar_outputs"] = dynamo(fn, x, capture_scalar_outputs=True)
        d["capture_dynamic_output_shape_ops"] = dynamo(fn, x, capture_dynamic_output_shape_ops=True)
        d["allow_rnn"] = dynamo(fn, x, allow_rnn=True)
    return d


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".pt"):
            os.remove(os.path.join(OUT, f))
    mod = write_cases()
    cases, skipped = {}, {}
    placements = [("forward", "F"), ("sub", "S"), ("helper", "H"), ("method", "M")]
    for name, (kind, _, src) in CONSTRUCTS.items():
        for placement, prefix in placements:
            cls = getattr(mod, f"{prefix}_{name}", None)
            if cls is None:
                continue
            key = f"{name}_{placement}"
            torch.manual_seed(0)
            m = cls()
            x = torch.randn(4, 8)
            try:
                sm = torch.jit.script(m)
            except Exception as e:
                skipped[key] = "torch.jit.script: " + first_line(e)
                continue
            fname = key + ".pt"
            try:
                torch.jit.save(sm, os.path.join(OUT, fname))
            except Exception as e:
                skipped[key] = "torch.jit.save: " + first_line(e)
                continue
            entry = "step" if placement == "method" else "forward"
            case = {"family": name, "placement": placement, "entry": entry, "shows": True,
                    "negative": kind == "clean", "source": textwrap.dedent(src).strip("\n"),
                    "dynamo": verdicts(getattr(m, entry), x)}
            if placement == "method":
                case["forward_breaks"] = dynamo(m.forward, x)["breaks"]
            cases[fname] = case
            print(f"{fname}: {'breaks' if case['dynamo']['default']['breaks'] else 'clean'}", flush=True)
    x = torch.randn(4, 8)
    # traced: the trace keeps the operators that ran (nonzero of a one-argument where shows), not branches
    # or Python numbers; unused: a stub that raises.
    for name, how, shows in [("T_cond_direct", "traced", False), ("T_item_return", "traced", False),
                             ("T_where_one_arg", "traced", True), ("U_cond_direct", "unused", False)]:
        m = getattr(mod, name)()
        family = name[2:]
        fname = f"{family}_{how}.pt"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = torch.jit.trace(m, (x,)) if how == "traced" else torch.jit.script(m)
        torch.jit.save(sm, os.path.join(OUT, fname))
        cases[fname] = {"family": family, "placement": how, "entry": "forward", "shows": shows, "negative": False,
                        "source": textwrap.dedent(CONSTRUCTS[family][2]).strip("\n"), "dynamo": verdicts(m.forward, x)}
        print(f"{fname}: {'breaks' if cases[fname]['dynamo']['default']['breaks'] else 'clean'}", flush=True)
    with open(os.path.join(OUT, "truth.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases, "skipped": skipped}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(cases)} archives, {len(skipped)} skipped -> {OUT}")


if __name__ == "__main__":
    main()
