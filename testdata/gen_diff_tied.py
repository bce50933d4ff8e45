#!/usr/bin/env python3
"""Write testdata/diff_tied/: one GPT-2 with tied embeddings, saved as transformers' pytorch_model.bin files
were (torch.save of model.state_dict(): lm_head.weight and transformer.wte.weight on one storage), and
the same model untied (lm_head.weight a copy with the same values), for `ckpt diff` (issue 41: a tie
added or removed is a difference, though every key, shape and value agrees).

Run with the truth environment's python (scripts/truth-env.sh):

    build-venv/truth/bin/python testdata/gen_diff_tied.py [OUTDIR]

Writes tied.pt, untied.pt and truth.json: per file the number of parameters transformers counts
(num_parameters) and, for lm_head.weight, whether it is transformer.wte.weight's storage.
"""
import json
import os
import sys

import torch
import transformers

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "diff_tied")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
cfg = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=200, n_positions=16, tie_word_embeddings=True)
tied = transformers.GPT2LMHeadModel(cfg).eval()
untied_cfg = transformers.GPT2Config(**{**cfg.to_dict(), "tie_word_embeddings": False})
untied = transformers.GPT2LMHeadModel(untied_cfg).eval()
untied.load_state_dict(tied.state_dict())  # the same values, lm_head its own parameter
truth = {}
for name, model in (("tied.pt", tied), ("untied.pt", untied)):
    sd = model.state_dict()
    torch.save(sd, os.path.join(out, name))
    back = torch.load(os.path.join(out, name))
    shared = back["lm_head.weight"].untyped_storage().data_ptr() == back["transformer.wte.weight"].untyped_storage().data_ptr()
    assert torch.equal(back["lm_head.weight"], back["transformer.wte.weight"])
    truth[name] = {"num_parameters": model.num_parameters(), "lm_head_is_wte_storage": shared,
                   "keys": len(back)}
assert truth["tied.pt"]["lm_head_is_wte_storage"] and not truth["untied.pt"]["lm_head_is_wte_storage"]
truth["_producer"] = {"torch": torch.__version__, "transformers": transformers.__version__}
json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=1)
print(truth)
