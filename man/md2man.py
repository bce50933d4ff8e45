#!/usr/bin/env python3
"""Generates ckpt's manual pages from the Markdown reference in docs/, so that the two cannot drift.

The build runs it (cmake/Packaging.cmake); man/pages.txt says which pages there are (ckpt(1), the
summary page, and one page per command and per topic) and which docs page becomes which section of
each, in order. It accepts only the Markdown subset that docs/writing-docs.md defines, and stops with
FILE:LINE on anything else, so a construct it would render wrongly fails the build instead.

What the Markdown does not say, it adds: code lines wider than the page (80 columns) are folded
(docs/writing-docs.md, "The manual pages"), the bundled example files are named by their installed
path (examples/... under PREFIX/share/ckpt, as man/examples.txt installs them), and a link into a
docs page that went to another manual page names that page: "Limits in ckpt-limits(7)".

  md2man.py --pages man/pages.txt --version 0.1.0 --out-dir build/man    # writes every page
  md2man.py --pages man/pages.txt --list                                 # NAME SECTION per line
"""
import argparse
import os
import re
import sys

FENCE = re.compile(r"^( *)(`{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6}) (.*)$")
ITEM = re.compile(r"^( *)(?:[-*]|(\d+)\.) (.*)$")
TABLE_SEP = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
SOURCE = re.compile(r"^(\S+\.md)(?:#(\S+))?$")
PARTS = ("lead", "body", "intro")
MANREF = re.compile(r"\b([a-z][\w.+-]*)\((\d)\)")

# The rendered page: man-db's MANWIDTH=80 gives 80 columns, of which the body's indent (.TH's default
# 7n) and a code block's .RS 4 take 11.
PAGE_WIDTH = 80
BODY_INDENT = 7
CODE_INDENT = 4

# Example files are named as they are installed: testdata/X and tests/cli/data/X are both
# PREFIX/share/ckpt/examples/X, named examples/X in the pages (they run from PREFIX/share/ckpt).
EXAMPLE_PATHS = re.compile(r"(?<![\w/.-])(?:testdata|tests/cli/data)/")
EXAMPLES = "examples/"
USED_PATH = re.compile(r"(?<![\w/.-])(?:testdata|tests/cli/data)/[^\s'\"`|<>()\\]*")
USED = set()  # the example paths that the pages name, as they are in the source tree

# Set per page while rendering: the page being written, and where each docs section went.
CURRENT = {"page": None, "where": None, "doc": "", "section": None}


class DocError(Exception):
    pass


