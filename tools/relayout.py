#!/usr/bin/env python3
"""The package move: ``roost/broker`` split into the wire format, the client (with
``roost ls``'s fast path fenced in its own package) and the router; the adapter host named so;
the interpreter's argv at the bottom of roost. Stdlib only; run from anywhere in the checkout.

    python3 tools/relayout.py            # do it in the working tree, commit nothing
    python3 tools/relayout.py --commit   # the same, as two commits: "move only", then
                                         # "imports follow the move"
    python3 tools/relayout.py --check    # say what would be done, change nothing

Two steps, each safe to run again (on a tree where they are done they do nothing):

1. Every move with ``git mv`` (so ``git log --follow`` finds a file's history), the new packages'
   ``__init__.py`` beside them. Refused, before anything is moved, when a source is missing and
   its target is not there either, or when both exist.
2. Every import and dotted module name (``roost.broker.client``, in ``python -m`` argv, monkeypatch
   targets, docs) and every path (``roost/broker/client.py``) rewritten across roost/, tests/,
   bench/, deploy/, docs/, clients/, tools/, README.md, pyproject.toml and the Makefile;
   ``from roost.broker import wire`` becomes ``from roost.wire import codec as wire`` (a module
   renamed keeps its local name). Then pyproject's ``[tool.importlinter]`` block is replaced by
   the contracts of the new layout (``CONTRACTS`` below), tests/unit/test_layers.py gets the cases
   that break them, docs/ARCHITECTURE.md the paragraphs in tools/relayout.arch.md, and ruff sorts
   the imports and formats the Python files it touched. CHANGELOG.md keeps the names of its time.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

# -- the layout -----------------------------------------------------------------------------------

MOVES: list[tuple[str, str]] = [
    # the wire format, at the bottom: what both ends of a connection speak
    ("roost/broker/errors.py", "roost/wire/errors.py"),
    ("roost/broker/limits.py", "roost/wire/limits.py"),
    ("roost/broker/wire.py", "roost/wire/codec.py"),
    ("roost/broker/protocol.py", "roost/wire/protocol.py"),
    ("roost/broker/fields.py", "roost/wire/fields.py"),
    ("roost/broker/policy.py", "roost/wire/policy.py"),
    ("roost/broker/messages.py", "roost/wire/messages.py"),
    # the client: finding a node from its state directory and talking to it
    ("roost/broker/client.py", "roost/client/client.py"),
    ("roost/broker/locate.py", "roost/client/locate.py"),
    ("roost/broker/keys.py", "roost/client/keys.py"),
    # roost ls's fast path: no pyzmq, msgpack, typing, pathlib or dataclasses
    ("roost/broker/nodefile.py", "roost/client/fast/nodefile.py"),
    ("roost/broker/zmtp.py", "roost/client/fast/zmtp.py"),
    ("roost/broker/tinypack.py", "roost/client/fast/tinypack.py"),
    # the router stays in roost/broker: router, registry, admission, liveness, links, local,
    # loopsock. How roost starts a Python process of its own: the CLI, the demo, the provider
    # checks and the daemon all use it, so it sits at the bottom beside config and suggest.
    ("roost/broker/interpreter.py", "roost/interpreter.py"),
    # the adapter host (python -m roost.actors.adapter_host), not to be read as roost.adapters
    ("roost/actors/adapters.py", "roost/actors/adapter_host.py"),
]

PACKAGES: dict[str, str] = {
    "roost/wire/__init__.py": '''\
"""The wire format both ends of a connection speak, at the bottom of roost: the stable error
codes (``errors``), the limits (``limits``), the msgpack codec (``codec``), frames, headers and
the catalogue (``protocol``), typed body access (``fields``), addresses and node ids
(``policy``). It imports nothing of roost outside itself. Nothing is imported here: ``roost ls``'s
fast path imports ``errors`` and ``limits`` and must not pay for the rest.
"""
''',
    "roost/client/__init__.py": '''\
"""The client side: where a node keeps its files and how a client finds it (``locate``), the
CURVE key files (``keys``), the synchronous ``Client`` (``client``), and ``roost ls``'s fast path
(``fast``). Nothing is imported here: the fast path passes through this package.
"""
''',
    "roost/client/fast/__init__.py": '''\
"""``roost ls``'s fast path (``roost.cli.quick``): node.json, the lock and the token read with
``os`` only (``nodefile``), a ZMTP DEALER without libzmq (``zmtp``), the wire's msgpack in pure
Python (``tinypack``). Beside ``roost.wire.errors`` and ``roost.wire.limits`` these import nothing
of roost, nor pyzmq or msgpack (import-linter holds them to it).
"""
''',
}
# Written only when the file is empty (the package existed before, without a docstring).
DOCSTRINGS: dict[str, str] = {
    "roost/broker/__init__.py": '''\
"""The broker: the ROUTER and PUB every roost process meets at (``router``), its peer registry,
admission checks, liveness, a hub's node links, the in-process link and the loop-driven socket.
It speaks ``roost.wire`` and reads the key files through ``roost.client.keys``.
"""
''',
}

ROOTS = ("roost", "tests", "bench", "deploy", "docs", "clients", "tools")
TOP_FILES = ("README.md", "pyproject.toml", "Makefile")
SKIP = {"tools/relayout.py", "tools/relayout.arch.md", "CHANGELOG.md"}
TEXT_SUFFIXES = {
    ".py", ".pyi", ".md", ".toml", ".txt", ".cfg", ".ini", ".service", ".socket", ".sh",
    ".yml", ".yaml", ".json", ".js", ".mjs", ".cjs", ".ts", ".plist", ".conf", ".rst", "",
}  # fmt: skip


def dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


MODULES: dict[str, str] = {dotted(old): dotted(new) for old, new in MOVES}
PATHS: dict[str, str] = dict(MOVES)

_ANY = "|".join(sorted((re.escape(m) for m in MODULES), key=len, reverse=True))
DOTTED_RE = re.compile(rf"(?<![\w.])({_ANY})(?![\w])")
_ANY_PATH = "|".join(sorted((re.escape(p) for p in PATHS), key=len, reverse=True))
PATH_RE = re.compile(rf"(?<![\w.])({_ANY_PATH})(?![\w])")
_PARENTS = sorted({m.rpartition(".")[0] for m in MODULES}, key=len, reverse=True)
# What stays in roost/broker (the router and its parts). A module there that is neither moved
# nor listed here is refused (a module added since: put it in MOVES or here).
KEPT = ("router", "registry", "admission", "liveness", "links", "local", "loopsock")
LEFTOVER_RE = re.compile(rf"roost[./]broker[./](?!({'|'.join(KEPT)})\b)\w")
FROM_RE = re.compile(
    rf"^(?P<indent>[ \t]*)from[ \t]+(?P<pkg>{'|'.join(map(re.escape, _PARENTS))})[ \t]+import"
    r"[ \t]+(?P<names>\([^)]*\)|[^\n#]*?)(?P<trail>[ \t]*#[^\n]*)?$",
    re.MULTILINE,
)

# -- import-linter: the contracts of the new layout (pyproject's block is replaced by it) ---------

CONTRACTS = """\
[tool.importlinter]
root_packages = ["roost"]
include_external_packages = true

