#!/usr/bin/env python3
"""Training state the way Lightning saves it, with its truth from torch itself (issue 28, point 6).

Run with any torch (Debian's 1.13 as /usr/bin/python3; 2.6 in a trixie chroot; 2.14 in a sid chroot):

    /usr/bin/python3 testdata/gen_lightning_state.py testdata/lightning
    chroot ROOT python3 /gen/gen_lightning_state.py /gen/lightning      # testdata bound at ROOT/gen

writes lightning/state_t<major><minor>.ckpt and its truth in lightning/state_t<major><minor>.json:

- a checkpoint in Lightning's layout (what Trainer.save_checkpoint writes: epoch, global_step,
  pytorch-lightning_version, state_dict, loops, callbacks, optimizer_states, lr_schedulers,
  hparams_name, hyper_parameters, and the precision plugin's state under its class name) holding
  one real optimizer of every torch.optim class after one step, and one real scheduler of every
  torch.optim.lr_scheduler class after one step; EarlyStopping's and ModelCheckpoint's states as their
  state_dict() returns them (Lightning is not installed here: the dicts have its keys and tensors);
- the truth, read back with torch.load: for each optimizer its class and param_groups (every key but
  params, which is counted) and per-parameter state keys; for each scheduler its class and
  state_dict; each callback's state with tensors as float(t); the loops dict; the scaler state.

The real Lightning 2.6.6 files (t211/lightning_fit.ckpt, written by Trainer.fit on a GPU, and
t211/fabric_state.ckpt, written by fabric.save) have their truth in t211/<name>.state.json, written by
`gen_lightning_state.py --read t211/<name>.ckpt` under torch.
"""

import json
import os
import sys

import torch


def plain(v):
    if isinstance(v, torch.Tensor):
        return plain(v.item()) if v.numel() == 1 else v.tolist()
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"  # JSON has no infinity: as Python prints it
    return v


def truth_of(ckpt, classes=None, scheduler_classes=None):
    out = {"top_keys": list(ckpt.keys()), "optimizers": [], "lr_schedulers": [], "callbacks": {}}
    states = []
    for key in ("optimizer_states", "optimizer", "optimizers"):  # Lightning's list; Fabric's / a loop's own dict
        v = ckpt.get(key)
        states += [x for x in (v if isinstance(v, (list, tuple)) else [v]) if isinstance(x, dict) and "param_groups" in x]
    for i, o in enumerate(states):
        keys = []
        for st in o["state"].values():
            for k in st:
                if k not in keys:
                    keys.append(k)
        out["optimizers"].append({
            "class": classes[i] if classes else None,
            "param_groups": [dict({k: plain(v) for k, v in g.items() if k != "params"}, params=len(g["params"]))
                             for g in o["param_groups"]],
            "state": {"params": len(o["state"]), "keys": keys}})
    for i, s in enumerate(ckpt.get("lr_schedulers", [])):
        out["lr_schedulers"].append({"class": scheduler_classes[i] if scheduler_classes else None, "state": plain(s)})
    for k, v in ckpt.get("callbacks", {}).items():
        out["callbacks"][k] = plain(v)
    out["loops"] = plain(ckpt.get("loops"))
    for k in ckpt:
        if k.endswith("Precision") or k in ("native_amp_scaling_state", "amp_scaling_state"):
            out["precision"] = {"key": k, "state": plain(ckpt[k])}
    return out


