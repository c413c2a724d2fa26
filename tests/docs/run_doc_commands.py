#!/usr/bin/env python3
"""Runs every command shown in README.md and docs/ and fails when the docs drift from the tool.

Usage: run_doc_commands.py [--source DIR] [--build-dir DIR] [--only PAGE] [--keep]
(CTest runs it as `doc_commands`, label `integration`; docs/contributing.md, "Commands in the
docs", is the reader's version of this text.)

What it reads: the code blocks of README.md, docs/**/*.md and the EXAMPLES of docs/man/*.1:
fenced blocks without a language or with sh/shell/bash/console, and indented blocks. A command
is a line that starts with `bridge-launch`, `build/bridge-launch`, `./build/bridge-launch`,
`source <(bridge-launch`, `make`, `cmake` or a repository script (`scripts/...`, `bench/...`),
after an optional `$ ` prompt; a trailing `\\` continues it on the next line and a
` # comment` is dropped. `bridge-launch a / b` and `bridge-launch a | b` (a `/` or `|` followed
by a subcommand name) are two commands.

Each command ends up in one of five groups:
- run: run with bash, the build dir first on PATH, in a scratch directory of its page
  (`examples/` and `build/` linked from the repository; `recipe.yaml`, a copy of
  examples/recipes/probe-slurm.yaml), with HOME and BRIDGE_LAUNCH_STATE_DIR in a temporary
  directory. `JOB` is the id of the demo job that the runner launches first (as `make demo`
  does: examples/recipes/demo.yaml on the local executor). The exit code must be 0 (or the
  annotated one), the key output of its subcommand must be there (default_expectations:
  `validate` says `ok`, `plan` prints the topology, a slurm dry-run the #SBATCH lines, JSON
  parses, ...) and so must every annotated text. A command already run with the same
  recipe reuses that result.
- dry-run: a launch or `ablate` on the slurm or kubernetes executor (from --executor or the
  recipe's executor.default) gets `--dry-run` appended, as there is no cluster here: the
  executor prints the exact script or manifests, and they are checked.
- synopsis-checked: a line with placeholders (`[...]`, `...`, `RECIPE`, `N`, `JOB_A`,
  `KEY=VALUE`, ...) is not run; its subcommand and every option in it must be in
  `bridge-launch <subcommand> --help`, and alternatives written `a|b` among the option's
  choices.
- target-checked: `make TARGET [VAR=...]` needs the target (and the variable) in the Makefile;
  a repository script must be an executable file, and `scripts/x.sh SUB` needs SUB among the
  script's subcommands. (CI runs the make targets; running them here would rebuild the tree.)
- skipped, always with a reason: an annotation `skip="..."`, or `cmake` (it builds the tree
  this test runs from).
Besides the blocks: every inline `bridge-launch ...` code span is synopsis-checked; every
repository path (`model/...`, `examples/...`) and Markdown link must exist; no link or
`../` path may leave the repository; and every rule id (T1, M4d, E7, ...) must be one that
docs/overlap.md, "Rules by id", explains.

Annotations: an HTML comment right above a block (blank lines and other annotations may sit in
between), invisible on the rendered page; in a man page a `.\\" doc-test: ...` line:
    <!-- doc-test: for="cancel JOB" exit=1 out~="is not running" why="the demo job has ended" -->
Its words, shell-quoted:
  for="TEXT"          the words after it apply only to the block's commands containing TEXT
  exit=N              the expected exit code (then the default key output is not required)
  out~="TEXT"         stdout or stderr contains TEXT (repeatable); out!~="TEXT": does not
  recipe=PATH         recipe.yaml is a copy of PATH for this block
  replace="OLD=>NEW"  replace OLD in the command before it runs
  dry-run="REASON"    append --dry-run on the local executor too
  skip="REASON"       do not run it; the reason is printed in the summary
  output=next         the next fenced block is the output: its lines must appear in order,
                      `...` matching anything
  why="TEXT"          a note for the reader, not checked
and above a fenced recipe: file=NAME (the block is written to NAME in the page's scratch
directory, e.g. recipe.yaml for the commands below it) and `validate` (`bridge-launch validate
NAME` must pass).
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SUBCOMMANDS_FALLBACK = ["validate", "plan", "plugins", "list", "status", "logs", "why", "cancel",
                        "compare", "ablate", "advise", "init", "completion"]
# Options that take a value (to find the subcommand and the recipe among the words).
VALUE_OPTIONS = {"-e", "--executor", "-ng", "--num-gpus", "-gn", "--gpus-per-node", "-g",
                 "--gpu", "-E", "--env", "--format", "--template", "--vary", "--window",
                 "--rank", "--node", "--tail", "--grep", "-o", "--output", "--shape"}
PLACEHOLDER_WORD = re.compile(
    r"^(RECIPE|JOB_[A-Z]|N|FILE|GPU|TYPE|DIR|EXECUTOR|REGEX|RE|OPTIONS|KEY|KNOB)(\.yaml)?$"
    r"|^(KEY[0-9]*|KNOB)=")
DEFAULT_RECIPE = "examples/recipes/probe-slurm.yaml"
DEMO_RECIPE = "examples/recipes/demo.yaml"
REPO_DIRS = ("base", "system", "model", "plugins", "plan", "jobs", "executors", "launcher",
             "runtime", "templates", "examples", "scripts", "tests", "bench", "docs", "cmake")
# Paths that name files of other projects, not of this repository.
EXTERNAL_PATHS = {"scripts/performance/run_script.py": "Megatron-Bridge's training script"}
COMMAND_START = re.compile(
    r"^(\$ )?(\./build/bridge-launch|build/bridge-launch|bridge-launch|source <\(bridge-launch|"
    r"make|cmake|(scripts|bench)/[\w.-]+|eval \"\$\(scripts/[\w.-]+)(\s|$)")
SHELL_FENCES = {"", "sh", "shell", "bash", "console"}
TIMEOUT_S = 180


# ---------------------------------------------------------------- reading the docs


class Block:
    def __init__(self, path, line, lines, fenced, lang, notes):
        self.path, self.line, self.lines = path, line, lines  # lines: [(lineno, text)]
        self.fenced, self.lang = fenced, lang
        self.notes = notes  # one [(word, value)] per doc-test comment above the block


def parse_annotation(text, where):
    """`doc-test: a=b c~="d e"` -> list of (key, value); raises on a malformed word."""
    words = shlex.split(text)
    out = []
    for w in words:
        m = re.match(r"^(for|exit|out~|out!~|recipe|replace|skip|dry-run|output|file|why)=(.*)$", w,
                     re.S)
        if m:
            out.append((m.group(1), m.group(2)))
        elif w == "validate":
            out.append(("validate", ""))
        else:
            raise ValueError(f"{where}: unknown doc-test word `{w}`")
    return out


def read_blocks(path, text):
    """The code blocks of one page, each with the doc-test annotations right above it."""
    lines = text.split("\n")
    blocks, pending = [], []
    i = 0
    prev_blank = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if line.startswith("<!--") and "doc-test" in line:  # not indented: not an example
            j = i
            body = line
            while "-->" not in lines[j]:
                j += 1
                body += "\n" + lines[j]
            m = re.search(r"<!--\s*doc-test:?(.*?)-->", body, re.S)
            if not m:
                raise ValueError(f"{path}:{i + 1}: malformed doc-test comment")
            pending.append(parse_annotation(m.group(1), f"{path}:{i + 1}"))
            i = j + 1
            prev_blank = True
            continue
        fence = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", line)
        if fence:
            indent, marker, lang = fence.group(1), fence.group(2), fence.group(3).lower()
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker):
                body.append((j + 1, lines[j][len(indent):] if lines[j].startswith(indent)
                             else lines[j]))
                j += 1
            blocks.append(Block(path, i + 1, body, True, lang, pending))
            pending = []
            i = j + 1
            prev_blank = False
            continue
        if prev_blank and line.startswith("    ") and stripped:
            body = []
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                if lines[j].strip():
                    body.append((j + 1, lines[j][4:]))
                elif j + 1 < len(lines) and not lines[j + 1].startswith("    "):
                    break
                j += 1
            blocks.append(Block(path, i + 1, body, False, "", pending))
            pending = []
            i = j
            prev_blank = False
            continue
        if stripped:
            pending = [] if not stripped.startswith("<!--") else pending
        prev_blank = not stripped
        i += 1
    return blocks


def strip_comment(cmd):
    """Drops a trailing `# comment` that is outside quotes and after whitespace."""
    quote = None
    for k, ch in enumerate(cmd):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or cmd[k - 1] in " \t"):
            return cmd[:k].rstrip()
    return cmd.rstrip()


def tokens(cmd, spans=False):
    """Words of a command line: (text, depth) with quotes kept, `[`/`]` as their own words;
    with spans=True, (text, depth, start, end) offsets into cmd."""
    out, cur, start, quote, depth = [], "", 0, None, 0

    def flush(end):
        nonlocal cur
        if cur:
            out.append((cur, depth, start, end))
            cur = ""

    for k, ch in enumerate(cmd):
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in " \t":
            flush(k)
            continue
        if ch in "[]":
            flush(k)
            if ch == "]":
                depth -= 1
            out.append((ch, depth, k, k + 1))
            if ch == "[":
                depth += 1
            continue
        if not cur:
            start = k
        cur += ch
        if ch in "'\"":
            quote = ch
    flush(len(cmd))
    return out if spans else [(w, d) for w, d, _, _ in out]


def commands_of_block(block, subcommands):
    """[(lineno, command as written)] with continuations joined and `a / b` lists split."""
    if block.fenced and block.lang not in SHELL_FENCES:
        return []
    out = []
    k = 0
    body = block.lines
    while k < len(body):
        lineno, text = body[k]
        s = text.strip()
        if not COMMAND_START.match(s):
            k += 1
            continue
        if s.startswith("$ "):
            s = s[2:]
        s = strip_comment(s)
        while s.endswith("\\") and k + 1 < len(body):
            k += 1
            s = s[:-1].rstrip() + " " + strip_comment(body[k][1].strip())
        k += 1
        out.extend((lineno, c) for c in split_list(s, subcommands))
    return out


def split_list(cmd, subcommands):
    """`bridge-launch list / status JOB` -> two commands; other lines unchanged."""
    if not re.match(r"^(\./)?(build/)?bridge-launch\b", cmd):
        return [cmd]
    words = tokens(cmd, spans=True)
    prefix = words[0][0]
    parts, begin = [], words[0][3]
    for n, (w, depth, start, end) in enumerate(words):
        nxt = words[n + 1][0] if n + 1 < len(words) else ""
        if depth == 0 and w in ("/", "|") and nxt in subcommands:
            parts.append(prefix + " " + cmd[begin:start].strip())
            begin = end
    if not parts:
        return [cmd]
    parts.append(prefix + " " + cmd[begin:].strip())
    return parts


# ---------------------------------------------------------------- the tool's --help


class Cli:
    def __init__(self, binary):
        self.binary = binary
        root = self.help([])
        m = re.search(r"Subcommands:\n((?:  \S.*\n?)+)", root)
        self.subcommands = ([ln.split()[0] for ln in m.group(1).splitlines()] if m
                            else SUBCOMMANDS_FALLBACK)
        self.options = {"": self.options_of(root)}
        for c in self.subcommands:
            self.options[c] = self.options_of(self.help([c]))

    def help(self, sub):
        r = subprocess.run([self.binary] + sub + ["--help"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"`bridge-launch {' '.join(sub)} --help` exited {r.returncode}")
        return r.stdout

    @staticmethod
    def options_of(help_text):
        """{option: set of choices or None} from the option rows of a --help text."""
        opts = {}
        for line in help_text.splitlines():
            if not line.startswith("  -"):
                continue
            names = re.findall(r"(?:^|[\s,])(--?[a-zA-Z][a-zA-Z-]*)", line)
            choices = re.search(r":\{([^}]*)\}", line)
            for name in names:
                opts[name] = set(choices.group(1).split(",")) if choices else None
        return opts


def first_positional(words):
    """The first word after the program that is neither an option nor an option's value."""
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w.startswith("-"):
            skip = w in VALUE_OPTIONS
            continue
        if w in ("[", "]"):
            continue
        return w
    return ""


