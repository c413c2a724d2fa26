#!/usr/bin/env python3
"""Runs clang-tidy on sources, skipping each one whose clean result is already known.

clang-tidy takes 10 to 30 s a file on these 2-core machines and has no cache of its own, so
a full run cost CI about a quarter of an hour even when nothing had changed. A clean result
is remembered under a key made of everything the result depends on: the source as clang's
preprocessor expands it (every header it includes, with this checkout's path taken out so
that another clone shares the entry), the compile flags, .clang-tidy and the clang-tidy
version. A file with findings is never cached: it is checked again every time.

Usage: clang-tidy-cached.py BUILD_DIR FILE...   (prints the findings; exit 1 if any)
Environment: TIDY_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/bridge-launch/clang-tidy),
TIDY_JOBS (default 2).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    if os.environ.get("TIDY_CACHE_DIR"):
        return Path(os.environ["TIDY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "bridge-launch" / "clang-tidy"


def preprocess_args(entry: dict) -> list[str]:
    """The entry's compile command, as clang++ preprocessing to stdout."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = ["clang++"], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-fdebug-prefix-map="):
            continue
        out.append(a)
    return out + ["-E", "-w"]


def key_for(entry: dict, salt: bytes) -> str | None:
    proc = subprocess.run(preprocess_args(entry), cwd=entry["directory"], capture_output=True)
    if proc.returncode != 0:
        return None  # no key: the file is checked
    root = str(ROOT).encode()
    h = hashlib.sha256(salt)
    h.update(proc.stdout.replace(root + b"/", b"").replace(root, b"."))
    flags = " ".join(preprocess_args(entry)).replace(str(ROOT), ".")
    flags = re.sub(r"\S*/build[^ ]*", "", flags)  # the build dir's own paths
    h.update(flags.encode())
    return h.hexdigest()


def check(entry: dict, build_dir: str, salt: bytes, cache: Path) -> tuple[str, str, bool]:
    path = entry["file"]
    key = key_for(entry, salt)
    if key and (cache / key).exists():
        return path, "", True
    proc = subprocess.run(["clang-tidy", "-p", build_dir, "--quiet", path],
                          capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    clean = proc.returncode == 0 and not re.search(r"(warning|error):", text)
    if clean and key:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / key).touch()
    return path, "" if clean else text, False


def main() -> int:
    build_dir, files = sys.argv[1], sys.argv[2:]
    entries = {str(Path(e["file"]).resolve()): e
               for e in json.loads((Path(build_dir) / "compile_commands.json").read_text())}
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout
    salt = version + (ROOT / ".clang-tidy").read_bytes()
    cache = cache_dir()
    jobs, missing = [], []
    for f in files:
        entry = entries.get(str((ROOT / f).resolve()))
        (jobs if entry else missing).append(entry or f)
    for f in missing:
        print(f"clang-tidy: {f} is not in {build_dir}/compile_commands.json")
    findings = cached = 0
    workers = int(os.environ.get("TIDY_JOBS", "2"))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for path, text, hit in pool.map(lambda e: check(e, build_dir, salt, cache), jobs):
            cached += hit
            if text:
                findings += 1
                print(text, end="" if text.endswith("\n") else "\n")
    print(f"clang-tidy: {len(jobs)} sources, {cached} known clean from the cache, "
          f"{findings} with findings")
    return 1 if findings or missing else 0


if __name__ == "__main__":
    sys.exit(main())
