#!/usr/bin/env python3
"""Tests man/md2man.py on a page that uses every construct of the Markdown subset (docs/writing-docs.md).

The page is converted, formatted with `man --warnings -l`, and the plain text must hold each construct
rendered as expected (nested list items, a fence inside a list item, table tags, a line that starts with
a dot, backslashes, non-ASCII, a link's text and an http link's address), with no warning. Constructs
outside the subset (a block quote, HTML, an unclosed fence or code span, a table row with too many cells)
must stop the generator with FILE:LINE.

  md2man_test.py --root DIR
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PAGE = r"""# A test page

Intro paragraph, printed under the section that replaces the title.

## Section one

A paragraph with `--code-span`, **bold text**, *italic text*, a [link to limits](limits.md#limits) and
an [outside link](https://example.org/x), a code span that goes on over
a line break: `one
two`, and a backslash \ and C:\path and ``a `tick` inside``.
.This line starts with a dot after wrapping, and so does the next one
'quoted, as does this one. Non-ASCII: café — 1 × 2 ≤ 3.

- first item, which goes on
  over two lines
  - nested item
  - second nested item, then a fence inside the item:

    ```sh
    .starts with a dot \n backslash
    ```
- back to the first level
1. numbered item

| option | meaning |
|---|---|
| `--alpha` | the first option, with a \| pipe |
| `--beta N` | the second |

| id | severity | fix |
|---|---|---|
| `rule-a` | warning | strip it |

### A third-level heading

```console
$ ckpt summary x.pt
File:     x.pt
```
"""

EXPECT = [
    "Section one",
    "--code-span",
    "link to limits",
    "outside link <https://example.org/x>",
    "one two",
    "a backslash \\ and C:\\path",
    "a `tick` inside",
    ".This line starts with a dot",
    "'quoted, as does this one",
    "café — 1 × 2 ≤ 3",
    "• first item, which goes on over two lines",
    "• nested item",
    ".starts with a dot \\n backslash",
    "• back to the first level",
    "1. numbered item",
    "--alpha",
    "the first option, with a | pipe",
    "severity: warning",
    "fix: strip it",
    "A third-level heading",
    "$ ckpt summary x.pt",
    "File:     x.pt",
]

BAD = {
    "block quote": "# T\n\n> quoted\n",
    "HTML": "# T\n\n<div>x</div>\n",
    "unclosed fence": "# T\n\n```\ncode\n",
    "unclosed code span": "# T\n\nsome `code\n",
    "cells": "# T\n\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n",
    "two titles": "# T\n\n# U\n",
}


def generate(md2man, tmp, text):
    docs = os.path.join(tmp, "docs")
    os.makedirs(docs, exist_ok=True)
    os.makedirs(os.path.join(tmp, "man"), exist_ok=True)
    with open(os.path.join(docs, "page.md"), "w", encoding="utf-8") as f:
        f.write(text)
    pages = os.path.join(tmp, "man", "pages.txt")
    with open(pages, "w", encoding="utf-8") as f:
        f.write("NAME | ckpt - a test\nTEST SECTION | docs/page.md\n")
    out = os.path.join(tmp, "ckpt.1")
    r = subprocess.run([sys.executable, md2man, "--pages", pages, "--version", "0.0", "--out", out],
                       capture_output=True, text=True)
    return r, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    md2man = os.path.join(os.path.abspath(ap.parse_args().root), "man", "md2man.py")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        r, out = generate(md2man, tmp, PAGE)
        if r.returncode != 0:
            failures.append(f"md2man failed on the subset page: {r.stderr}")
        else:
            env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8")
            m = subprocess.run(["man", "--warnings", "-l", out], capture_output=True, text=True, env=env)
            if m.stderr.strip():
                failures.append(f"man --warnings: {m.stderr.strip()}")
            text = re.sub(r".\x08", "", m.stdout)
            flat = re.sub(r"\s+", " ", text)
            for want in EXPECT:
                if re.sub(r"\s+", " ", want) not in flat:
                    failures.append(f"not in the formatted page: {want!r}")
            if not re.search(r"TEST SECTION\s+Intro paragraph", text) or "A test page" in text:
                failures.append("the page's # title is not replaced by the section of pages.txt")
        for name, bad in BAD.items():
            r, _ = generate(md2man, tmp, bad)
            if r.returncode == 0 or not re.search(r"page\.md:\d+: ", r.stderr):
                failures.append(f"{name}: md2man did not stop with FILE:LINE (exit {r.returncode}, {r.stderr.strip()!r})")
    for f in failures:
        print(f)
    if failures:
        print("--- formatted page ---")
        print(text if "text" in locals() else "")
    print(f"{len(EXPECT)} renderings and {len(BAD)} refusals checked; {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