def subcommand_of(words, subcommands):
    """The subcommand of a bridge-launch command (words after the program), or ''."""
    w = first_positional(words)
    return w if w in subcommands else ""


def check_synopsis(cmd, cli):
    """Drift in a synopsis line: unknown subcommand, option or choice. Returns problems."""
    problems = []
    words = tokens(cmd)
    texts = [w for w, _ in words[1:]]
    sub = subcommand_of(texts, cli.subcommands)
    first_word = first_positional(texts)
    if not sub and re.fullmatch(r"[a-z]+", first_word):
        problems.append(f"`{first_word}` is not a subcommand of bridge-launch")
    opts = cli.options[sub]
    for n, (w, _) in enumerate(words[1:], start=1):
        if not w.startswith("-") or w in ("-", "--"):
            continue
        name = w.split("=", 1)[0]
        if name not in opts:
            where = f"bridge-launch {sub} --help" if sub else "bridge-launch --help"
            problems.append(f"option `{name}` is not in `{where}`")
            continue
        choices = opts[name]
        value = words[n + 1][0] if n + 1 < len(words) else ""
        if choices and "|" in value and not value.startswith(("'", '"')):
            for alt in value.split("|"):
                if alt not in choices:
                    problems.append(f"`{name} {alt}`: not one of {sorted(choices)}")
    return problems