def escape(text):
    """Roff-escapes plain text: backslashes, and every non-ASCII character as a named glyph."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\e")
        elif ord(ch) > 127:
            out.append("\\[u%04X]" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def manref(text):
    """Plain text with each name(N) in bold, as man pages write references."""
    return MANREF.sub(lambda m: "\\fB" + m.group(1).replace("-", "\\-") + "\\fR(" + m.group(2) + ")", escape(text))


def link_suffix(label, target):
    """' in ckpt-limits(7)' for a link into a docs page that went to another manual page."""
    where = CURRENT["where"]
    if where is None or not target or re.match(r"[a-z]+:", target):
        return ""
    file, _, anchor = target.partition("#")
    page = where(os.path.basename(file or CURRENT["doc"]), anchor)
    if page is None or page == CURRENT["page"]:
        return ""
    ref = f"{page[0]}({page[1]})"
    if ref in label:
        return ""
    return " in \\fB" + page[0].replace("-", "\\-") + "\\fR(" + page[1] + ")"


def inline(text):
    """Renders the inline subset: `code`, **bold**, *italic*, [text](target), and \\-escapes."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\`*_[]()|#<>!-.":
            out.append(escape(text[i + 1]))
            i += 2
        elif c == "`":
            n = len(text[i:]) - len(text[i:].lstrip("`"))
            ticks = text[i:i + n]
            end = text.find(ticks, i + n)
            if end < 0:
                raise DocError("unclosed code span")
            code = text[i + n:end].replace("\n", " ")
            if n > 1:
                code = code.strip()
            # Code is bold, as options are in man pages; \- so that options copy as ASCII hyphens.
            out.append("\\fB" + escape(code).replace("-", "\\-") + "\\fR")
            i = end + n
        elif text.startswith("**", i):
            end = text.find("**", i + 2)
            if end < 0:
                raise DocError("unclosed **")
            out.append("\\fB" + inline(text[i + 2:end]).replace("\\fR", "\\fB") + "\\fR")
            i = end + 2
        elif c == "*" and i + 1 < len(text) and text[i + 1] not in " *\n" and (i == 0 or not text[i - 1].isalnum()):
            end = text.find("*", i + 1)
            if end < 0:
                out.append("*")
                i += 1
                continue
            out.append("\\fI" + inline(text[i + 1:end]).replace("\\fR", "\\fI") + "\\fR")
            i = end + 1
        elif c == "[":
            m = re.match(r"\[((?:[^\]`]|`[^`]*`)*)\]\(([^)\s]*)\)", text[i:])
            if not m:
                out.append("[")
                i += 1
                continue
            label, target = m.group(1), m.group(2)
            out.append(inline(label))
            if re.match(r"https?://", target) and label != target:
                out.append(" <" + escape(target) + ">")
            else:
                out.append(link_suffix(label, target))
            i += m.end()
        else:
            out.append(escape(c))
            i += 1
    return "".join(out)


def text_lines(lines):
    """Inline-rendered lines for fill mode: no leading blanks, and no line starting as a request."""
    out = []
    # Inline spans may go on over a line break, so the paragraph is rendered as one text.
    for r in inline("\n".join(line.strip() for line in lines)).split("\n"):
        r = r.lstrip()
        if r.startswith((".", "'")):
            r = "\\&" + r
        out.append(r)
    return out


def char_width(ch):
    """Columns for CH, counted wide enough for either terminal: a non-ASCII character takes two,
    as a wide character does in UTF-8 and as groff's ASCII stand-ins mostly do (an em dash is --)."""
    return 1 if ord(ch) < 128 else 2


def width(text):
    """Columns that TEXT takes, at most."""
    return sum(char_width(ch) for ch in text)


def cut(text, cols):
    """The longest prefix of TEXT that fits in COLS columns."""
    n = 0
    for k, ch in enumerate(text):
        n += char_width(ch)
        if n > cols:
            return k
    return len(text)


def breaks(line, kind, max_depth=0):
    """Where LINE may be folded: the index just after a run of spaces (so that a folded line keeps
    its spaces and the next one starts at a word). Shell lines break only outside quotes; a
    synopsis also only outside [brackets], or at most MAX_DEPTH of them deep."""
    out = []
    quote = None
    depth = 0
    if kind == "command":
        # Not inside a comment: the shell would not go on after a \ there.
        c = shell_comment(line)
        line = line if c < 0 else line[:c]
    for k, ch in enumerate(line):
        if kind in ("shell", "command", "synopsis"):
            if quote:
                if ch == quote:
                    quote = None
                continue
            if ch in "'\"":
                quote = ch
                continue
        if kind == "synopsis":
            depth += (ch == "[") - (ch == "]")
        if ch == " " and k + 1 < len(line) and line[k + 1] != " " and depth <= max_depth and line[:k].strip():
            out.append(k + 1)
    return out