def write(folder):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x = torch.randn(5, 4)

    def step(opt):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        if isinstance(opt, torch.optim.LBFGS):
            opt.step(lambda: model(x).pow(2).mean())
        else:
            opt.step()

    o = torch.optim
    optimizers = [
        ("Adam", lambda p: o.Adam(p, lr=1e-3, betas=(0.8, 0.99), weight_decay=0.0)),
        ("AdamW", lambda p: o.AdamW(p, lr=2e-4, weight_decay=0.05)),
        ("SGD", lambda p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
        ("RMSprop", lambda p: o.RMSprop(p, lr=0.01, alpha=0.9)),
        ("Adagrad", lambda p: o.Adagrad(p, lr=0.01)),
        ("Adadelta", lambda p: o.Adadelta(p, lr=1.0)),
        ("Adamax", lambda p: o.Adamax(p, lr=2e-3)),
        ("NAdam", lambda p: o.NAdam(p, lr=2e-3)),
        ("RAdam", lambda p: o.RAdam(p, lr=1e-3)),
        ("ASGD", lambda p: o.ASGD(p, lr=0.01)),
        ("Rprop", lambda p: o.Rprop(p, lr=0.01)),
        ("LBFGS", lambda p: o.LBFGS(p, lr=1, max_iter=2)),
    ]
    opt_states, names = [], []
    for name, make in optimizers:
        opt = make(model.parameters())
        step(opt)
        opt_states.append(opt.state_dict())
        names.append(name)

    s = o.lr_scheduler
    schedulers = [
        ("StepLR", lambda q: s.StepLR(q, step_size=2, gamma=0.5)),
        ("MultiStepLR", lambda q: s.MultiStepLR(q, milestones=[2, 5], gamma=0.1)),
        ("ExponentialLR", lambda q: s.ExponentialLR(q, gamma=0.9)),
        ("CosineAnnealingLR", lambda q: s.CosineAnnealingLR(q, T_max=10, eta_min=1e-5)),
        ("CosineAnnealingWarmRestarts", lambda q: s.CosineAnnealingWarmRestarts(q, T_0=5, T_mult=2)),
        ("OneCycleLR", lambda q: s.OneCycleLR(q, max_lr=0.1, total_steps=20)),
        ("LinearLR", lambda q: s.LinearLR(q, start_factor=0.5, total_iters=4)),
        ("ConstantLR", lambda q: s.ConstantLR(q, factor=0.5, total_iters=4)),
        ("ReduceLROnPlateau", lambda q: s.ReduceLROnPlateau(q, patience=3)),
    ]
    sched_states, snames = [], []
    for name, make in schedulers:
        q = o.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sch = make(q)
        q.step()
        sch.step(1.0) if name == "ReduceLROnPlateau" else sch.step()
        if any(callable(v) for v in sch.state_dict().values()):
            continue  # torch 1.13's OneCycleLR keeps a bound method (anneal_func) in its state: not plain data
        sched_states.append(sch.state_dict())
        snames.append(name)

    ckpt = {
        "epoch": 3,
        "global_step": 42,
        "pytorch-lightning_version": "2.6.6",
        "state_dict": model.state_dict(),
        "loops": {"fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": 42},
            "epoch_loop.batch_progress": {"total": {"ready": 42, "completed": 42, "started": 42, "processed": 42},
                                          "current": {"ready": 10, "completed": 10, "started": 10, "processed": 10},
                                          "is_last_batch": True},
            "epoch_loop.scheduler_progress": {"total": {"ready": 4, "completed": 4}, "current": {"ready": 1, "completed": 1}},
            "epoch_loop.automatic_optimization.optim_progress": {"optimizer": {
                "step": {"total": {"ready": 42, "completed": 41}, "current": {"ready": 10, "completed": 10}},
                "zero_grad": {"total": {"ready": 42, "completed": 42, "started": 42},
                              "current": {"ready": 10, "completed": 10, "started": 10}}}},
            "epoch_loop.val_loop.batch_progress": {"total": {"ready": 8, "completed": 8, "started": 8, "processed": 8},
                                                   "current": {"ready": 2, "completed": 2, "started": 2, "processed": 2},
                                                   "is_last_batch": True},
            "epoch_progress": {"total": {"ready": 4, "completed": 3, "started": 4, "processed": 4},
                               "current": {"ready": 4, "completed": 3, "started": 4, "processed": 4}}}},
        "callbacks": {
            "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}": {
                "wait_count": 2, "stopped_epoch": 0, "best_score": torch.tensor(0.4375), "patience": 5},
            "ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
            "'train_time_interval': None}": {
                "monitor": "val_loss", "best_model_score": torch.tensor(0.4375, dtype=torch.float64),
                "best_model_path": "/runs/ckpts/epoch=1-step=20.ckpt", "current_score": torch.tensor(0.5),
                "dirpath": "/runs/ckpts", "best_k_models": {"/runs/ckpts/epoch=1-step=20.ckpt": torch.tensor(0.4375)},
                "kth_best_model_path": "/runs/ckpts/epoch=1-step=20.ckpt", "kth_value": torch.tensor(0.4375),
                "last_model_path": "/runs/ckpts/last.ckpt"}},
        "optimizer_states": opt_states,
        "lr_schedulers": sched_states,
        "MixedPrecision": {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
                           "_growth_tracker": 17},
        "hparams_name": "kwargs",
        "hyper_parameters": {"lr": 0.001},
    }
    tag = "t" + "".join(torch.__version__.split("+")[0].split(".")[:2])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"state_{tag}.ckpt")
    torch.save(ckpt, path)
    back = torch.load(path, weights_only=False) if hasattr(torch.serialization, "add_safe_globals") else torch.load(path)
    truth = truth_of(back, names, snames)
    truth["_how"] = (f"written and read back by torch {torch.__version__} (torch.save / torch.load); classes are the "
                     "torch.optim classes that made each state")
    with open(os.path.join(folder, f"state_{tag}.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(path)


def read(path):
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    truth = truth_of(ckpt)
    truth["_how"] = f"read by torch.load (torch {torch.__version__}, map_location='cpu') from {os.path.basename(path)}"
    out = os.path.join(os.path.dirname(path), os.path.basename(path).rsplit(".", 1)[0] + ".state.json")
    with open(out, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    if sys.argv[1] == "--read":
        read(sys.argv[2])
    else:
        write(sys.argv[1])
