#!/usr/bin/env python3
"""Tests man/md2man.py on pages that use every construct of the Markdown subset (docs/writing-docs.md).

Two manual pages are generated from a pages.txt with two PAGE blocks, formatted with `man --warnings
-l`, and the plain text must hold each construct rendered as expected (nested list items, a fence
inside a list item, table tags, a line that starts with a dot, backslashes, non-ASCII, a link's text
and an http link's address, a link into the other page as "in other(7)", a literal SEE ALSO, the
parts `| lead`, `| body` and `| intro`), with no warning and no line over 80 columns. Code wider than
the page is folded, and the folded console block reads back (tests/install/package_test.py's
unfold, which runs the installed examples) as the commands and output of the Markdown, with the
bundled files' paths as installed (testdata/X as examples/X). Constructs outside the subset (a block
quote, HTML, an unclosed fence or code span, a table row with too many cells) and a malformed
pages.txt must stop the generator with FILE:LINE.

  md2man_test.py --root DIR
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PAGE = r"""# A test page

```
tool run FILE [--alpha] [--beta N] [--gamma-option-with-a-long-name VALUE] [--delta] [--epsilon X]
```

Intro paragraph, printed under the section that replaces the title.

## Section one

A paragraph with `--code-span`, **bold text**, *italic text*, a [link to limits](limits.md#limits) and
an [outside link](https://example.org/x), a code span that goes on over
a line break: `one
two`, and a backslash \ and C:\path and ``a `tick` inside``.
.This line starts with a dot after wrapping, and so does the next one
'quoted, as does this one. Non-ASCII: café — 1 × 2 ≤ 3. See [the other section](other.md#other-part)
and [its page](other.md); the files are in `testdata/` of the source.

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
$ ckpt summary testdata/t113/x.pt
File:     testdata/t113/x.pt
$ ckpt summary --json testdata/t113/a_rather_long_name.pt | jq -r '.tensors[] | .name + " " + .dtype'
Format:   torch.save zip — prefix tied_weights/, pickle protocol 2, version 3, byteorder little, more
   | Name                   | dtype   | Shape   | Kind      | State        | Size  | Trainable | Tied to
---------------------------------------------------------------------------------------------------------
aVeryLongWordWithoutAnySpaceThatIsWiderThanTheWholePageOfTheManualAndMustBeCutSomewhereInTheMiddle
```

```sh
ckpt check models/ --fail-on warning --skip unknown-global   # a comment that makes the line too wide
```

## Section two

Text of the second section.
"""

OTHER = """# Other page

Intro of the other page.

## Other part

Text of the other part.
"""

PAGES = """# a test manual
PAGE ckpt 1 | a test
SYNOPSIS | docs/page.md | lead
TEST SECTION | docs/page.md | body
SEE ALSO | other(7), jq(1)

PAGE other 7 | the other page
DESCRIPTION | docs/other.md | intro
PART | docs/other.md#other-part
PART | docs/page.md#section-two
SEE ALSO | ckpt(1)
- | docs/unused.md
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
    "the other section in other(7)",
    "its page in other(7)",
    "the files are in testdata/ of the source",
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
    "$ ckpt summary examples/t113/x.pt",
    "File: examples/t113/x.pt",
    "# a comment that makes the line too wide",
    "ckpt check models/ --fail-on warning --skip unknown-global",
    "SEE ALSO other(7), jq(1)",
]

# What page.md's second console block reads as, unfolded by the installed-examples test.
CONSOLE = [
    ("ckpt summary examples/t113/x.pt", ["File:     examples/t113/x.pt"]),
    ("ckpt summary --json examples/t113/a_rather_long_name.pt | jq -r '.tensors[] | .name + \" \" + .dtype'", [
        "Format:   torch.save zip — prefix tied_weights/, pickle protocol 2, version 3, byteorder little, more",
        "   | Name                   | dtype   | Shape   | Kind      | State        | Size  | Trainable | Tied to",
        "-" * 69 + "[..]",
        "aVeryLongWordWithoutAnySpaceThatIsWiderThanTheWholePageOfTheManualAndMustBeCutSomewhereInTheMiddle"]),
]

OTHER_EXPECT = ["Intro of the other page", "Text of the other part", "Text of the second section",
                "SEE ALSO ckpt(1)"]

BAD = {
    "block quote": "# T\n\n> quoted\n",
    "HTML": "# T\n\n<div>x</div>\n",
    "unclosed fence": "# T\n\n```\ncode\n",
    "unclosed code span": "# T\n\nsome `code\n",
    "cells": "# T\n\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n",
    "two titles": "# T\n\n# U\n",
}

BAD_PAGES = {
    "a section before PAGE": "DESCRIPTION | docs/page.md\n",
    "an unknown part": "PAGE ckpt 1 | x\nDESCRIPTION | docs/page.md | middle\n",
    "a PAGE without a description": "PAGE ckpt 1\n",
}


def generate(md2man, tmp, text, pages="PAGE ckpt 1 | a test\nTEST SECTION | docs/page.md\n", other=OTHER):
    docs = os.path.join(tmp, "docs")
    os.makedirs(docs, exist_ok=True)
    os.makedirs(os.path.join(tmp, "man"), exist_ok=True)
    for name, content in (("page.md", text), ("other.md", other)):
        with open(os.path.join(docs, name), "w", encoding="utf-8") as f:
            f.write(content)
    path = os.path.join(tmp, "man", "pages.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(pages)
    out = os.path.join(tmp, "out")
    r = subprocess.run([sys.executable, md2man, "--pages", path, "--version", "0.0", "--out-dir", out,
                        "--examples-used", os.path.join(out, "used.txt")], capture_output=True, text=True)
    return r, out


def man(page, width, locale="C.UTF-8"):
    env = dict(os.environ, MANWIDTH=str(width), LC_ALL=locale)
    env.pop("MANPAGER", None)
    m = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, env=env)
    return m.stderr.decode("utf-8", "replace"), re.sub(r".\x08", "", m.stdout.decode("utf-8", "replace"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    root = os.path.abspath(ap.parse_args().root)
    md2man = os.path.join(root, "man", "md2man.py")
    sys.path.insert(0, os.path.join(root, "tests", "install"))
    import package_test
    failures = []
    text = ""
    with tempfile.TemporaryDirectory() as tmp:
        r, out = generate(md2man, tmp, PAGE, PAGES)
        if r.returncode != 0:
            failures.append(f"md2man failed on the subset pages: {r.stderr}")
        else:
            page, other = os.path.join(out, "ckpt.1"), os.path.join(out, "other.7")
            for f in (page, other):
                if not os.path.exists(f):
                    failures.append(f"md2man wrote no {os.path.basename(f)}")
            err, wide = man(page, 200)
            if err.strip():
                failures.append(f"man --warnings: {err.strip()}")
            err, text = man(page, 80)
            flat = re.sub(r"\s+", " ", wide)
            for want in EXPECT:
                if re.sub(r"\s+", " ", want) not in flat:
                    failures.append(f"not in the formatted page: {want!r}")
            if not re.search(r"TEST SECTION\s+Intro paragraph", wide) or "A test page" in wide:
                failures.append("the page's # title is not replaced by the section of pages.txt")
            if not re.search(r"SYNOPSIS\s+tool run FILE", wide) or re.search(r"TEST SECTION.*tool run", wide, re.S):
                failures.append("| lead / | body: the synopsis block is not in SYNOPSIS alone")
            for locale in ("C.UTF-8", "C"):
                for line in man(page, 80, locale)[1].split("\n"):
                    if len(line) > 80:
                        failures.append(f"a line over 80 columns (LC_ALL={locale}): {line!r}")
            _, other_text = man(other, 200)
            other_flat = re.sub(r"\s+", " ", other_text)
            for want in OTHER_EXPECT:
                if want not in other_flat:
                    failures.append(f"not in other(7): {want!r}")
            with open(page, encoding="utf-8") as f:
                roff = f.read()
            blocks = list(package_test.page_examples(roff))
            if len(blocks) != 1:
                failures.append(f"{len(blocks)} console blocks marked in the roff, not 1")
            else:
                got = [(c, e) for c, e in package_test.unfold(blocks[0][1])]
                if got != [(c, list(e)) for c, e in CONSOLE]:
                    failures.append(f"the folded console block reads back as {got!r}")
            used = open(os.path.join(out, "used.txt"), encoding="utf-8").read().split()
            if used != ["testdata/t113/a_rather_long_name.pt", "testdata/t113/x.pt"]:
                failures.append(f"--examples-used wrote {used}")
        for name, bad in BAD.items():
            r, _ = generate(md2man, tmp, bad)
            if r.returncode == 0 or not re.search(r"page\.md:\d+: ", r.stderr):
                failures.append(f"{name}: md2man did not stop with FILE:LINE (exit {r.returncode}, {r.stderr.strip()!r})")
        for name, bad in BAD_PAGES.items():
            r, _ = generate(md2man, tmp, PAGE, bad)
            if r.returncode == 0 or not re.search(r"pages\.txt:\d+: ", r.stderr):
                failures.append(f"{name}: md2man did not stop with pages.txt:LINE (exit {r.returncode}, {r.stderr.strip()!r})")
    for f in failures:
        print(f)
    if failures:
        print("--- formatted page (MANWIDTH=80) ---")
        print(text)
    print(f"{len(EXPECT) + len(OTHER_EXPECT)} renderings, {len(CONSOLE)} folded examples and "
          f"{len(BAD) + len(BAD_PAGES)} refusals checked; {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
