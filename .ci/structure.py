#!/usr/bin/env python3
"""Checks the shape of Sources/ that review alone would let drift (issue 24).

1. No function, initializer or closure-bodied declaration in Sources/ is longer than
   MAX_LINES lines, from its declaration to its closing brace.
2. The folders of Sources/Cairn (one per stage) keep their layering: folder A depends on folder
   B when a file in A names a type declared at the top level of a file in B, and B must stand
   below A in LAYERS (the order of the Design article). A folder missing from LAYERS, an edge
   upwards and a cycle are errors. `--graph` prints the graph.
3. Nothing in Sources/, Tests/, Spec/, Benchmarks/ or README.md cites a DESIGN.md or a path
   outside the repository: the repository stands alone.

Usage: python3 .ci/structure.py [--graph]   (exit 1 naming each violation)
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MAX_LINES = 120
CORE = os.path.join(ROOT, "Sources", "Cairn")
# Bottom to top, as Sources/Cairn/Cairn.docc/Design.md lists them: a folder may name types of
# the folders before it only.
LAYERS = ["Errors", "Progress", "Hashing", "Trust", "Chunking", "Compression", "Format", "IO", "Database",
          "Remote", "Location", "Reading", "Archiving", "Fetch"]


def swift_files(top):
    for directory, _, names in os.walk(top):
        for name in sorted(names):
            if name.endswith(".swift"):
                yield os.path.join(directory, name)


def code_only(text):
    """The text with comments and string literals blanked (newlines kept), so braces and
    identifiers are counted only in code."""
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
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = skip_string(text, i)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_string(text, i):
    """The index just past the string literal starting at text[i] (plain, raw #"…"# not used
    here, or multi-line), skipping escapes and interpolations."""
    n = len(text)
    triple = text.startswith('"""', i)
    quote = '"""' if triple else '"'
    j = i + len(quote)
    while j < n:
        if text[j] == "\\":
            if j + 1 < n and text[j + 1] == "(":
                depth, j = 1, j + 2
                while j < n and depth:
                    if text[j] == '"':
                        j = skip_string(text, j)
                        continue
                    depth += {"(": 1, ")": -1}.get(text[j], 0)
                    j += 1
                continue
            j += 2
            continue
        if text.startswith(quote, j):
            return j + len(quote)
        if not triple and text[j] == "\n":
            return j
        j += 1
    return n


DECLARATION = re.compile(
    r"(?<![\w.])(func\s+[\w`]+|init[?!]?\s*[(<]|deinit\b|subscript\s*[(<])"
)


def long_functions(path):
    text = code_only(open(path, encoding="utf-8").read())
    problems = []
    for match in DECLARATION.finditer(text):
        start = match.start()
        # The body opens at the first "{" after the signature at paren depth 0; a protocol
        # requirement (no body) ends at a newline before any "{" at depth 0.
        depth, j = 0, match.end()
        body = None
        while j < len(text):
            ch = text[j]
            if ch in "([<":
                depth += 1
            elif ch in ")]>":
                depth = max(0, depth - 1)
            elif ch == "{" and depth == 0:
                body = j
                break
            elif ch == "}" and depth == 0:
                break
            j += 1
        if body is None:
            continue
        between = text[match.end():body]
        if re.search(r"\n\s*(public |package |private |internal |func |var |let |case |@)", between):
            continue  # a requirement without a body, followed by another declaration
        level, k = 0, body
        while k < len(text):
            if text[k] == "{":
                level += 1
            elif text[k] == "}":
                level -= 1
                if level == 0:
                    break
            k += 1
        first = text.count("\n", 0, start) + 1
        last = text.count("\n", 0, k) + 1
        length = last - first + 1
        if length > MAX_LINES:
            name = match.group(1).strip()
            problems.append(f"{os.path.relpath(path, ROOT)}:{first}: {name} is {length} lines (limit {MAX_LINES})")
    return problems


TOP_TYPE = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|indirect|nonisolated)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias)\s+(\w+)",
    re.M,
)
IDENTIFIER = re.compile(r"\b[A-Z]\w*\b")


def folder_graph():
    folders = sorted(d for d in os.listdir(CORE) if os.path.isdir(os.path.join(CORE, d)) and not d.endswith(".docc"))
    owner = {}
    code = {}
    for folder in folders:
        for path in swift_files(os.path.join(CORE, folder)):
            text = code_only(open(path, encoding="utf-8").read())
            code[path] = (folder, text)
            for name in TOP_TYPE.findall(text):
                owner.setdefault(name, folder)
    edges = {folder: {} for folder in folders}
    for path, (folder, text) in code.items():
        for name in set(IDENTIFIER.findall(text)):
            target = owner.get(name)
            if target and target != folder:
                edges[folder].setdefault(target, set()).add(f"{os.path.basename(path)} → {name}")
    return folders, edges


def cycles(folders, edges):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for folder in folders:
        if folder not in index:
            visit(folder)
    return found


CITATION = re.compile(r"DESIGN\.md|/work/|\.\./shared/")


def citations():
    problems = []
    tops = ["Sources", "Tests", "Spec", "Benchmarks"]
    paths = [os.path.join(ROOT, "README.md")]
    for top in tops:
        for directory, _, names in os.walk(os.path.join(ROOT, top)):
            if os.sep + "results" in directory or "Fixtures" in directory:
                continue  # recorded benchmark output and test fixtures are data, not citations
            for name in names:
                if name.endswith((".swift", ".md", ".py", ".txt")):
                    paths.append(os.path.join(directory, name))
    for path in paths:
        for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            if CITATION.search(line) and "structure.py" not in path:
                problems.append(f"{os.path.relpath(path, ROOT)}:{number}: cites something outside the repository: {line.strip()[:100]}")
    return problems


def main():
    problems = []
    for top in ("Sources", "Benchmarks/CairnBench"):
        for path in swift_files(os.path.join(ROOT, top)):
            problems += long_functions(path)
    folders, edges = folder_graph()
    if "--graph" in sys.argv:
        for folder in folders:
            print(f"{folder} → {', '.join(sorted(edges[folder])) or '(nothing)'}")
            if "-v" in sys.argv:
                for target in sorted(edges[folder]):
                    print(f"    {target}: {', '.join(sorted(edges[folder][target])[:6])}")
    for component in cycles(folders, edges):
        detail = "; ".join(
            f"{a} → {b} ({sorted(edges[a][b])[0]})" for a in component for b in component if b in edges[a]
        )
        problems.append(f"Sources/Cairn folders depend on each other in a cycle: {', '.join(component)}: {detail}")
    for folder in folders:
        if folder not in LAYERS:
            problems.append(f"Sources/Cairn/{folder}/ is not in .ci/structure.py's LAYERS (and the Design article's list)")
            continue
        for target in sorted(edges[folder]):
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(folder):
                problems.append(
                    f"Sources/Cairn/{folder}/ depends on {target}/, which stands above it "
                    f"({sorted(edges[folder][target])[0]}): move the type down or the code up")
    problems += citations()
    for problem in problems:
        print(problem)
    if problems:
        print(f"structure: {len(problems)} problem(s)")
        return 1
    print(f"structure: no function over {MAX_LINES} lines, {len(folders)} folders layered with no edge upwards or cycle, no outside citation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
