"""A Sphinx directive that writes the magics reference from the magics' own parsers.

``{shmem-magics}`` emits, for every ``%shmem`` subcommand and for ``%%pxshmem``, a section with its
help text as argparse prints it (``%shmem SUBCOMMAND --help``), so the page lists every option the
code accepts and nothing it does not.
"""

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def magic_usages():
    """``[(title, help text)]``: every ``%shmem`` subcommand in its order, then ``%%pxshmem``."""
    from shmem_notebook.magics import shmem_magics as m

    def text(sub):
        return m.ABOUT[sub] if sub in m.ABOUT else m.parser_of(sub).format_help().replace("usage: ", "", 1).rstrip()

    return [(f"%shmem {sub}", text(sub)) for sub in m.subcommands()] + [("%%pxshmem", text("pxshmem"))]


class MagicsDirective(SphinxDirective):
    """One section per magic: its title and its help text as a literal block."""

    has_content = False

    def run(self):
        sections = []
        for title, text in magic_usages():
            section = nodes.section(ids=[nodes.make_id("magic " + title)])
            section += nodes.title(text=title)
            section += nodes.literal_block(text, text)
            sections.append(section)
        return sections


def setup(app):
    app.add_directive("shmem-magics", MagicsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
