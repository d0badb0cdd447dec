#!/usr/bin/env python3
"""check_layers.py: the layer rule of docs/architecture.md, checked over the sources (run by ctest as check_layers).

Each folder is a layer and may use only its own layer and those below it:
    include < base < kernels < engine = envs < agents < train < tools = bindings
(tests/ and bench/ may use anything and are not checked). Three checks:
  (a) includes: every #include "..." of a checked folder resolves (the including file's folder first, then the
      library's include path, as the compiler searches) to a file of the same or a lower layer;
  (b) calls: no file of a checked folder names a function that only a higher layer defines. The functions a
      layer defines are the non-static definitions at column 0 of its .c and .cu files; a file's identifiers are
      read with comments and strings removed, leaving out member names (after . or ->). include/rltrain.h, the
      public API, declares functions of every layer and is left out of this check. Known exceptions are
      listed in EXCEPTIONS below, each with its reason;
  (c) the backend table: the number of function pointers in struct rlt_backend_ops (kernels/backend.h) equals
      the number docs/architecture.md states ("N ops" in its section "## The backend table") and is under
      MAX_OPS.
Usage: check_layers.py [ROOT] (default: the repository holding this script). Exit 0 when every check passes,
1 with one line per violation otherwise. check_layers.py --self-test runs the checks on a small tree with known
violations and fails unless it finds exactly those. Python 3 standard library only.
"""
import os
import re
import sys

LAYERS = {"include": 0, "base": 1, "kernels": 2, "engine": 3, "envs": 3, "agents": 4, "train": 5, "tools": 6,
          "bindings": 6}
CHECKED = ["include", "base", "kernels", "engine", "envs", "agents", "train", "tools", "bindings"]
# Where a quoted include is looked for after the including file's own folder (CMakeLists.txt, rltrain_obj's
# include directories, in their order; the CUDA module's are a subset of them).
INCLUDE_PATH = ["include", "base", "kernels", "engine", "agents", "train", "."]
SOURCE_EXT = (".c", ".cu")
SCANNED_EXT = (".c", ".cu", ".h", ".cuh")
MAX_OPS = 40  # the table stays under this many function pointers (issue 36)

# name -> reason: a function a lower layer may name although only a higher layer defines it. Keep it short;
# every entry is a debt to pay back by moving the function down. Empty now: the optimiser-step services the
# algorithms call (agent_fetch, agent_put, agent_grads_ready, agent_amp_update, agent_refresh_lp, agent_key_text;
# agent_run_update is an inline of engine/agent_core.h) moved from train/agent.c to engine/agent_core.c.
EXCEPTIONS = {
}

NAME_RE = re.compile(r"[A-Za-z_]\w*")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A definition's head at column 0: a return type, then the name and its opening parenthesis.
# Read after strip_code, which blanks the "C" of extern "C" to " ".
DEF_HEAD_RE = re.compile(r'^(?!static\b|typedef\b|struct\b|enum\b|union\b|return\b|else\b|extern\s+"\s*"\s*\{)'
                         r'(?:__attribute__\s*\(\(.*?\)\)\s*)?(?:extern\s+"\s*"\s+)?'
                         r'[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(', re.M)


