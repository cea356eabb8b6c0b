#!/usr/bin/env python3
"""One licence for the whole project: LICENSE at the root holds the MIT
text, every package's metadata (Python, Node, Lua) declares MIT, and no
README or document names another licence."""
import glob
import json
import os
import re
import sys
import tomllib

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
n = 0
failed = 0


def check(cond, name, why=""):
    global n, failed
    n += 1
    print(f"{'ok' if cond else 'not ok'} {n} - {name}")
    if not cond:
        failed += 1
        if why:
            print(f"#   {why}")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


lic_path = os.path.join(ROOT, "LICENSE")
check(os.path.isfile(lic_path), "LICENSE exists at the root")
lic = read("LICENSE") if os.path.isfile(lic_path) else ""
check(lic.startswith("MIT License\n"), "LICENSE is the MIT License", lic[:60])
check("Copyright (c) 2026 the libnanosrv authors" in lic, "LICENSE names the copyright holders")
check("Permission is hereby granted, free of charge" in lic and 'THE SOFTWARE IS PROVIDED "AS IS"' in lic,
      "LICENSE carries the whole MIT text")

with open(os.path.join(ROOT, "bindings/python-cffi/pyproject.toml"), "rb") as f:
    project = tomllib.load(f)["project"]
lic_field = project.get("license")
lic_text = lic_field.get("text") if isinstance(lic_field, dict) else lic_field
check(lic_text == "MIT", "pyproject.toml declares MIT", repr(lic_field))
check(all("MIT" in c for c in project.get("classifiers", []) if c.startswith("License ::")),
      "pyproject.toml classifiers name no other licence", repr(project.get("classifiers")))
setup_py = read("bindings/python-cffi/setup.py")
m = re.search(r"license\s*=\s*['\"]([^'\"]*)", setup_py)
check(m is None or m.group(1) == "MIT", "setup.py declares no other licence", m and m.group(0))

pkg = json.loads(read("bindings/node-ffi/package.json"))
check(pkg.get("license") == "MIT", "bindings/node-ffi/package.json declares MIT", repr(pkg.get("license")))

rocks = sorted(glob.glob(os.path.join(ROOT, "bindings/lua/*.rockspec")))
check(len(rocks) > 0, "a rockspec exists")
for r in rocks:
    with open(r, encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r'\blicense\s*=\s*"([^"]*)"', text)
    check(found == ["MIT"], f"{os.path.relpath(r, ROOT)} declares MIT", repr(found))

other = re.compile(r"\b(L?GPL|AGPL|Apache License|BSD[- ]\d|MPL|GNU General Public)", re.I)
docs = [p for p in glob.glob(os.path.join(ROOT, "**", "*.md"), recursive=True) if "node_modules" not in p]
docs += [os.path.join(ROOT, "bindings/python-cffi/pyproject.toml")]
bad = []
for p in docs:
    with open(p, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if other.search(line):
                bad.append(f"{os.path.relpath(p, ROOT)}:{i}: {line.strip()[:100]}")
check(not bad, "no README or document names another licence", "; ".join(bad[:5]))
readme = read("README.md")
check(re.search(r"^## License\n\nMIT", readme, re.M) is not None, "README.md states the licence")

print(f"1..{n}")
sys.exit(1 if failed else 0)