[[tool.importlinter.contracts]]
name = "processes import downwards: hub -> node -> {supervisor, state, adapter host} -> runtime"
type = "layers"
layers = [
  "roost.actors.hub",
  "roost.actors.node",
  "roost.actors.supervisor | roost.actors.state | roost.actors.adapter_host",
  "roost.actors.runtime",
]

[[tool.importlinter.contracts]]
name = "the wire format is the bottom: it imports nothing of roost outside roost.wire"
type = "forbidden"
source_modules = ["roost.wire"]
forbidden_modules = [
  "roost.client",
  "roost.broker",
  "roost.actors",
  "roost.adapters",
  "roost.cli",
  "roost.demo",
  "roost.config",
  "roost.interpreter",
  "roost.providers",
  "roost.suggest",
  "zmq",
]

[[tool.importlinter.contracts]]
name = "roost ls's fast path imports nothing heavy: of roost only roost.wire's errors and limits"
type = "forbidden"
source_modules = ["roost.client.fast"]
forbidden_modules = [
  "roost.client.client",
  "roost.client.locate",
  "roost.client.keys",
  "roost.wire.codec",
  "roost.wire.protocol",
  "roost.wire.fields",
  "roost.wire.policy",
  "roost.broker",
  "roost.actors",
  "roost.adapters",
  "roost.cli",
  "roost.config",
  "zmq",
  "msgpack",
  "click",
  "rich",
  "structlog",
]