def strip_code(text):
    """The text with comments, string and character literals blanked (newlines kept, so offsets stay lines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def layer_of(root, path):
    rel = os.path.relpath(path, root)
    top = rel.split(os.sep)[0]
    if top in LAYERS:
        return top, LAYERS[top]
    if top in ("tests", "bench", "examples"):
        return top, 99  # may use anything, so nothing below may use them
    return top, None


def walk(root, folders, exts):
    for folder in folders:
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(exts):
                    yield os.path.join(dirpath, f)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def resolve(root, path, name):
    for d in [os.path.dirname(path)] + [os.path.join(root, p) for p in INCLUDE_PATH]:
        cand = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(cand):
            return cand
    return None


def check_includes(root, problems):
    for path in walk(root, CHECKED, SCANNED_EXT):
        folder, rank = layer_of(root, path)
        text = read(path)
        for m in INCLUDE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            target = resolve(root, path, m.group(1))
            rel = os.path.relpath(path, root)
            if target is None:
                problems.append('%s:%d: #include "%s" resolves to no file of the tree' % (rel, line, m.group(1)))
                continue
            tfolder, trank = layer_of(root, target)
            if trank is None or trank > rank:
                problems.append('%s:%d: #include "%s" is %s, a layer above %s/' %
                                (rel, line, m.group(1), os.path.relpath(target, root), folder))


def definitions(text):
    """Names of the non-static functions a .c/.cu file defines at column 0."""
    code = strip_code(text)
    names = set()
    for m in DEF_HEAD_RE.finditer(code):
        head = code[m.start():m.end()]
        if "=" in head or "#" in head:
            continue
        # Match the parameter list's parentheses, then require a body: '{' after it (a prototype ends in ';').
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        rest = code[j:j + 200].lstrip()
        rest = re.sub(r"^(__attribute__\s*\(\(.*?\)\)\s*)+", "", rest)
        if rest.startswith("{"):
            names.add(m.group(1))
    return names


def check_calls(root, problems):
    defined = {}  # name -> lowest layer rank that defines it
    where = {}
    for path in walk(root, CHECKED, SOURCE_EXT):
        _, rank = layer_of(root, path)
        for name in definitions(read(path)):
            if name not in defined or rank < defined[name]:
                defined[name] = rank
                where[name] = os.path.relpath(path, root)
    # include/rltrain.h is the public API: it declares what every layer defines, and calls nothing.
    for path in walk(root, [f for f in CHECKED if f != "include"], SCANNED_EXT):
        folder, rank = layer_of(root, path)
        code = strip_code(read(path))
        own = definitions(read(path)) if path.endswith(SOURCE_EXT) else set()
        seen = set()
        for m in NAME_RE.finditer(code):
            name = m.group(0)
            if name in seen or name in own or defined.get(name, -1) <= rank:
                continue
            before = code[max(0, m.start() - 2):m.start()].rstrip()
            if before.endswith(".") or before.endswith("->"):
                continue
            seen.add(name)
            if name in EXCEPTIONS:
                continue
            line = code.count("\n", 0, m.start()) + 1
            problems.append("%s:%d: %s is defined only in %s, a layer above %s/" %
                            (os.path.relpath(path, root), line, name, where[name], folder))


def check_table(root, problems):
    header = read(os.path.join(root, "kernels", "backend.h"))
    m = re.search(r"typedef struct rlt_backend_ops \{(.*?)\} rlt_backend_ops;", strip_code(header), re.S)
    if not m:
        problems.append("kernels/backend.h: struct rlt_backend_ops not found")
        return
    ops = len(re.findall(r"\(\s*\*\s*\w+\s*\)\s*\(", m.group(1)))
    doc = read(os.path.join(root, "docs", "architecture.md"))
    # The count is stated in the section about the table, "## The backend table ...", up to the next heading.
    sec = re.search(r"^## The backend table.*?(?=^## |\Z)", doc, re.S | re.M)
    stated = [int(x) for x in re.findall(r"\b(\d+) ops\b", sec.group(0))] if sec else []
    if not stated:
        problems.append('docs/architecture.md: its section "## The backend table" states no op count ("N ops"); '
                        "the table has %d" % ops)
    for s in stated:
        if s != ops:
            problems.append("docs/architecture.md: says %d ops, but struct rlt_backend_ops in kernels/backend.h has "
                            "%d function pointers" % (s, ops))
    if ops >= MAX_OPS:
        problems.append("kernels/backend.h: struct rlt_backend_ops has %d function pointers; keep it under %d (fold "
                        "new work into an existing op's mode or descriptor)" % (ops, MAX_OPS))
    return ops


def run_checks(root):
    problems = []
    check_includes(root, problems)
    check_calls(root, problems)
    ops = check_table(root, problems)
    return problems, ops


SELF_TEST_TREE = {
    "include/rltrain.h": "int rlt_public(void);\n",
    "base/b.c": '#include "k.h"\n#include "rltrain.h"\n/* train_fn() in a comment is fine */\n'
                'int base_fn(struct s *p) { static const char *t = "train_fn()"; return train_fn() + p->train_fn + '
                'hidden(); }\n',
    "kernels/k.h": "int kernel_fn(void);\n",
    "kernels/backend.h": "typedef struct rlt_backend_ops {\n    int (*one)(int a);\n    /* (*not)(an op) */\n"
                         "    void (*two)(void);\n} rlt_backend_ops;\n",
    "engine/e.c": '#include "k.h"\n#include "../base/missing.h"\nint engine_fn(void) { return kernel_fn(); }\n',
    "train/t.c": 'static int hidden(void) { return 1; }\nint\ntrain_fn(void) { return hidden(); }\n'
                 'extern "C" int train_cu(int (*f)(void)) { return f(); }\n',
    "tests/x.c": '#include "t.c"\nint main(void) { return train_fn(); }\n',
    "docs/architecture.md": "# A\n\n12 ops elsewhere.\n\n## The backend table\n\nIt has 2 ops.\n\n## Next\n",
}


def self_test():
    """The checks on a small tree with known violations: each is found, and nothing else."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for rel, text in SELF_TEST_TREE.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)
        problems, ops = run_checks(root)
        want = ['base/b.c:1: #include "k.h" is kernels/k.h, a layer above base/',
                'engine/e.c:2: #include "../base/missing.h" resolves to no file of the tree',
                "base/b.c:4: train_fn is defined only in train/t.c, a layer above base/"]
        bad = [p for p in want if p not in problems] + ["unexpected: " + p for p in problems if p not in want]
        if ops != 2:
            bad.append("counted %s ops, want 2" % ops)
        with open(os.path.join(root, "docs", "architecture.md"), "w") as fh:
            fh.write("## The backend table\n\n3 ops.\n")
        problems, _ = run_checks(root)
        if not any("says 3 ops" in p for p in problems):
            bad.append("a wrong op count in docs/architecture.md was not reported")
    for b in bad:
        print("check_layers self-test: " + b)
    print("check_layers self-test: %s" % ("failed" if bad else "passed"))
    return 1 if bad else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems, ops = run_checks(root)
    if problems:
        print("check_layers: %d violation(s) of the layer rule (docs/architecture.md):" % len(problems))
        for p in problems:
            print("  " + p)
        return 1
    print("check_layers: includes and calls go downward only; the backend table has %d ops" % ops)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
