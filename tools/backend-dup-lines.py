#!/usr/bin/env python3
"""Count the code lines written identically in both store backends.

For every file name present in both src/store/sqlite/ and src/store/postgres/, the
distinct code lines of the SQLite file (trimmed; blank lines, comment lines,
`#[cfg(test)]` items and lines of punctuation only such as `}` or `});` left out)
that also occur in the PostgreSQL file of the same name. Prints the count per file
and the total.

    python3 tools/backend-dup-lines.py [--show] [REPO_ROOT]
"""
import os
import re
import sys


def code_lines(path):
    """The trimmed code lines of a Rust file: no blanks, no comments, no test items."""
    out = []
    skip_depth = None  # brace depth while inside a #[cfg(test)] item
    depth = 0
    pending_test = False
    in_block_comment = False
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if in_block_comment:
                if "*/" in line:
                    in_block_comment = False
                continue
            if line.startswith("/*"):
                if "*/" not in line:
                    in_block_comment = True
                continue
            if not line or line.startswith("//"):
                continue
            opens, closes = line.count("{"), line.count("}")
            if skip_depth is None and line.startswith("#[cfg(test)]"):
                pending_test = True
                continue
            if pending_test:
                # the item the attribute applies to: skip it whole
                if opens == 0 and line.endswith(";"):
                    pending_test = False
                    continue
                if opens > 0:
                    skip_depth = depth
                    pending_test = False
                depth += opens - closes
                if skip_depth is not None and depth <= skip_depth:
                    skip_depth = None
                continue
            depth += opens - closes
            if skip_depth is not None:
                if depth <= skip_depth:
                    skip_depth = None
                continue
            out.append(line)
    return out


WORD = re.compile(r"[A-Za-z0-9]")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = "--show" in sys.argv
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    a_dir = os.path.join(root, "src/store/sqlite")
    b_dir = os.path.join(root, "src/store/postgres")
    total = 0
    for name in sorted(set(os.listdir(a_dir)) & set(os.listdir(b_dir))):
        if not name.endswith(".rs"):
            continue
        a = dict.fromkeys(l for l in code_lines(os.path.join(a_dir, name)) if WORD.search(l))
        b = set(code_lines(os.path.join(b_dir, name)))
        same = [line for line in a if line in b]
        total += len(same)
        print(f"{len(same):5}  {name}")
        if show:
            for line in same:
                print(f"         {line}")
    print(f"{total:5}  total")


if __name__ == "__main__":
    main()