[[tool.importlinter.contracts]]
name = "the client knows nothing of the router, the processes or the CLI"
type = "forbidden"
source_modules = ["roost.client"]
forbidden_modules = ["roost.broker", "roost.actors", "roost.adapters", "roost.cli", "roost.demo"]

[[tool.importlinter.contracts]]
name = "the broker knows nothing of the processes, the CLI, the adapters or the client's calls"
type = "forbidden"
source_modules = ["roost.broker"]
forbidden_modules = [
  "roost.actors",
  "roost.cli",
  "roost.demo",
  "roost.adapters",
  "roost.client.client",
]

[[tool.importlinter.contracts]]
name = "the provider adapters are plain code without sockets: no broker, client or process"
type = "forbidden"
source_modules = ["roost.adapters"]
forbidden_modules = [
  "roost.broker",
  "roost.client",
  "roost.actors",
  "roost.cli",
  "roost.demo",
  "zmq",
]

[[tool.importlinter.contracts]]
name = "the processes never import the CLI"
type = "forbidden"
source_modules = ["roost.actors"]
forbidden_modules = ["roost.cli", "roost.demo"]

[[tool.importlinter.contracts]]
name = "the CLI talks to the node over the wire (roost.client): never the router or a process"
type = "forbidden"
source_modules = ["roost.cli", "roost.demo"]
forbidden_modules = ["roost.actors", "roost.adapters", "roost.broker"]

[[tool.importlinter.contracts]]
name = "the configuration file's module is at the bottom: it imports only roost.wire and roost.providers"
type = "forbidden"
source_modules = ["roost.config"]
forbidden_modules = [
  "roost.actors",
  "roost.adapters",
  "roost.cli",
  "roost.demo",
  "roost.client",
  "roost.broker",
  "roost.wire.protocol",
  "roost.wire.codec",
]

[[tool.importlinter.contracts]]
name = "the providers' names are near the bottom: roost.providers imports nothing of roost but the wire"
type = "forbidden"
source_modules = ["roost.providers"]
forbidden_modules = [
  "roost.actors",
  "roost.adapters",
  "roost.broker",
  "roost.client",
  "roost.cli",
  "roost.config",
  "roost.demo",
]

[[tool.importlinter.contracts]]
name = "no import cycles between the modules of a package"
type = "acyclic_siblings"
ancestors = ["roost"]
"""

# tests/unit/test_layers.py: one import against each new contract, inserted before this line.
LAYERS_ANCHOR = "        # a cycle inside one package\n"
LAYERS_MARK = "# roost ls's fast path importing the protocol"
LAYERS_CASES = """\
        # roost ls's fast path importing the protocol (its dataclasses), or msgpack
        (
            "roost.client.fast.zmtp",
            "import roost.wire.protocol",
            "roost.client.fast.zmtp -> roost.wire.protocol",
        ),
        ("roost.client.fast.tinypack", "import msgpack", "roost.client.fast.tinypack -> msgpack"),
        # the wire format reaching up into the client
        ("roost.wire.fields", "import roost.client.locate", "roost.wire.fields -> roost.client"),
        # the client reaching into the router
        (
            "roost.client.client",
            "import roost.broker.router",
            "roost.client.client -> roost.broker",
        ),
        # the CLI going around the client, into the router
        ("roost.cli.output", "import roost.broker.registry", "roost.cli.output -> roost.broker"),
        # a process importing the CLI
        ("roost.actors.runtime.lines", "import roost.cli.table", "lines -> roost.cli"),
