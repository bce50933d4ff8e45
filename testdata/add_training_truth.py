#!/usr/bin/env python3
"""Measure testdata/hf211 and testdata/hf523 folders as a user loads them, and add to their truth.json what
`accelerate estimate-memory` derives for every row (issue 41). Each folder is measured by the transformers
its truth came from (the `_producer` version; the script refuses another):

    build-venv/truth/bin/python testdata/add_training_truth.py hf523          # transformers 5.23 (truth env)
    pip install --target /tmp/tf517 transformers==5.17.0 httpx 'huggingface-hub>=1.5,<2' --no-deps
    PYTHONPATH=/tmp/tf517 build-venv/truth/bin/python testdata/add_training_truth.py hf211

Per model, from AutoModelFor*.from_pretrained(folder) (the class `architectures[0]` of its config.json):
- accelerate_float32_total_size: accelerate.utils.calculate_maximum_sizes of the folder loaded with
  dtype=torch.float32 (the float32 size), and accelerate_estimate_training_usage_float32: {precision:
  accelerate.commands.estimate.estimate_training_usage(that size, precision)} for float32, float16,
  bfloat16: how the command derives every row's training figure, whatever dtype the folder was saved in
  (the older field accelerate_estimate_training_usage applies the function to a half-precision folder's
  own bytes, which is not what the command prints);
- accelerate_calculate_maximum_sizes and buffer_bytes, measured on the folder loaded with dtype="auto".
  Where they differ from the truth's (hf211: the H200 session measured the model it built in memory, cast
  to bfloat16 before saving, rotary buffers included; loaded from the folder, transformers 5.17 keeps
  inv_freq and original_inv_freq in float32), the loaded folder's replace them and `_loaded` lists what
  changed, with the old values.
"""
import json
import os
import sys

import accelerate
import torch
import transformers
from accelerate.commands import estimate
from accelerate.utils import calculate_maximum_sizes

here = os.path.dirname(os.path.abspath(__file__))
for folder in sys.argv[1:] or ("hf523",):
    path = os.path.join(here, folder, "truth.json")
    doc = json.load(open(path))
    want = doc["_producer"]["transformers"]
    if transformers.__version__ != want:
        sys.exit(f"{folder}: its truth is transformers {want}'s; this is {transformers.__version__}")
    changed = {}
    for name, truth in doc.items():
        if name.startswith("_"):
            continue
        d = os.path.join(here, folder, name)
        cls = getattr(transformers, transformers.AutoConfig.from_pretrained(d).architectures[0])
        loaded = cls.from_pretrained(d, dtype="auto")
        total, largest = calculate_maximum_sizes(loaded)
        sizes = {"total_size": total, "largest_layer": [largest[0], list(largest[1])]}
        buffers = sum(b.numel() * b.element_size() for b in {id(b): b for b in loaded.buffers()}.values())
        for field, value in (("accelerate_calculate_maximum_sizes", sizes), ("buffer_bytes", buffers)):
            if field in truth and truth[field] != value:
                changed[f"{name} {field}"] = truth[field]
                truth[field] = value
        size = calculate_maximum_sizes(cls.from_pretrained(d, dtype=torch.float32))[0]
        truth["accelerate_float32_total_size"] = size
        truth["accelerate_estimate_training_usage_float32"] = {p: estimate.estimate_training_usage(size, p)
                                                               for p in ("float32", "float16", "bfloat16")}
    doc["_training_float32"] = (f"accelerate_estimate_training_usage_float32 and accelerate_float32_total_size added by "
                                f"testdata/add_training_truth.py (transformers {transformers.__version__}, accelerate "
                                f"{accelerate.__version__}, torch {torch.__version__}): the folders as from_pretrained "
                                f"loads them")
    if changed:
        doc["_loaded"] = {"why": "measured on the folder as from_pretrained(dtype=\"auto\") loads it (testdata/"
                                 "add_training_truth.py); the values these replace:", "was": changed}
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if folder == "hf523":  # as gen_hf.py writes it: lists of scalars on one line
        sys.path.insert(0, here)
        from genlib import one_line_lists
        text = one_line_lists(text)
    open(path, "w").write(text)
    print(path, "changed:", changed)