def is_synopsis(cmd):
    for w, _ in tokens(cmd):
        if w in ("[", "]", "...") or PLACEHOLDER_WORD.match(w):
            return True
    return False


# ---------------------------------------------------------------- running


class Result:
    def __init__(self, code, out, err, seconds):
        self.code, self.out, self.err, self.seconds = code, out, err, seconds


class Runner:
    def __init__(self, args):
        self.args = args
        self.source = os.path.abspath(args.source)
        self.build = os.path.abspath(args.build_dir)
        self.binary = os.path.join(self.build, "bridge-launch")
        self.tmp = tempfile.mkdtemp(prefix="bl-doc-commands-")
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("XDG_", "SLURM_", "BRIDGE_", "KUBECONFIG"))}
        self.env.update({"HOME": self.home,
                         "BRIDGE_LAUNCH_STATE_DIR": os.path.join(self.tmp, "state"),
                         "PATH": self.build + os.pathsep + os.environ.get("PATH", ""),
                         "LC_ALL": "C.UTF-8", "NO_COLOR": "1"})
        self.cli = Cli(self.binary)
        self.rules = rule_ids_defined(self.source)
        self.makefile = open(os.path.join(self.source, "Makefile")).read()
        self.counts = {"run": 0, "dry-run": 0, "synopsis-checked": 0, "target-checked": 0,
                       "skipped": 0}
        self.reused = 0
        self.skips = []
        self.failures = []
        self.cache = {}
        self.job = None

    # -- output
    def report(self, kind, where, cmd, note="", result=None):
        self.counts[kind] += 1
        t = f" ({result.seconds:.1f} s)" if result and result.seconds >= 0.5 else ""
        if "reused" in note:
            t = ""
        print(f"[{kind}] {where}: {cmd}{t}{'  -- ' + note if note else ''}", flush=True)

    def fail(self, where, cmd, problems, result=None):
        self.failures.append(where)
        print(f"FAIL {where}: {cmd}", flush=True)
        for p in problems:
            print(f"    {p}")
        if result is not None:
            tail = (result.out + result.err).splitlines()[-25:]
            print(f"    exit {result.code}; last lines of its output:")
            for ln in tail:
                print(f"      | {ln}")

    # -- scratch dirs
    def scratch_for(self, page):
        d = os.path.join(self.tmp, "pages", page.replace("/", "_"))
        if not os.path.isdir(d):
            os.makedirs(d)
            os.symlink(os.path.join(self.source, "examples"), os.path.join(d, "examples"))
            os.symlink(self.build, os.path.join(d, "build"))
            shutil.copy(os.path.join(self.source, DEFAULT_RECIPE), os.path.join(d, "recipe.yaml"))
        return d

    def run_shell(self, cmd, cwd):
        start = time.monotonic()
        # A pager at the end of a pipe (`| less`) copies its input: stdout is not a terminal.
        script = "set -o pipefail\nless() { cat; }\n" + cmd
        try:
            r = subprocess.run(["bash", "-c", script], cwd=cwd, env=self.env,
                               capture_output=True, text=True, timeout=TIMEOUT_S,
                               stdin=subprocess.DEVNULL)
            return Result(r.returncode, r.stdout, r.stderr, time.monotonic() - start)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return Result(124, out, f"timed out after {TIMEOUT_S} s",
                          time.monotonic() - start)

    # -- the demo job behind every JOB
    def launch_demo(self):
        d = self.scratch_for("setup")
        r = self.run_shell(f"bridge-launch {DEMO_RECIPE}", d)
        where = "setup (the demo job, as `make demo` runs it)"
        expect = ["env check: all ranks match", "plan check: all ranks match",
                  "overlap efficiency", "finished: 4 processes exited 0"]
        problems = [f"exit {r.code}, expected 0"] if r.code != 0 else []
        problems += [f"output lacks `{e}`" for e in expect if e not in r.out + r.err]
        if problems:
            self.fail(where, f"bridge-launch {DEMO_RECIPE}", problems, r)
            return
        listing = self.run_shell("bridge-launch list --format json", d)
        jobs = json.loads(listing.out)
        self.job = jobs[0]["id"]
        self.report("run", where, f"bridge-launch {DEMO_RECIPE}", f"JOB = {self.job}", r)

    # -- one command
    def executor_of(self, words, cwd):
        for n, w in enumerate(words):
            if w in ("-e", "--executor") and n + 1 < len(words):
                return words[n + 1]
            if w.startswith("--executor="):
                return w.split("=", 1)[1]
            if w.startswith("executor.default="):
                return w.split("=", 1)[1]
        recipe = next((w for w in words if w.endswith((".yaml", ".yml"))), None)
        if recipe and os.path.exists(os.path.join(cwd, recipe)):
            text = open(os.path.join(cwd, recipe)).read()
            m = re.search(r"^executor:\s*\n(?:[ \t]+.*\n|\s*\n)*?[ \t]+default:\s*(\w+)", text,
                          re.M)
            if m:
                return m.group(1)
        return "local"

    def default_expectations(self, sub, words, executor, dry_run):
        """Key output of each subcommand, checked without any annotation."""
        json_out = "--format" in words and words[words.index("--format") + 1] == "json"
        if "--help" in words or "-h" in words:
            return ["Usage"] if not sub else ["Options:"], json_out
        exp = {
            "validate": [": ok ("],
            "plan": ["topology", "comm_overlap (resolved)"],
            "advise": ["overlap advice for", "before you measure"],
            "plugins": ["perf_env"],
            "list": [self.job or ""],
            "status": ["SUCCEEDED"],
            "why": ["SUCCEEDED"],
            "completion": ["complete"],
            "init": [],
            "logs": [],
            "cancel": [],
            "compare": ["steady-state step time"],
        }.get(sub, [])
        if sub == "ablate":
            exp = (["# ablate 1 of"] if dry_run else ["steady-state step time", "(baseline)"])
        elif sub == "":
            if dry_run:
                exp = {"slurm": ["#!/bin/bash", "#SBATCH --nodes="],
                       "kubernetes": ["apiVersion:", "kind:"]}.get(executor, [])
            else:
                exp = ["finished:"]
        if json_out:
            exp = [e for e in exp if sub in ("list", "status")]  # text-only markers
        return exp, json_out

    def run_command(self, where, written, cmd, notes, cwd):
        words = [w for w, _ in tokens(cmd)]
        program = words[0]
        if re.match(r"^(\./)?build/bridge-launch$", program):
            key_cmd = "bridge-launch " + cmd.split(None, 1)[1] if " " in cmd else "bridge-launch"
        else:
            key_cmd = cmd
        sub = subcommand_of(words[1:], self.cli.subcommands)
        problems = []
        for w in words:
            bare = w.strip("'\"")
            if bare.startswith("examples/") and not os.path.exists(
                    os.path.join(self.source, bare)):
                problems.append(f"`{bare}` does not exist")
        if problems:
            self.fail(where, written, problems)
            return
        executor = self.executor_of(words[1:], cwd)
        launching = sub in ("", "ablate") and any(w.endswith((".yaml", ".yml")) for w in words)
        dry_run = "--dry-run" in words
        appended = False
        if launching and not dry_run and (executor != "local" or "dry-run" in notes):
            cmd += " --dry-run"
            dry_run = appended = True
        expected_exit = int(notes.get("exit", 0))
        expect, json_out = self.default_expectations(sub, words, executor, dry_run)
        if "exit" in notes and expected_exit != 0:
            expect = []
        expect += notes.get("out~", [])
        # The same command on the same files (their contents, wherever they are) gives the same
        # result: run it once.
        inputs = tuple(hashlib.sha1(open(os.path.join(cwd, w), "rb").read()).hexdigest()
                       for w in words if w.endswith((".yaml", ".yml"))
                       and os.path.isfile(os.path.join(cwd, w)))
        key = (key_cmd + (" --dry-run" if appended else ""), inputs)
        writes = sub == "init" or re.search(r"(^|\s)>", cmd)  # files later commands may read
        if key in self.cache and not writes:
            r = self.cache[key]
            self.reused += 1
            note = "same command as earlier: its result reused"
        else:
            r = self.run_shell(cmd, cwd)
            self.cache[key] = r
            note = ""
        if appended:
            why = notes.get("dry-run") or f"{executor} executor, no cluster here"
            note = (note + "; " if note else "") + f"run with --dry-run: {why}"
        if r.code != expected_exit:
            problems.append(f"exit {r.code}, expected {expected_exit}")
        both = r.out + r.err
        problems += [f"output lacks `{e}`" for e in expect if e and e not in both]
        problems += [f"output has `{e}`" for e in notes.get("out!~", []) if e in both]
        if json_out and r.code == 0:
            try:
                doc = json.loads(r.out)
                if isinstance(doc, dict) and doc.get("ok") is False:
                    problems.append("JSON output has \"ok\": false")
            except ValueError as e:
                problems.append(f"stdout is not JSON: {e}")
        if "-o" in words and sub == "init" and r.code == 0:
            out_file = words[words.index("-o") + 1]
            if not os.path.exists(os.path.join(cwd, out_file)):
                problems.append(f"init -o did not write {out_file}")
        if notes.get("output"):
            problems += match_output(notes["output"], both)
        if problems:
            self.fail(where, cmd, problems, r)
        else:
            self.report("dry-run" if appended else "run", where, written, note, r)

    def target_check(self, where, cmd):
        words = shlex.split(cmd.replace('eval "$(', "").replace(')"', ""))
        problems = []
        if words[0] == "make":
            for w in words[1:]:
                if "=" in w:
                    var = w.split("=", 1)[0]
                    if not re.search(rf"^{re.escape(var)}\s*[?:+]?=", self.makefile, re.M):
                        problems.append(f"the Makefile has no variable {var}")
                elif not re.search(rf"^{re.escape(w)}\s*:", self.makefile, re.M):
                    problems.append(f"the Makefile has no target `{w}`")
        else:
            path = os.path.join(self.source, words[0])
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                problems.append(f"{words[0]} is not an executable file of the repository")
            elif words[0].startswith("scripts/") and len(words) > 1 and \
                    not words[1].startswith(("-", "[")):
                body = open(path).read()
                if not re.search(rf"^\s*(\S+\|)?{re.escape(words[1])}(\|\S+)?\)", body, re.M):
                    problems.append(f"{words[0]} has no subcommand `{words[1]}`")
        if problems:
            self.fail(where, cmd, problems)
        else:
            self.report("target-checked", where, cmd)

    def skip(self, where, cmd, reason):
        self.skips.append(reason)
        self.report("skipped", where, cmd, reason)

    # -- one page
    def page(self, rel):
        text = page_text(os.path.join(self.source, rel))
        cwd = self.scratch_for(rel)
        try:
            blocks = read_blocks(rel, text)
        except ValueError as e:
            self.fail(rel, "(annotations)", [str(e)])
            return
        for bi, block in enumerate(blocks):
            flat = [kv for group in block.notes for kv in group]
            file_name = next((v for k, v in flat if k == "file"), None)
            if file_name:
                body = "\n".join(t for _, t in block.lines) + "\n"
                open(os.path.join(cwd, file_name), "w").write(body)
                if any(k == "validate" for k, _ in flat):
                    where = f"{rel}:{block.line}"
                    written = f"bridge-launch validate {file_name}  (the recipe block)"
                    self.run_command(where, written, f"bridge-launch validate {file_name}",
                                     {}, cwd)
                continue
            cmds = commands_of_block(block, self.cli.subcommands)
            if block.notes and not cmds:
                self.fail(f"{rel}:{block.line}", "(doc-test annotation)",
                          ["the block below the annotation has no command"])
            for group in block.notes:
                sel = next((v for k, v in group if k == "for"), None)
                if sel is not None and not any(sel in c for _, c in cmds):
                    self.fail(f"{rel}:{block.line}", f'for="{sel}"',
                              ["no command of the block below contains it"])
            next_fenced = next((b for b in blocks[bi + 1:] if b.fenced), None)
            for lineno, written in cmds:
                where = f"{rel}:{lineno}"
                notes = {}
                for group in block.notes:
                    sel = next((v for k, v in group if k == "for"), None)
                    if sel is not None and sel not in written:
                        continue
                    for k, v in group:
                        if k in ("out~", "out!~", "replace"):
                            notes.setdefault(k, []).append(v)
                        elif k == "output" and v == "next" and next_fenced:
                            notes["output"] = [t for _, t in next_fenced.lines]
                        elif k != "for":
                            notes[k] = v
                self.command(where, written, notes, cwd)

    def command(self, where, written, notes, cwd):
        if "skip" in notes:
            if not notes["skip"].strip():
                self.fail(where, written, ["skip needs a reason: skip=\"...\""])
            else:
                self.skip(where, written, notes["skip"])
            return
        if written.startswith("cmake"):
            self.skip(where, written, "builds the tree this test runs from")
            return
        if written.startswith("source <(bridge-launch"):
            # A completion script loaded into this shell: it must register the completion.
            inner = written[len("source <("):].rstrip(")")
            problems = check_synopsis(inner, self.cli)
            r = self.run_shell(written + "\ncomplete -p bridge-launch", cwd)
            if r.code != 0 or "-F _bridge_launch bridge-launch" not in r.out:
                problems.append("no completion for bridge-launch is registered")
            if problems:
                self.fail(where, written, problems, r)
            else:
                self.report("run", where, written, "", r)
            return
        if not re.match(r"^(\./)?(build/)?bridge-launch\b", written):
            self.target_check(where, written)
            return
        if is_synopsis(written):
            problems = check_synopsis(written, self.cli)
            if problems:
                self.fail(where, written, problems)
            else:
                self.report("synopsis-checked", where, written)
            return
        problems = check_synopsis(written, self.cli)
        if problems:
            self.fail(where, written, problems)
            return
        cmd = written
        for rep in notes.get("replace", []):
            old, _, new = rep.partition("=>")
            if old not in cmd:
                self.fail(where, written, [f"replace: `{old}` is not in the command"])
                return
            cmd = cmd.replace(old, new)
        if re.search(r"\bJOB\b", cmd):
            if not self.job:
                self.skip(where, written, "no demo job (its launch failed above)")
                return
            cmd = re.sub(r"\bJOB\b", self.job, cmd)
        recipe = notes.get("recipe")
        saved = None
        if recipe:
            if not os.path.exists(os.path.join(self.source, recipe)):
                self.fail(where, written, [f"recipe={recipe} does not exist"])
                return
            saved = open(os.path.join(cwd, "recipe.yaml"), "rb").read()
            shutil.copy(os.path.join(self.source, recipe), os.path.join(cwd, "recipe.yaml"))
        try:
            self.run_command(where, written, cmd, notes, cwd)
        finally:
            if saved is not None:
                open(os.path.join(cwd, "recipe.yaml"), "wb").write(saved)

    # -- inline spans and paths
    def prose_checks(self, rel, text):
        checked_paths = checked_inline = 0
        in_fence = False
        for n, line in enumerate(text.split("\n"), 1):
            for rule in sorted(rule_ids_used(line) - self.rules):
                self.fail(f"{rel}:{n}", rule, ["a rule id that docs/overlap.md, \"Rules by id\", "
                                               "does not explain"])
            if re.match(r"^\s*(```|~~~)", line):
                in_fence = not in_fence
                continue
            where = f"{rel}:{n}"
            if not in_fence:
                for m in re.finditer(r"`((?:\./)?(?:build/)?bridge-launch(?: [^`]*)?)`", line):
                    span = m.group(1).replace("\\|", "|")
                    span = re.split(r" \| (?!\w+ )", span)[0] if " | " in span else span
                    span = re.sub(r"\s\|\s*(head|less|tail).*$", "", span)
                    for part in split_list(span, self.cli.subcommands):
                        problems = check_synopsis(part, self.cli)
                        if problems:
                            self.fail(where, part, problems)
                        checked_inline += 1
            for m in re.finditer(r"(?<![\w.])((?:\.\./)+[\w.-][\w./-]*)", line):
                target = os.path.normpath(os.path.join(self.source, os.path.dirname(rel),
                                                       m.group(1)))
                if not target.startswith(self.source + os.sep):
                    self.fail(where, m.group(1), ["a path outside the repository; explain the "
                                                  "thing here instead"])
            for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", line):
                target = m.group(1)
                if re.match(r"^[a-z]+://", target):
                    self.fail(where, target, ["a link outside the repository; explain it here"])
                elif not os.path.exists(os.path.join(self.source, os.path.dirname(rel),
                                                     target)):
                    self.fail(where, target, ["the link's target does not exist"])
            for m in re.finditer(r"(?<![\w./~$-])((?:%s)/[\w./-]*[\w/])" % "|".join(REPO_DIRS),
                                 line):
                p = m.group(1)
                if p in EXTERNAL_PATHS or re.search(r"[<*]", line[m.end():m.end() + 1]):
                    continue
                checked_paths += 1
                cands = [p, os.path.join(os.path.dirname(rel), p), os.path.join("docs", p)]
                if not any(os.path.exists(os.path.join(self.source, c)) for c in cands):
                    self.fail(where, p, ["this path does not exist in the repository"])
        return checked_paths, checked_inline