"""

# docs/ARCHITECTURE.md: paragraphs replaced whole (by the sections of tools/relayout.arch.md),
# each found by how it begins (old) or, once replaced, by how the new one begins (done).
ARCH = "docs/ARCHITECTURE.md"
ARCH_PARAGRAPHS = [
    ("packages", "**`roost/broker/`**: the wire and the routing", "**`roost/wire/`**:"),
    (
        "direction",
        "`hub -> node -> {supervisor | state | adapters} -> runtime -> roost.broker`",
        "`hub -> node -> {supervisor | state | adapter_host} -> runtime`",
    ),
]
# Exact phrases that name the old packages in prose (not module paths): (file, old, new).
LITERALS: list[tuple[str, str, str]] = [
    (
        "roost/actors/__init__.py",
        "the adapter host (``adapters``), on ``runtime``.",
        "the adapter host (``adapter_host``),\non ``runtime``.",
    ),
    (
        "roost/actors/__init__.py",
        "hub -> node -> {supervisor, state, adapters} -> runtime -> roost.broker.",
        "hub -> node -> {supervisor, state, adapter_host} -> runtime -> roost.broker,\n"
        "roost.client -> roost.wire.",
    ),
    (
        ARCH,
        "sits at the bottom beside\n`roost.broker`, used by the node and the CLI.",
        "sits at the bottom beside\n`roost.wire` (with `roost/interpreter.py` and "
        "`roost/config.py`), used by the node and the CLI.",
    ),
    (ARCH, "larger ones by `wire`;", "larger ones by `roost.wire.codec`;"),
    (  # the one module allowed to say "-m" is found by its path
        "tests/unit/test_interpreter.py",
        'if path.name == "interpreter.py" and path.parent.name == "broker":',
        'if path == ROOT / "roost" / "interpreter.py":',
    ),
    (
        "docs/PROTOCOL.md",
        "the code in `roost/broker/` and `roost/actors/` does",
        "the code in `roost/wire/`, `roost/broker/` and `roost/actors/` does",
    ),
]


# -- running --------------------------------------------------------------------------------------


class Refused(Exception):
    pass


def git(root: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise Refused(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def say(msg: str) -> None:
    print(f"relayout: {msg}", flush=True)


def plan_moves(root: Path) -> list[tuple[str, str]]:
    pending, problems = [], []
    for old, new in MOVES:
        has_old, has_new = (root / old).exists(), (root / new).exists()
        if has_old and has_new:
            problems.append(f"both {old} and {new} exist: merge them by hand first")
        elif has_old:
            pending.append((old, new))
        elif not has_new:
            problems.append(f"{old} is missing (and {new} is not there either)")
    planned = {old for old, _ in MOVES} | {f"roost/broker/{m}.py" for m in KEPT}
    for path in sorted((root / "roost/broker").glob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel not in planned and path.name != "__init__.py":
            problems.append(f"{rel} is not in the plan: add it to MOVES or KEPT above")
    if problems:
        raise Refused("refusing to move anything:\n  " + "\n  ".join(problems))
    return pending


def do_moves(root: Path, dry: bool) -> bool:
    pending = plan_moves(root)
    changed = False
    for old, new in pending:
        say(f"git mv {old} {new}")
        if not dry:
            (root / new).parent.mkdir(parents=True, exist_ok=True)
            git(root, "mv", old, new)
        changed = True
    for path, text in PACKAGES.items():
        if not (root / path).exists():
            say(f"new {path}")
            if not dry:
                (root / path).write_text(text)
                git(root, "add", path)
            changed = True
    if not pending:
        say("moves: every file is where it belongs already")
    return changed


def text_files(root: Path) -> list[Path]:
    listed = git(root, "ls-files", "-z", "--", *ROOTS, *TOP_FILES).split("\0")
    out = []
    for rel in listed:
        if not rel or rel in SKIP or "node_modules/" in rel:
            continue
        path = root / rel
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            out.append(path)
    return out


def rewrite_from(match: re.Match[str]) -> str:
    pkg, names = match["pkg"], match["names"].strip()
    inner = names[1:-1] if names.startswith("(") else names
    items = [i.strip() for i in inner.replace("\n", " ").split(",") if i.strip()]
    if not any(f"{pkg}.{i.split()[0]}" in MODULES for i in items):
        return match[0]
    groups: dict[str, list[str]] = {}
    for item in items:
        name, _, alias = (p.strip() for p in item.partition(" as "))
        target = MODULES.get(f"{pkg}.{name}")
        if target is None:
            groups.setdefault(pkg, []).append(item)
            continue
        new_pkg, _, new_name = target.rpartition(".")
        alias = alias or (name if new_name != name else "")
        groups.setdefault(new_pkg, []).append(f"{new_name} as {alias}" if alias else new_name)
    indent, trail = match["indent"], match["trail"] or ""
    lines = [f"{indent}from {p} import {', '.join(ns)}" for p, ns in groups.items()]
    lines[0] += trail
    return "\n".join(lines)


def rewrite(text: str, python: bool) -> str:
    if python:
        text = FROM_RE.sub(rewrite_from, text)
    text = DOTTED_RE.sub(lambda m: MODULES[m[1]], text)
    return PATH_RE.sub(lambda m: PATHS[m[1]], text)


# The contracts of main before the move: one in pyproject that is neither these nor in CONTRACTS
# was added meanwhile, and is named in a warning (the block is replaced whole).
OLD_CONTRACTS = {
    "the configuration file's module is at the bottom: it imports only roost.wire.errors, roost.wire.messages and roost.providers",
    "the configuration file's module is at the bottom: it imports only roost.broker.errors, roost.broker.messages and roost.providers",
    "the providers' names are near the bottom: roost.providers imports nothing of roost but the message types",
    "processes import downwards: hub -> node -> {supervisor, state, adapter host} -> runtime",
    "the broker and the provider adapters know nothing of roost's processes or its CLI",
    "the broker is the bottom: it imports none of roost's other packages",
    "the CLI talks to the node over the wire: it imports roost.broker, never the processes",
    "the configuration file's module is at the bottom: it imports only roost.broker.errors",
    "no import cycles between the modules of a package",
}


def replace_block(text: str, warnings: list[str]) -> str:
    """pyproject: from ``[tool.importlinter]`` to the next table of another tool (or the end)."""
    start = text.find("[tool.importlinter]\n")
    if start < 0:
        raise Refused("pyproject.toml has no [tool.importlinter] table")
    end = len(text)
    for m in re.finditer(r"^\[\[?([^\]]+)\]\]?\s*$", text[start:], re.MULTILINE):
        if not m[1].startswith("tool.importlinter"):
            end = start + m.start()
            # keep the comment lines that introduce the next table with it
            while True:
                prev = text.rfind("\n", start, end - 1)
                line = text[prev + 1 : end]
                if prev < 0 or not (line.startswith("#") or line.strip() == ""):
                    break
                end = prev + 1
            break
    known = OLD_CONTRACTS | set(re.findall(r'^name = "(.*)"$', CONTRACTS, re.M))
    for name in re.findall(r'^name = "(.*)"$', text[start:end], re.M):
        if name not in known:
            warnings.append(f"pyproject.toml: contract {name!r} dropped: add it to CONTRACTS")
    tail = text[end:]
    return text[:start] + CONTRACTS + ("\n" + tail.lstrip("\n") if tail.strip() else "")


def arch_sections(root: Path) -> dict[str, str]:
    src = (root / "tools/relayout.arch.md").read_text()
    sections: dict[str, str] = {}
    for m in re.finditer(r"^<!-- section: (\w+) -->\n(.*?)(?=^<!-- |\Z)", src, re.M | re.S):
        sections[m[1]] = m[2].strip("\n") + "\n"
    return sections


def replace_paragraph(text: str, old_start: str, new_start: str, new: str) -> tuple[str, bool]:
    """The paragraph (up to a blank line) beginning ``old_start`` replaced by ``new``; once done,
    as many paragraphs as ``new`` holds, beginning ``new_start``, replaced by it again (an edit
    of tools/relayout.arch.md carried over). False when neither is found."""
    if new in text:
        return text, True
    for begin, paragraphs in ((old_start, 1), (new_start, new.count("\n\n") + 1)):
        at = text.find(begin)
        if at >= 0 and (at == 0 or text[at - 1] == "\n"):
            end = at
            for _ in range(paragraphs):
                end = text.find("\n\n", end + 1)
                if end < 0:
                    break
            end = len(text) if end < 0 else end + 1
            return text[:at] + new + text[end:], True
    return text, False


def special_edits(root: Path, rel: str, text: str, warnings: list[str]) -> str:
    if rel == "pyproject.toml":
        text = replace_block(text, warnings)
    if rel == "tests/unit/test_layers.py" and LAYERS_MARK not in text:
        if LAYERS_ANCHOR in text:
            text = text.replace(LAYERS_ANCHOR, LAYERS_CASES + LAYERS_ANCHOR, 1)
        else:
            warnings.append(f"{rel}: no line {LAYERS_ANCHOR.strip()!r}: add LAYERS_CASES by hand")
    if rel == ARCH:
        sections = arch_sections(root)
        for name, old_start, new_start in ARCH_PARAGRAPHS:
            text, found = replace_paragraph(text, old_start, new_start, sections[name])
            if not found:
                warnings.append(f"{rel}: no paragraph {old_start!r}: section {name!r} by hand")
    for path, old, new in LITERALS:
        if rel == path and new not in text:
            if old in text:
                text = text.replace(old, new)
            else:
                warnings.append(f"{rel}: phrase not found, not changed: {old!r}")
    return text


def do_rewrite(root: Path, dry: bool, ruff: str | None) -> list[str]:
    warnings: list[str] = []
    changed: list[str] = []
    for path in text_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            before = path.read_text()
        except UnicodeDecodeError:
            continue
        after = rewrite(before, python=path.suffix in (".py", ".pyi"))
        after = special_edits(root, rel, after, warnings)
        if after != before:
            changed.append(rel)
            if not dry:
                path.write_text(after)
    for rel, doc in DOCSTRINGS.items():
        path = root / rel
        if path.exists() and not path.read_text().strip():
            changed.append(rel)
            if not dry:
                path.write_text(doc)
    for rel in changed:
        say(f"rewrote {rel}")
    if not changed:
        say("rewrite: no file names an old module or path")
    py = [rel for rel in changed if rel.endswith(".py")]
    if py and not dry:
        if ruff is None:
            warnings.append("ruff not found: run ruff check --fix --select I and ruff format")
        else:
            subprocess.run([ruff, "check", "--fix", "--select", "I", "-q", *py], cwd=root)
            subprocess.run([ruff, "format", "-q", *py], cwd=root, check=True)
            say(f"ruff: imports sorted and formatted in {len(py)} files")
    leftovers = [
        f"{p.relative_to(root).as_posix()}:{n}: {line.strip()}"
        for p in text_files(root)
        if p.suffix in (".py", ".toml", "")
        for n, line in enumerate(_lines(p), 1)
        if LEFTOVER_RE.search(line)
    ]
    if leftovers and not dry:
        warnings.append("still naming a moved module:\n    " + "\n    ".join(leftovers))
    return warnings


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except UnicodeDecodeError:
        return []


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A", "--", *ROOTS, *TOP_FILES)
    if subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=root).returncode == 0:
        say(f"nothing to commit for {message.splitlines()[0]!r}")
        return
    git(root, "commit", "-q", "-m", message)
    say(f"committed {git(root, 'log', '-1', '--format=%h %s').strip()}")


def find_ruff(root: Path, given: str | None) -> str | None:
    if given:
        return given
    local = root / ".venv" / "bin" / "ruff"
    return str(local) if local.exists() else shutil.which("ruff")


MOVE_MESSAGE = """\
relayout, move only: roost/broker split into roost/wire, roost/client, roost/client/fast

