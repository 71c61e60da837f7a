"""Sphinx configuration of shmem_notebook's documentation site (``make docs``).

Pages are Markdown (MyST); the notebooks are rendered by myst-nb from the executed copies in
``docs/notebooks/`` (``make docs-notebooks`` writes them), never executed here, so the build
needs no OpenSHMEM and takes seconds. The API reference is autodoc over the docstrings; the
magics reference is written from the magics' own parsers (``_ext/shmem_docs.py``).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, from this checkout
sys.path.insert(0, os.path.join(HERE, "_ext"))
os.environ["COLUMNS"] = "100"  # argparse's help width, so the magics page does not depend on the terminal

project = "shmem_notebook"
author = "shmem_notebook's authors"
copyright = "shmem_notebook's authors, BSD-3-Clause"

extensions = ["myst_nb", "sphinx.ext.autodoc", "shmem_docs"]
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
root_doc = "index"

# Markdown: anchors for headings (links such as many-nodes.md#with-a-hostfile), tables, ::: fences
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# notebooks: rendered from their committed executed copies, never run by the docs build
nb_execution_mode = "off"
nb_merge_streams = True

# the API reference: signatures as written, members in source order; shmem4py is PE-side only
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_mock_imports = ["shmem4py"]

html_theme = "alabaster"
html_title = "shmem_notebook"
html_static_path = ["_static"]
html_css_files = ["wide-tables.css"]
html_theme_options = {"description": "Interactive OpenSHMEM in Jupyter", "page_width": "1180px"}

# index.md's toctree ends with a glob that takes any page not listed before it (pages other work
# adds); when there is none, that is not a problem
suppress_warnings = ["toc.glob"]

# widgets (the inspector, the replay) cannot run in a static page: show their text form, which the
# tool writes for front ends without widgets, and load no widget JavaScript from elsewhere
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}