def page_text(path):
    """A page as Markdown: a man page's `.nf`/`.fi` blocks become fenced blocks, its
    `.\\" doc-test: ...` comments annotations, and its escapes plain text."""
    text = open(path).read()
    if not path.endswith(".1"):
        return text
    out = []
    for line in text.split("\n"):
        m = re.match(r'^\.\\"\s*(doc-test:.*)$', line)
        if m:
            out.append(f"<!-- {m.group(1)} -->")
        elif line in (".nf", ".fi"):
            out.append("```")
        elif line.startswith("."):
            out.append("")
        else:
            line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\e", "\\")
            out.append(line)
    return "\n".join(out)


RULE_ID = re.compile(r"(?<![\w./-])([TMDE][0-9][a-d]?)(?![\w-])")


def rule_ids_defined(source):
    """The rule ids that docs/overlap.md, "Rules by id", explains (table rows, **M1a**)."""
    text = open(os.path.join(source, "docs", "overlap.md")).read()
    m = re.search(r"^## Rules by id\n(.*?)(?=^## )", text, re.M | re.S)
    if not m:
        return set()
    section = m.group(1)
    ids = set(re.findall(r"^\| ([TMDE][0-9]?) \|", section, re.M))
    ids |= set(re.findall(r"\*\*([TMDE][0-9][a-d])\*\*", section))
    return ids


