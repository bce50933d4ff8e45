#!/usr/bin/env python3
"""Writes testdata/trainer/checkpoint-2/: the folder transformers' Trainer saves at a checkpoint step, made by
the real Trainer (two steps of a tiny BERT classifier on the CPU): config.json, model.safetensors,
optimizer.pt, scheduler.pt, rng_state.pth, training_args.bin, trainer_state.json. `ckpt check` of the
folder scans the pickles beside the weights (docs/security.md, "Model folders"); tests/test_side_files.cc
copies the folder and puts hand-written malicious pickles in place of each of them.

Run with the truth environment's python (scripts/truth-env.sh prints it; torch 2.15, transformers 5.23):

    "$(scripts/truth-env.sh --print)" testdata/gen_trainer.py            # rewrites testdata/trainer (~15 s)
    "$(scripts/truth-env.sh --print)" testdata/gen_trainer.py /tmp/tr    # or somewhere else
"""

import os
import shutil
import sys
import tempfile

os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["WANDB_DISABLED"] = "true"

import torch  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 64, (8,), generator=g), "labels": torch.tensor(i % 2)}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainer")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(cfg)
    with tempfile.TemporaryDirectory() as run:
        args = TrainingArguments(output_dir=run, per_device_train_batch_size=4, max_steps=2, save_steps=2, save_strategy="steps",
                                 report_to=[], logging_strategy="no", use_cpu=True, seed=0, data_seed=0, disable_tqdm=True)
        Trainer(model=model, args=args, train_dataset=Tokens()).train()
        dst = os.path.join(out, "checkpoint-2")
        shutil.rmtree(dst, ignore_errors=True)
        os.makedirs(out, exist_ok=True)
        shutil.copytree(os.path.join(run, "checkpoint-2"), dst)
    for f in sorted(os.listdir(dst)):
        print(f"{f}: {os.path.getsize(os.path.join(dst, f))} bytes")


if __name__ == "__main__":
    main()
