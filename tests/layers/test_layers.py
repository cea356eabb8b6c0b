#!/usr/bin/env python3
"""The layers of libnanosrv/src depend on each other in one direction only
(docs/INTERNALS.md): an #include of another layer's header, or a call of a
function another layer defines, must go downwards. Fails naming the file,
the line and the edge that goes the wrong way."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SRC = os.path.join(ROOT, "libnanosrv", "src")

# Files that are the base every layer may use: allocation, error names and
# details, versions, event readers, utilities.
BASE_FILES = {"internal.h", "core/alloc.c", "core/error.c", "core/detail.c", "core/version.c",
              "core/event_access.c"}

# layer -> layers it may use (besides itself and base)
ALLOWED = {
    "base": set(),
    "tls": {"loop"},     # the transport under the loop: it sees connections
    "loop": {"tls"},
    "router": set(),
    "http": {"loop", "tls", "router"},   # http/ and ws/: WebSocket is HTTP's upgrade
    "net": {"loop", "tls"},
    "h2": {"loop", "tls", "http", "router"},  # HTTP/2 sessions: streams are HTTP/1 virtual connections
    "core": {"loop", "tls", "router", "http", "net", "h2"},
}
# The one type-only include of a higher layer: the chunked decoder state an
# HTTP connection keeps in its record (loop/loop.h). No http/ function is called.
EXCEPTIONS = {("loop/loop.h", "http/parse.h"),
              # details are kept per server: detail.c reads the server's serial
              ("core/detail.c", "loop/loop.h")}


def layer_of(rel):
    if rel in BASE_FILES or rel.startswith("util/"):
        return "base"
    top = rel.split("/")[0]
    return {"ws": "http"}.get(top, top)


def sources():
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), SRC)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(nsv__\w+)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b(nsv__\w+)\s*\(")


def main():
    texts = {rel: strip_comments(open(os.path.join(SRC, rel)).read()) for rel in sources()}
    defined = {}
    for rel, text in texts.items():
        if rel.endswith(".c"):
            for m in DEF.finditer(text):
                defined.setdefault(m.group(1), rel)
    n = 0
    bad = 0
    for rel, text in sorted(texts.items()):
        me = layer_of(rel)
        ok_layers = ALLOWED[me] | {me, "base"}
        problems = []
        for i, line in enumerate(text.split("\n"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
                if target.startswith(".."):  # the public header
                    continue
                if not os.path.exists(os.path.join(SRC, target)):
                    target = os.path.normpath(m.group(1))  # -Ilibnanosrv/src style
                tl = layer_of(target)
                if tl not in ok_layers and (rel, target) not in EXCEPTIONS:
                    problems.append(f"{rel}:{i}: includes {target} ({me} -> {tl})")
                continue
            for c in CALL.finditer(line):
                where = defined.get(c.group(1))
                if where and layer_of(where) not in ok_layers:
                    problems.append(f"{rel}:{i}: calls {c.group(1)} of {where} ({me} -> {layer_of(where)})")
        n += 1
        if problems:
            bad += 1
            print(f"not ok {n} - {rel} ({me})")
            for p in problems:
                print(f"#   {p}")
        else:
            print(f"ok {n} - {rel} ({me})")
    # The check itself: it must see definitions and know every directory.
    n += 1
    known = all(layer_of(rel) in ALLOWED for rel in texts)
    print(f"{'ok' if known and len(defined) > 100 else 'not ok'} {n} - every file has a layer, "
          f"{len(defined)} internal functions found")
    print(f"1..{n}")
    return 1 if bad or not known else 0


if __name__ == "__main__":
    sys.exit(main())