def shell_comment(line):
    """The index of the # that starts a comment of a shell line, or -1."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1] in " \t"):
            return k
    return -1


def fold(line, cols, kind):
    """LINE as lines of at most COLS columns (docs/writing-docs.md, "The manual pages").

    kind "command" (a console example's command): folded at spaces outside quotes and before any
    comment, each folded line ending in " \\" as the shell continues it, the rest indented 4 more.
    kind "shell" (a line of a shell or YAML block): the same, and a comment that does not fit goes on
    lines of its own above. kind "synopsis": folded outside [brackets], the rest under the command's first
    argument. kind "output": folded after a space (or anywhere, when a word is wider than the page),
    the folded line ending in "\\"; its rest, indented 2 more, joins it without its leading spaces.
    A rule (a line of one repeated character such as ----) is cut to the width."""
    if width(line) <= cols:
        return [line]
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if re.fullmatch(r"([-=_~\u2500\u2501])\1{7,}", body.rstrip()):
        return [line[:cut(line, cols)]]
    if kind == "shell":
        c = shell_comment(line)
        if c > indent:
            words = line[c + 1:].split()
            out, cur = [], " " * indent + "#"
            for w in words:
                if width(cur) + 1 + width(w) > cols and cur.strip() != "#":
                    out.append(cur)
                    cur = " " * indent + "#"
                cur += " " + w
            return out + [cur] + fold(line[:c].rstrip(), cols, kind)
    if kind == "synopsis":
        m = re.match(r"(\S+ \S+ )", line)
        rest = len(m.group(1)) if m and width(m.group(1)) < cols // 2 else indent if indent else 4
        mark, rest_indent = "", rest
    elif kind in ("shell", "command"):
        mark, rest_indent = "\\", indent + 4
    else:
        mark, rest_indent = "\\", indent + 2
    out = []
    while width(line) > cols:
        room = cols - width(mark)
        fit = [k for k in breaks(line, kind) if width(line[:k]) <= room and k > rest_indent]
        for depth in range(1, 4 if kind == "synopsis" else 1):
            # Inside the fewest [brackets] it can.
            fit = fit or [k for k in breaks(line, kind, depth) if width(line[:k]) <= room and k > rest_indent]
        if not fit and kind == "synopsis":
            fit = [k for k in breaks(line, "output") if width(line[:k]) <= room and k > rest_indent]
        later = [k for k in breaks(line, kind) if k > rest_indent]
        if fit:
            k = fit[-1]
        elif kind in ("output", "synopsis") or not later:
            if kind != "output":
                break  # a command cannot be cut inside a word: it stays wide, and the test says so
            k = max(cut(line, room), rest_indent + 1)
        else:
            # A word wider than the page: the line stays wide up to the next place it may break.
            k = later[0]
        out.append(line[:k] + mark)
        line = " " * rest_indent + line[k:].lstrip(" ")
    return out + [line]


def code_block(lines, indent, info, depth):
    """A fenced block, as-is text; folded to the page's width, example paths as installed.
    depth: the list nesting the block is in (0: none). A console block is marked with a comment
    (`.\\" console MARKERS`), so that a test can find its commands in the installed page."""
    words = info.split()
    lang = words[0] if words else ""
    if depth:
        cols = PAGE_WIDTH - BODY_INDENT - 2 * depth - 2
        out = [".PP", ".RS 2"]
    elif CURRENT.get("section") == "SYNOPSIS":
        # A synopsis starts at the body's indent, as man pages print it.
        cols = PAGE_WIDTH - BODY_INDENT
        out = [".PP", ".RS 0"]
    else:
        cols = PAGE_WIDTH - BODY_INDENT - CODE_INDENT
        out = [".PP", ".RS %d" % CODE_INDENT]
    if lang == "console":
        out.insert(0, '.\\" ' + " ".join(words))
    out.append(".nf")
    continued = False
    for line in lines:
        line = line[indent:] if line[:indent].strip() == "" else line.lstrip()
        for m in USED_PATH.finditer(line):
            USED.add(m.group(0).rstrip(".:,;"))
        line = EXAMPLE_PATHS.sub(EXAMPLES, line.rstrip())
        if lang == "console":
            kind = "command" if line.startswith("$ ") or continued else "output"
            continued = kind == "command" and line.endswith("\\")
        elif lang in ("sh", "bash", "shell", "yaml", "yml"):
            kind = "shell"
        elif lang == "":
            kind = "synopsis"
        else:
            kind = "output"
        for r in fold(line, cols, kind):
            r = escape(r).replace("-", "\\-")
            if r.startswith((".", "'")):
                r = "\\&" + r
            out.append(r)
    out += [".fi", ".RE"]
    return out


def split_row(line):
    cells, cur, i = [], "", 0
    line = line.strip()[1:]
    code = False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        cells.append(cur.strip())
    return cells


def table(rows):
    """A table as tagged paragraphs: the first cell is the tag, the other cells its body."""
    header = split_row(rows[0])
    out = []
    for row in rows[2:]:
        cells = split_row(row)
        if len(cells) != len(header):
            raise DocError(f"a table row has {len(cells)} cells, its header {len(header)}")
        out += [".TP", inline(cells[0])]
        if len(cells) == 2:
            out += text_lines([cells[1]])
        else:
            for k, (h, c) in enumerate(zip(header[1:], cells[1:])):
                if k:
                    out.append(".br")
                out += text_lines([f"*{h}*: {c}" if c else f"*{h}*: \u2014"])
    return out


def heading(level, title, base):
    """base: the Markdown level that becomes .SH; one below it .SS; deeper, a bold paragraph."""
    text = inline(title)
    if level == base:
        return [".SH " + '"' + text.upper().replace('"', '\\(dq') + '"']
    if level == base + 1:
        return [".SS " + '"' + text.replace('"', '\\(dq') + '"']
    return [".PP", "\\fB" + text.replace("\\fR", "\\fB") + "\\fR"]


def slug(title):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def outline(lines):
    """(line index, level, title) of each heading outside code blocks."""
    fence = None
    out = []
    for n, line in enumerate(lines):
        m = FENCE.match(line)
        if m and (fence is None or line.strip() == fence):
            fence = None if fence else m.group(2)
            continue
        h = not fence and HEADING.match(line)
        if h:
            out.append((n, len(h.group(1)), h.group(2)))
    return out


def one_section(path, lines, anchor):
    """The page's # title and the ## section whose anchor is given, without its ## line."""
    start = end = None
    for n, level, title in outline(lines):
        if level <= 2:
            if start is not None and end is None:
                end = n
            if level == 2 and slug(title) == anchor:
                start = n + 1
    if start is None:
        raise SystemExit(f"{path}: no ## section with the anchor #{anchor}")
    return ["# (section)"] + lines[start:end]


def lead_block(path, lines, keep):
    """keep: only the code block that comes first after the page's # title (a command's synopsis);
    otherwise the page without it."""
    i = 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    m = FENCE.match(lines[i]) if i < len(lines) else None
    if not lines[0].startswith("# ") or not m:
        raise SystemExit(f"{path}:{i + 1}: the page does not start with a code block after its # title")
    j = i + 1
    while j < len(lines) and lines[j].strip() != m.group(2):
        j += 1
    if keep:
        return ["# (synopsis)"] + lines[i:j + 1]
    return lines[:i] + lines[j + 1:]


def intro(lines):
    """The page's # title and the text before its first ## section."""
    end = next((n for n, level, _ in outline(lines) if level == 2), len(lines))
    return lines[:end]


def render(path, base, drop_title, part=None):
    """Renders one docs page, or with PATH#anchor one ## section of it. drop_title: the page's #
    title is not printed (its section is). part: "lead" (only the leading code block), "body" (the
    page without it) or "intro" (the text before the first ## section)."""
    path, _, anchor = path.partition("#")
    CURRENT["doc"] = path
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if anchor:
        lines = one_section(path, lines, anchor)
    if part == "intro":
        lines = intro(lines)
    elif part:
        lines = lead_block(path, lines, part == "lead")
    out = []
    i = 0
    list_depth = []  # indents of the open list levels
    seen_title = False

    def close_lists(to=0):
        while len(list_depth) > to:
            list_depth.pop()
            if list_depth:
                out.append(".RE")

    try:
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            m = FENCE.match(line)
            if m:
                indent, fence = len(m.group(1)), m.group(2)
                j = i + 1
                while j < len(lines) and lines[j].strip() != fence:
                    j += 1
                if j == len(lines):
                    raise DocError("unclosed code fence")
                if not (indent and list_depth):
                    close_lists()
                out += code_block(lines[i + 1:j], indent, m.group(3).strip(), len(list_depth))
                i = j + 1
                continue
            m = HEADING.match(line)
            if m:
                close_lists()
                level = len(m.group(1))
                if level == 1:
                    if seen_title:
                        raise DocError("a page has one # title")
                    seen_title = True
                    if not drop_title:
                        out += heading(level, m.group(2), base)
                else:
                    out += heading(level, m.group(2), base)
                i += 1
                continue
            if not seen_title:
                raise DocError("a page starts with its # title")
            if line.startswith("|"):
                close_lists()
                j = i
                while j < len(lines) and lines[j].startswith("|"):
                    j += 1
                if j - i < 2 or not TABLE_SEP.match(lines[i + 1]):
                    raise DocError("a table needs a header row and a |---| row")
                out += table(lines[i:j])
                i = j
                continue
            m = ITEM.match(line)
            if m:
                indent = len(m.group(1))
                while list_depth and indent < list_depth[-1]:
                    close_lists(len(list_depth) - 1)
                if not list_depth or indent > list_depth[-1]:
                    if list_depth:
                        out.append(".RS")
                    list_depth.append(indent)
                bullet = (m.group(2) + ".") if m.group(2) else "\\(bu"
                para = [m.group(3)]
                j = i + 1
                cont = indent + 2
                while j < len(lines) and lines[j].strip() and lines[j].startswith(" " * cont) \
                        and not ITEM.match(lines[j]) and not FENCE.match(lines[j]):
                    para.append(lines[j])
                    j += 1
                out += [".IP " + bullet + " " + ("4" if m.group(2) else "2")] + text_lines(para)
                i = j
                continue
            if line.startswith(("<", ">")):
                raise DocError("HTML and block quotes are outside the subset")
            if line.startswith(" ") and list_depth:
                # A further paragraph of the open list item.
                j = i
                while j < len(lines) and lines[j].strip() and not ITEM.match(lines[j]) \
                        and not FENCE.match(lines[j]):
                    j += 1
                out += [".IP \"\" 2"] + text_lines(lines[i:j])
                i = j
                continue
            close_lists()
            j = i
            while j < len(lines) and lines[j].strip() and not HEADING.match(lines[j]) \
                    and not FENCE.match(lines[j]) and not lines[j].startswith("|") and not ITEM.match(lines[j]):
                j += 1
            out += [".PP"] + text_lines(lines[i:j])
            i = j
        close_lists()
    except DocError as e:
        raise SystemExit(f"{path}:{i + 1}: {e}")
    return out


def read_pages(path):
    """man/pages.txt as a list of pages: {name, section, description, entries: [(SECTION, source,
    part, line)]}, and the docs pages left out of the manual on purpose."""
    pages, left_out = [], []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            raw = raw.strip()
            if not raw or raw.startswith("#"):
                continue
            fields = [p.strip() for p in raw.split("|")]
            m = re.match(r"^PAGE\s+(\S+)\s+(\d\w*)$", fields[0])
            if m:
                if len(fields) != 2 or not fields[1]:
                    raise SystemExit(f"{path}:{n}: PAGE NAME SECTION | description")
                pages.append({"name": m.group(1), "section": m.group(2), "description": fields[1],
                              "entries": []})
                continue
            if fields[0] == "-":
                left_out += fields[1].split()
                continue
            if not pages:
                raise SystemExit(f"{path}:{n}: a section before the first PAGE line")
            if len(fields) not in (2, 3) or len(fields) == 3 and fields[2] not in PARTS:
                raise SystemExit(f"{path}:{n}: SECTION | source [| lead|body|intro]")
            pages[-1]["entries"].append((fields[0], fields[1], fields[2] if len(fields) == 3 else None, n))
    return pages, left_out


def placement(root, pages):
    """A function (docs file name, anchor) -> (page name, section) of the manual page that holds
    that part of the docs, or None."""
    whole, parts = {}, {}
    for p in pages:
        for _, source, _, _ in p["entries"]:
            m = SOURCE.match(source)
            if not m:
                continue
            name = os.path.basename(m.group(1))
            key = (p["name"], p["section"])
            if m.group(2):
                parts.setdefault((name, m.group(2)), key)
            else:
                whole.setdefault(name, key)
    sections = {}

    def where(name, anchor):
        if name not in sections:
            sections[name] = {}
            path = os.path.join(root, "docs", name)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    top = None
                    for _, level, title in outline(f.read().split("\n")):
                        if level == 2:
                            top = slug(title)
                        if level >= 2:
                            sections[name][slug(title)] = top
        if anchor:
            top = sections[name].get(anchor)
            if (name, top) in parts:
                return parts[(name, top)]
        if name in whole:
            return whole[name]
        return next((v for (n, _), v in parts.items() if n == name), None)

    return where


def generate(root, page, version, where):
    name, section = page["name"], page["section"]
    CURRENT.update(page=(name, section), where=where)
    out = ['.\\" Generated by man/md2man.py from docs/*.md (pages and order: man/pages.txt); edit those, not this.',
           f'.TH {name.upper()} {section} "" "ckpt {version}" "ckpt Manual"', ".nh", ".ad l",
           # An ASCII terminal has no ellipsis glyph: three dots instead, not nothing.
           ".if !c\\[u2026] .char \\[u2026] ...",
           ".SH NAME", escape(name).replace("-", "\\-") + " \\- " + escape(page["description"])]
    for title, source, part, n in page["entries"]:
        # A section named as the one before it goes on under the same heading.
        last = next((l[5:].strip('"') for l in reversed(out) if l.startswith(".SH ")), None)
        same = title.upper() == last
        CURRENT["section"] = title.upper() if title != "*" and not title.startswith("+") else None
        m = SOURCE.match(source)
        if not m:
            # Literal text (a SEE ALSO list), with name(N) references in bold.
            if not same:
                out += heading(1, title, 1)
            out += [".PP", manref(source)]
        elif title == "*":
            # The page's ## headings are the sections; its # title and intro are not printed.
            out += render(os.path.join(root, source), 2, drop_title=True, part=part)
        elif title.startswith("+"):
            # A subsection of the last section: the page's # title becomes .SS.
            out += render(os.path.join(root, source), 0, drop_title=False, part=part)
        else:
            if not same:
                out += heading(1, title, 1)
            out += render(os.path.join(root, source), 1, drop_title=True, part=part)
    text = "\n".join(out) + "\n"
    text = re.sub(r"(?m)^\.PP\n(\.(?:PP|SH|SS|TP|IP).*)$", r"\1", text)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", required=True, help="man/pages.txt")
    ap.add_argument("--version", default="0")
    ap.add_argument("--out-dir", help="where NAME.SECTION files are written")
    ap.add_argument("--list", action="store_true", help="print NAME SECTION of each page, and exit")
    ap.add_argument("--examples-used", metavar="FILE",
                    help="write the source-tree paths of the example files the pages name, one a line")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(args.pages)))
    pages, _ = read_pages(args.pages)
    if args.list:
        for p in pages:
            print(p["name"], p["section"])
        return
    if not args.out_dir:
        ap.error("--out-dir is required")
    where = placement(root, pages)
    os.makedirs(args.out_dir, exist_ok=True)
    for p in pages:
        text = generate(root, p, args.version, where)
        with open(os.path.join(args.out_dir, f"{p['name']}.{p['section']}"), "w", encoding="utf-8") as f:
            f.write(text)
    if args.examples_used:
        with open(args.examples_used, "w", encoding="utf-8") as f:
            f.writelines(p + "\n" for p in sorted(USED))


if __name__ == "__main__":
    main()