The wire format to roost/wire, the client to roost/client (roost ls's fast path in
roost/client/fast), the router stays in roost/broker; roost/actors/adapters.py is
roost/actors/adapter_host.py; roost/broker/interpreter.py is roost/interpreter.py.
Pure git mv (and the new packages' __init__.py): the imports are fixed by the next commit, so
this tree does not import. Made by tools/relayout.py.
"""
REWRITE_MESSAGE = """\
relayout: imports follow the move

Every import, dotted module name and path of a moved module rewritten; the import-linter
contracts of the new layout (the wire at the bottom, the fast path importing nothing heavy, the
client knowing nothing of the router), with test_layers' cases that break them; the module map
of docs/ARCHITECTURE.md.

Made by tools/relayout.py (rewrite of every dotted name and path, ruff's import sort and format).
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--commit", action="store_true", help="commit each step (tree must be clean)")
    ap.add_argument("--check", action="store_true", help="say what would be done; change nothing")
    ap.add_argument("--ruff", help="the ruff to run (default: .venv/bin/ruff, else on PATH)")
    ap.add_argument("--root", help="the checkout (default: the one holding the working directory)")
    args = ap.parse_args(argv)
    try:
        start = Path(args.root or ".").resolve()
        root = Path(git(start, "rev-parse", "--show-toplevel").strip())
        if args.commit and git(root, "status", "--porcelain", "--untracked-files=no").strip():
            raise Refused("--commit wants a clean tree (commit or stash your changes first)")
        if not (root / "tools/relayout.arch.md").exists():
            raise Refused("tools/relayout.arch.md is missing (it comes with this script)")
        moved = do_moves(root, args.check)
        if args.commit and moved:
            commit(root, MOVE_MESSAGE)
        warnings = do_rewrite(root, args.check, find_ruff(root, args.ruff))
        if args.commit and not args.check:
            commit(root, REWRITE_MESSAGE)
    except Refused as e:
        say(str(e))
        return 2
    for w in warnings:
        say(f"WARNING: {w}")
    say("done" + (" (nothing changed: --check)" if args.check else ""))
    return 1 if warnings else 0


if __name__ == "__main__":
    sys.exit(main())