def rule_ids_used(line):
    """Rule ids in a line of prose: `T3`, `M4d`, and `M4 a/b/c/d` as M4a..M4d."""
    ids = set(RULE_ID.findall(line))
    for base, letters in re.findall(r"\b([TMDE][0-9]) ([a-d](?:/[a-d])+)\b", line):
        ids |= {base + x for x in letters.split("/")}
    return ids


def match_output(expected_lines, actual):
    """Each expected line (pieces around `...`) must appear, in order, in the actual output."""
    lines = actual.splitlines()
    pos = 0
    for exp in expected_lines:
        s = exp.strip()
        if not s or s == "...":
            continue
        pieces = [p.strip() for p in s.split("...") if p.strip()]
        while pos < len(lines):
            line = lines[pos]
            pos += 1
            at = 0
            ok = True
            for p in pieces:
                at = line.find(p, at)
                if at < 0:
                    ok = False
                    break
                at += len(p)
            if ok:
                break
        else:
            return [f"output=next: no line matching `{s}` (in order) in the output"]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--source", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--build-dir", default=None, help="default: SOURCE/build")
    ap.add_argument("--only", action="append", default=[], help="only this page (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if args.build_dir is None:
        args.build_dir = os.path.join(args.source, "build")
    start = time.monotonic()
    r = Runner(args)
    pages = ["README.md"] + sorted(
        os.path.relpath(p, args.source)
        for p in glob.glob(os.path.join(args.source, "docs", "**", "*.md"), recursive=True))
    pages += sorted(os.path.relpath(p, args.source)
                    for p in glob.glob(os.path.join(args.source, "docs", "man", "*.1")))
    if args.only:
        pages = [p for p in pages if p in args.only]
    try:
        r.launch_demo()
        paths = inline = 0
        for page in pages:
            r.page(page)
            p, i = r.prose_checks(page, page_text(os.path.join(args.source, page)))
            paths += p
            inline += i
    finally:
        if not args.keep:
            shutil.rmtree(r.tmp, ignore_errors=True)
        else:
            print(f"kept {r.tmp}")
    c = r.counts
    reasons = sorted(set(r.skips))
    print(f"\ndoc commands: {c['run']} run, {c['dry-run']} dry-run, "
          f"{c['synopsis-checked']} synopsis-checked, {c['target-checked']} target-checked, "
          f"{c['skipped']} skipped" + (f" ({'; '.join(reasons)})" if reasons else ""))
    print(f"also checked: {inline} inline `bridge-launch ...` spans, {paths} repository paths; "
          f"{r.reused} identical command(s) reused an earlier run; {len(pages)} pages in "
          f"{time.monotonic() - start:.1f} s")
    if r.failures:
        print(f"doc commands: {len(r.failures)} FAILED: " + ", ".join(r.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
