"""Sphinx configuration of ppgpc's documentation site.

Build it strictly, from the repository root (the ``docs`` extra brings the tools):

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

and open ``docs/_build/html/index.html``. Every warning fails the build: a cross-reference
that resolves to nothing (nitpicky mode, ``-n``), bad reStructuredText in a docstring, a
documented object without a docstring (``warn_if_undocumented`` below), a page in no table
of contents. The notebooks are rendered from their committed outputs, never executed here.
"""

from __future__ import annotations

import inspect
import re
import shutil
from importlib.metadata import distribution
from pathlib import Path

import ppgpc
from sphinx.ext import napoleon
from sphinx.util import logging

logger = logging.getLogger("ppgpc.docs")

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

project = "ppgpc"
author = "the ppgpc authors"
copyright = "the ppgpc authors, MIT licence"
release = version = ppgpc.__version__

extensions = [
    "myst_nb",  # MyST Markdown pages and the notebooks (brings myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",  # the tables of names a package makes public from elsewhere
    "sphinx.ext.napoleon",  # the docstrings' Google-style sections (Args:, Returns:)
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

# docs/README.md is the repository's own map of docs/ (the site's index replaces it).
exclude_patterns = ["_build", "README.md", "**/.ipynb_checkpoints"]
root_doc = "index"

# --- strictness -----------------------------------------------------------------------------
nitpicky = True
# No intersphinx: the build runs where only package registries are reachable, so other
# projects' inventories cannot be fetched. Their names in signatures stay plain text; these
# are the third-party and standard-library packages whose types appear in ppgpc's signatures.
_NO_INVENTORY = ("jax", "jaxlib", "jaxtyping", "numpy", "np", "jnp", "numpyro", "optax",
                 "arviz", "arviz_base", "xarray", "xr", "pandas", "pd", "scipy", "sklearn",
                 "matplotlib", "tqdm", "h5py", "h5netcdf", "collections", "pathlib", "os",
                 "typing", "typing_extensions", "enum", "argparse", "concurrent", "threading",
                 "contextlib", "dataclasses", "io", "types", "warnings", "functools",
                 "numbers", "abc")
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(_NO_INVENTORY)})(\..*)?"),
    # the same types where a signature names them as imported (ArrayLike from numpy.typing,
    # matplotlib's Axes and Figure, pathlib's Path, ArviZ's ELPDData)
    (r"py:class", r"ArrayLike|Axes|Figure|Path|ELPDData"),
    # a private base class named by "Bases:"; private names have no page by design
    (r"py:class", r"ppgpc(\.\w+)*\._\w+"),
]

# --- autodoc and napoleon -------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True
# the estimators' fitted attributes, in a section napoleon reads as "Attributes:"
napoleon_custom_sections = [("Attributes every estimator has after fit", "Attributes")]
# Keep long signatures readable: one parameter a line past this many characters.
maximum_signature_line_length = 88
python_maximum_signature_line_length = 88


# ppgpc's docstrings are plain text that reads the same in help() and here:
#
# * ``code`` and `code` spans; |x| a norm, name_ a fitted attribute (scikit-learn's
#   convention), * a product. Those three characters are reStructuredText markup
#   (substitutions, references, emphasis), never meant as such in a docstring, so they are
#   escaped outside code spans, literal blocks and doctest examples;
# * a block indented under a paragraph, after a blank line, is preformatted: formulas and
#   commands, aligned by spaces (as in docs/math.md), shown as they are written.
#
# Everything else is parsed strictly: an unbalanced ``, a bad indentation or a section
# napoleon cannot read still fails the build.
default_role = "literal"  # `x` in a docstring is code, as ``x`` is
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_PLAIN_MARKUP = re.compile(r"(?<!\\)(\||(?<!^)\*|^\*(?! )|(?<=\w)_(?=\W|$))")
_SECTION = re.compile(r"^\w[\w ]*:$")  # a napoleon section: "Args:", "Returns:", ...
_ITEM = re.compile(r"^([*-]|\d+\.) ")


def _escape_plain(text: str) -> str:
    indent = text[:len(text) - len(text.lstrip())]  # a bullet's "* " stays a bullet
    parts = _CODE_SPAN.split(text.lstrip())
    return indent + "".join(part if i % 2 else _PLAIN_MARKUP.sub(r"\\\1", part)
                            for i, part in enumerate(parts))


