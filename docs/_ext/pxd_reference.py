"""Generate the Cython API reference from the shipped ``.pxd`` files.

Every ``.pxd`` of the Cython API (``src/streamfit/cython/*.pxd``, cimported
as ``streamfit.cython.<module>``) gets a section: its header comment (the
module's contract: layouts, triangles, ownership), then every top-level
declaration -- ``ctypedef struct``, ``cdef enum`` and the functions -- with
the comment lines that follow its signature (the function's contract). Names
starting with an underscore are left out. The page is regenerated on every
build, so it cannot drift from the declarations.
"""
from __future__ import annotations

import pathlib
import re

START = re.compile(r"^(cdef|ctypedef|cpdef)\b")
NAME = re.compile(r"^(?:cdef|ctypedef|cpdef)\s+(?:inline\s+|extern\s+|enum\s*|struct\s+|packed\s+)*"
                  r"(?:(?:const\s+)?[\w\.\*\[\] ]+?\s+\**)?(\w+)\s*[\(:]")


def _header(lines):
    out = []
    for line in lines:
        if line.startswith("#"):
            out.append(line[1:].removeprefix(" "))
        elif line.strip() == "" and not out:
            continue
        else:
            break
    return out


def _blocks(lines):
    """Top-level declarations: (signature and body lines kept, name)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not START.match(line):
            i += 1
            continue
        decl = [line]
        j = i + 1
        # a signature continued over several lines
        while not decl[-1].rstrip().endswith(":") and j < len(lines) and lines[j].startswith(" "):
            decl.append(lines[j])
            j += 1
        body = []
        while j < len(lines) and (lines[j].startswith((" ", "\t")) or lines[j].strip() == ""):
            body.append(lines[j])
            j += 1
        head = line.split()[1] if len(line.split()) > 1 else ""
        if line.startswith("ctypedef") or head in ("enum", "extern", "struct") or \
                line.rstrip().endswith("enum:"):
            kept = body                          # a type's fields, an extern's names
        else:
            kept = []                            # a function: its contract comment only
            for b in body:
                if b.strip().startswith("#"):
                    kept.append(b)
                elif b.strip() == "" and not kept:
                    continue
                else:
                    break
        while kept and kept[-1].strip() == "":
            kept.pop()
        m = NAME.match(" ".join(s.strip() for s in decl))
        name = m.group(1) if m else ""
        yield decl + kept, name
        i = j


def render(path: pathlib.Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    title = f"``streamfit.cython.{path.stem}``"
    out = [title, "^" * len(title), ""]
    header = _header(lines)
    if header:
        out += [".. code-block:: none", ""] + ["   " + h for h in header] + [""]
    cimports, open_paren = [], False
    for l in lines:
        if l.startswith(("from ", "cimport ")) or open_paren:
            cimports.append(l)
            open_paren = (open_paren or "(" in l) and ")" not in l
    if cimports:
        out += ["It cimports:", "", ".. code-block:: cython", ""]
        out += ["   " + l for l in cimports] + [""]
    decls = [(d, n) for d, n in _blocks(lines) if not n.startswith("_")]
    if decls:
        out += ["Declarations:", ""]
        for decl, _ in decls:
            out += [".. code-block:: cython", ""] + ["   " + d if d.strip() else "" for d in decl]
            out += [""]
    return "\n".join(out) + "\n"


def generate(api: pathlib.Path, dest: pathlib.Path) -> list[str]:
    """One page, ``public.rst``, from the ``.pxd`` files in ``api``."""
    dest.mkdir(parents=True, exist_ok=True)
    # common first: the others cimport its codes
    pxds = sorted(api.glob("*.pxd"), key=lambda p: (p.stem != "common", p.stem))
    text = "".join(render(p) + "\n" for p in pxds)
    target = dest / "public.rst"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return [p.stem for p in pxds]
