#!/usr/bin/env python3
"""Add to testdata/hf211/truth.json and testdata/hf523/truth.json, per model, the training usage as
`accelerate estimate-memory` derives every row of its table (issue 41): accelerate's
estimate_training_usage of the float32 size, whatever dtype the folder was saved in.

Run with the truth environment's python (scripts/truth-env.sh):

    build-venv/truth/bin/python testdata/add_training_truth.py

Writes, beside each model's other fields:
- accelerate_estimate_training_usage_float32: {precision: accelerate.commands.estimate.estimate_training_usage(
  size, precision)} for float32, float16, bfloat16, where size is the float32 size of the model whose total
  the truth records (accelerate_calculate_maximum_sizes.total_size): that total plus what loading the folder
  in float32 adds to accelerate.utils.calculate_maximum_sizes (from_pretrained(folder, dtype=torch.float32)
  against dtype="auto", the class `architectures[0]` of its config.json); accelerate_float32_total_size:
  that size.

The older field accelerate_estimate_training_usage applies the function to the total of the model loaded in
its own dtype, which for a half-precision folder is not what the command prints (hf211's truth came so from
../shared/fixtures/hf211; this adds the command's derivation to the project's copy and changes nothing
else). Every other byte of the files stays as it was.
"""
import json
import os

import accelerate
import torch
import transformers
from accelerate.commands import estimate
from accelerate.utils import calculate_maximum_sizes

here = os.path.dirname(os.path.abspath(__file__))
for folder in ("hf211", "hf523"):
    path = os.path.join(here, folder, "truth.json")
    doc = json.load(open(path))
    for name, truth in doc.items():
        if name.startswith("_"):
            continue
        d = os.path.join(here, folder, name)
        cls = getattr(transformers, transformers.AutoConfig.from_pretrained(d).architectures[0])
        # The recorded total (the model in its own dtype, by the transformers that wrote the truth) plus what
        # loading it in float32 adds, both sides measured here: hf211's total is transformers 5.17's, whose
        # models register fewer non-persistent buffers than this one's (those cancel out in the difference).
        grows = calculate_maximum_sizes(cls.from_pretrained(d, dtype=torch.float32))[0] - \
            calculate_maximum_sizes(cls.from_pretrained(d, dtype="auto"))[0]
        size = truth["accelerate_calculate_maximum_sizes"]["total_size"] + grows
        truth["accelerate_float32_total_size"] = size
        truth["accelerate_estimate_training_usage_float32"] = {p: estimate.estimate_training_usage(size, p)
                                                               for p in ("float32", "float16", "bfloat16")}
    doc["_training_float32"] = (f"accelerate_estimate_training_usage_float32 and accelerate_float32_total_size added by "
                                f"testdata/add_training_truth.py (transformers {transformers.__version__}, accelerate "
                                f"{accelerate.__version__}, torch {torch.__version__})")
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if folder == "hf523":  # as gen_hf.py writes it: lists of scalars on one line
        import sys
        sys.path.insert(0, here)
        from genlib import one_line_lists
        text = one_line_lists(text)
    open(path, "w").write(text)
    print(path)
