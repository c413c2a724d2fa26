#!/usr/bin/env python3
"""Lists the functions whose bodies are longer than a limit (default 80 lines), outside tests.

docs/contributing.md keeps functions at most 80 lines and lists the longer ones that remain,
each with its reason; this script finds them, so that list can be checked. It reads the code
itself (no build needed): comments, strings and character literals are blanked, then every
`{` that follows a parameter list `(...)` (and optional qualifiers or a constructor's
initializer list) and is not an if/for/while/switch/catch opens a function body, matched to
its `}`. Lambdas count towards the function they are written in; one at namespace scope (a
table row) is a function of its own. A heuristic: a macro or an unusual declaration may be
missed, never a false line count.

Usage: scripts/long-functions.py [--limit N] [PATH ...]   (default: every layer's folder, as
scripts/check-layers.sh lists them). Prints "path:line: name (N lines)", longest first. Exits 0: it is a report
(the tidy suite prints it), not a gate.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DIRS = ["base", "system", "model", "plugins", "plan", "jobs", "executors", "launcher",
                "probe"]
CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|return)\b")
QUALIFIERS = re.compile(r"(\s|const|override|final|noexcept|mutable|->\s*[\w:<>,*&\s]+)*$")


def blank_literals(text):
    """Comments, string and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(header):
    """The name before the header's first parameter list."""
    m = re.search(r"([~\w:]+(?:<[^()]*>)?|operator\s*\S+|\])\s*\(", header)
    return m.group(1) if m else "?"


def is_function_header(header):
    header = header.strip()
    if "(" not in header or CONTROL.match(header) or header.startswith("#"):
        return False
    if "=" in header.split("(", 1)[0] and not header.startswith("operator"):
        return "[" in header.split("(", 1)[0]  # `auto f = [](...) {`: a lambda
    stripped = QUALIFIERS.sub("", header)
    return stripped.endswith(")")


def long_functions(path, limit):
    text = blank_literals(path.read_text(encoding="utf-8", errors="replace"))
    found, depth, start, body_depth, header_start = [], 0, None, None, 0
    for i, c in enumerate(text):
        if c in ";{}" and start is None and c == "{":
            header = text[header_start:i]
            if is_function_header(header):
                start, body_depth = i, depth
                name = function_name(header)
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if start is not None and depth == body_depth:
                first = text.count("\n", 0, start) + 1
                last = text.count("\n", 0, i) + 1
                if last - first + 1 > limit:
                    found.append((last - first + 1, first, name))
                start = None
        if c in ";{}" and start is None:
            header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("paths", nargs="*", default=DEFAULT_DIRS)
    args = parser.parse_args()
    rows = []
    for p in args.paths:
        p = ROOT / p
        files = [p] if p.is_file() else sorted(p.rglob("*.cpp")) + sorted(p.rglob("*.h"))
        for f in files:
            for lines, line, name in long_functions(f, args.limit):
                rows.append((lines, f"{f.relative_to(ROOT)}:{line}: {name} ({lines} lines)"))
    for _, row in sorted(rows, key=lambda r: -r[0]):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