def _mark_preformatted(lines: list[str]) -> list[str]:
    """Open a literal block ("::" alone) before each block indented under a top-level
    paragraph that is not a list item, a napoleon section or a doctest."""
    out, first = [], None  # first: the first line of the current top-level paragraph
    for i, line in enumerate(lines):
        previous = lines[i - 1] if i else ""
        if (line.startswith(" ") and line.strip() and not previous.strip() and i >= 2
                and lines[i - 2].strip() and not lines[i - 2].startswith(" ")
                and first is not None and not _ITEM.match(first)
                and not _SECTION.match(lines[i - 2]) and not lines[i - 2].endswith("::")
                and not line.lstrip().startswith(">>>")):
            out += ["::", ""]
        if line.strip() and not line.startswith(" ") and not previous.strip():
            first = line
        out.append(line)
    return out


def escape_plain_text(app, what, name, obj, options, lines):
    """Read a docstring by the plain-text conventions above."""
    lines[:] = _mark_preformatted(lines)
    literal_indent = None  # the indent of the paragraph that opened a literal block
    in_doctest = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        if stripped.startswith(">>>"):
            in_doctest = True
        if in_doctest:
            in_doctest = bool(stripped)
            continue
        lines[i] = _escape_plain(line)
        if stripped.endswith("::"):
            literal_indent = indent


def skip_foreign_methods(app, what, name, obj, skip, options):
    """An estimator's page lists the methods it inherits from ppgpc's classes, not
    scikit-learn's (``get_params``, ``set_params``, ``score``: scikit-learn documents them)."""
    function = getattr(obj, "fget", obj)
    module = getattr(function, "__module__", None) or ""
    if what == "class" and inspect.isroutine(function) and not module.startswith("ppgpc"):
        return True
    return None


def napoleon_sections_only(app, what, name, obj, options, lines):
    """Napoleon, reading a constant's or an attribute's docstring as any other.

    Napoleon takes the first line of such a docstring for Google style's ``type:
    description``; ppgpc's read "The fitted hyperparameters by name: ...", a sentence."""
    napoleon._process_docstring(app, "object" if what in ("data", "attribute", "property")
                                else what, name, obj, options, lines)


def warn_if_undocumented(app, what, name, obj, options, lines):
    """Fail the build (every warning does) for a documented object without a docstring of
    its own: a constant without one shows its type's (``dict``'s), so that counts as none."""
    if what not in ("module", "class", "exception", "function", "data"):
        return
    own = "\n".join(lines).strip()
    if what == "data" and own == inspect.cleandoc(type(obj).__doc__ or ""):
        own = ""
    if own:
        return
    lines[:] = ["*No docstring yet.*"]
    logger.warning("%s %s has no docstring", what, name, type="ppgpc", subtype="undocumented")


# --- MyST and MyST-NB -----------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the notebooks' committed outputs, as run at full size
nb_merge_streams = True

# --- maths: MathJax served from the site itself ---------------------------------------------
# Sphinx's default loads MathJax from a CDN; the site carries its own copy (from the
# django-static-mathjax wheel in the docs extra, which is MathJax 3 and nothing else), so the
# equations render offline too, as from a built copy opened with file://.
mathjax_path = "mathjax/tex-chtml.js"
_MATHJAX_PARTS = ("tex-chtml.js", "input", "output", "ui", "a11y", "adaptors")


def copy_mathjax(app, exception):
    """Copy MathJax's browser build (its TeX input, HTML output and fonts) into _static."""
    if exception is not None or app.builder.format != "html":
        return
    wheel = distribution("django-static-mathjax")
    source = Path(wheel.locate_file("mathjax/static/mathjax/es5"))
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in _MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


# --- HTML -----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = f"ppgpc {release}"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_download_button": False,
    "use_fullscreen_button": False,
}
html_show_sourcelink = False


def setup(app):
    app.connect("autodoc-process-docstring", warn_if_undocumented, priority=50)
    app.connect("autodoc-process-docstring", escape_plain_text, priority=100)  # before napoleon
    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is napoleon._process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", napoleon_sections_only)
    app.connect("autodoc-skip-member", skip_foreign_methods)
    app.connect("build-finished", copy_mathjax)
