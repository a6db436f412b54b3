"""Sphinx configuration of streamfit's documentation.

Modelled on scikit-learn's doc/conf.py: numpydoc for the docstrings,
autosummary for the API pages, sphinx-gallery for the examples (run on every
build, their figures drawn by it), pydata-sphinx-theme; myst-parser for the
Markdown pages. Built with warnings as errors and nitpicky references:

    sphinx-build -W -b html docs docs/_build/html
"""
import os
import pathlib
import re
import sys
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import bench_tables  # noqa: E402
import pxd_reference  # noqa: E402

import streamfit  # noqa: E402

# -- project -------------------------------------------------------------------
project = "streamfit"
author = "the streamfit developers"
copyright = "2026, the streamfit developers"
release = streamfit.__version__
version = ".".join(release.split(".")[:2])

# -- extensions ----------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/sg_execution_times.rst",
                    "cython/_generated/*", "benchmarks/_generated/*", "auto_examples/*.ipynb",
                    "examples/README.rst", "examples/GALLERY_HEADER.rst"]
language = "en"

# -- references: no network, so no intersphinx; every reference to our own
# names must resolve (nitpicky), external names are listed as known ----------
nitpicky = True
nitpick_ignore_regex = [
    # other projects' names, reachable only through intersphinx (no network here)
    (r"py:.*", r"(numpy|np|scipy|sklearn|dask|distributed|pandas|joblib|threadpoolctl|"
               r"river)(\..*)?"),
    # the main job's experiment modules are not part of the library's API
    (r"py:.*", r"streamfit\.experiments(\..*)?"),
    # builtins and typing words numpydoc or docstrings use as types
    (r"py:.*", r"(array-like|array_like|ndarray|optional|default|callable|None|int|float|"
               r"bool|str|tuple|list|dict|object|Generator|BitGenerator|SeedSequence)"),
]

# -- autodoc / autosummary / numpydoc ------------------------------------------
autosummary_generate = True
autosummary_generate_overwrite = True
autodoc_typehints = "none"
autodoc_inherit_docstrings = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# numpydoc's own docstring validation stays off: the public docstrings keep
# their current sections until the API's names settle

# -- sphinx-gallery -------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "doc_module": ("streamfit",),
    "backreferences_dir": "api/generated/backreferences",
    "reference_url": {"streamfit": None},
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "plot_gallery": "True",
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "min_reported_time": 1,
}
# the examples draw with matplotlib's non-interactive backend
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", category=UserWarning,
                        message="Matplotlib is currently using agg")

# -- myst ----------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# -- html ----------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"streamfit {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the wide pages (tables, long signatures) get the secondary sidebar's room
    "secondary_sidebar_items": {"**": ["page-toc"], "user_guide/benchmarks": [],
                                "cython": []},
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_static_path = []
html_show_sourcelink = False
# the page contents list an object's name, not Class.attribute (as scikit-learn)
toc_object_entries_show_parents = "hide"


_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$', flags=re.M)


def _report_anchors(app, docname, source):
    # the report's own HTML anchors (it is also read on GitHub) as MyST
    # targets, so that its table of contents links resolve in the site
    if docname == "report":
        source[0] = _ANCHOR.sub(r"(\1)=", source[0])


# Docstring text that docutils would read as markup: a word ending in "_" (an
# attribute name such as coef_) is a reference to a target, and |x| a
# substitution. Until the public docstrings are revised (they keep their text
# while the names settle), such words are shown as literals and bars escaped.
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w:*<])([A-Za-z][\w.]*_)(?=[\s,.;:!?)\]'\"/-]|$)")
_BARS = re.compile(r"(?<![\\`])\|")


def _escape_docstring_markup(app, what, name, obj, options, lines):
    literal = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if literal:
            if stripped and not line.startswith((" ", "\t")):
                literal = False
            else:
                continue
        if stripped.startswith((">>>", "...")) or stripped.startswith(".. "):
            continue
        if stripped.endswith("::"):
            literal = True
        parts = re.split(r"(``.*?``|`[^`]*`)", line)    # leave literals and roles alone
        for j in range(0, len(parts), 2):
            parts[j] = _TRAILING_UNDERSCORE.sub(r"\\ ``\1``\\ ", parts[j])
            parts[j] = _BARS.sub(r"\\|", parts[j])
        lines[i] = "".join(parts)


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's own members (get_params, set_output, the metadata-routing
    # set_*_request methods, ...) are documented by scikit-learn
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("sklearn") or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def _generate_cython_reference(app):
    pxd_reference.generate(HERE.parent / "src" / "streamfit" / "cython",
                           HERE / "cython" / "_generated")
    bench_tables.generate(HERE / "benchmarks", HERE / "benchmarks" / "_generated")


def setup(app):
    app.connect("builder-inited", _generate_cython_reference)
    app.connect("source-read", _report_anchors)
    app.connect("autodoc-process-docstring", _escape_docstring_markup)
    app.connect("autodoc-skip-member", _skip_member)
