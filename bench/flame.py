"""Collapsed stacks (``a;b;c 12``, py-spy's ``--format raw``) to a small SVG flame graph, and the share
of samples each group of packages takes.

A sample belongs to the deepest frame of its stack that lies in a package of :data:`GROUPS` (or any
other installed package): the standard library's frames count for the package that imported or called
them; a stack with no package frame is Python's own (its start, the standard library).
"""

import html
import re
import sys

__all__ = ["GROUPS", "parse_collapsed", "merge", "without_importlib", "tree", "render_svg", "group_of_frame", "shares"]

#: group -> top-level packages (the order is the SVG's legend and the shares' order)
GROUPS = {
    "shmem4py (shmem_init)": ("shmem4py", "cffi"),
    "NumPy": ("numpy",),
    "the engine": (
        "IPython",
        "ipykernel",
        "ipyparallel",
        "jupyter_client",
        "jupyter_core",
        "traitlets",
        "zmq",
        "tornado",
        "comm",
        "debugpy",
        "prompt_toolkit",
        "jedi",
        "parso",
        "pygments",
        "decorator",
        "matplotlib_inline",
        "executing",
        "stack_data",
        "asttokens",
        "pure_eval",
        "wcwidth",
        "pexpect",
        "ptyprocess",
        "platformdirs",
        "dateutil",
        "nest_asyncio",
        "packaging",
    ),
    "shmem_notebook": ("shmem_notebook",),
}
OTHER, PYTHON = "other packages", "Python itself (start, standard library)"
COLORS = {
    "shmem4py (shmem_init)": "#6a9fd8",
    "NumPy": "#7cc47c",
    "the engine": "#f0a050",
    "shmem_notebook": "#b48ad8",
    OTHER: "#d8d070",
    PYTHON: "#c0c0c0",
}
_PACKAGE = {pkg: group for group, pkgs in GROUPS.items() for pkg in pkgs}
_FILE = re.compile(r"\(([^()]*?)(?::\d+)?\)$")
ROW, FONT_WIDTH = 16, 6.6


def parse_collapsed(text):
    """``{(frame, ...): samples}`` from collapsed-stack lines (root first, ``;``-separated, a count last)."""
    stacks = {}
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            key = tuple(stack.split(";"))
            stacks[key] = stacks.get(key, 0) + int(count)
    return stacks


def merge(*many):
    """The sum of several ``parse_collapsed`` results."""
    out = {}
    for stacks in many:
        for key, count in stacks.items():
            out[key] = out.get(key, 0) + count
    return out


def without_importlib(stacks):
    """The stacks without importlib's own frames (about five per nested import): a module's import
    shows as its importer's ``<module>`` frame over its own; their samples stay where they were."""
    out = {}
    for stack, count in stacks.items():
        key = tuple(f for f in stack if "(<frozen importlib." not in f)
        out[key] = out.get(key, 0) + count
    return out


def _package(frame):
    """The top-level package a frame's file lies in, or None (standard library, frozen, unknown).
    py-spy names files relative to their ``sys.path`` entry (``ipykernel/ipkernel.py``, ``threading.py``)."""
    m = _FILE.search(frame)
    if not m or m.group(1).startswith("<"):
        return None
    path = m.group(1).replace("\\", "/")
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif path.startswith("/"):  # an absolute path: a source checkout (pip install -e), else unknown
        parts = path.split("/")[:-1]
        return next((pkg for pkg in ("shmem_notebook", "shmem4py") if pkg in parts), None)
    top = path.split("/", 1)[0].removesuffix(".py")
    return None if top in sys.stdlib_module_names else top


def group_of_frame(frame):
    """The group of :data:`GROUPS` (or OTHER) of a frame's package; None for the standard library."""
    pkg = _package(frame)
    return None if pkg is None else _PACKAGE.get(pkg, OTHER)


def _group(stack):
    for frame in reversed(stack):
        group = group_of_frame(frame)
        if group is not None:
            return group
    return PYTHON


def shares(stacks):
    """``{group: fraction of all samples}``, every group of :data:`COLORS` present (0.0 if none)."""
    total = sum(stacks.values()) or 1
    out = dict.fromkeys(COLORS, 0)
    for stack, count in stacks.items():
        out[_group(stack)] += count
    return {group: count / total for group, count in out.items()}


def tree(stacks, min_share=0.005):
    """Nested ``[name, samples, group, children]`` from the root ("all"); frames under ``min_share``
    of all samples are dropped (their samples stay in their parent's width)."""
    root = ["all", 0, PYTHON, {}]
    for stack, count in stacks.items():
        root[1] += count
        node, group = root, PYTHON
        for frame in stack:
            group = group_of_frame(frame) or group
            node = node[3].setdefault(frame, [frame, 0, group, {}])
            node[1] += count
    floor = root[1] * min_share

    def prune(node):
        kept = [prune(child) for child in node[3].values() if child[1] >= floor]
        return [node[0], node[1], node[2], kept]

    return prune(root)


def _label(name, width):
    fits = int((width - 6) / FONT_WIDTH)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


def render_svg(stacks, title, width=1200, min_share=0.005):
    """A flame graph (root at the bottom) as SVG text: one ``<rect>`` per frame kept, its width
    proportional to its samples, colored by its group, with a legend of the groups' shares."""
    root = tree(stacks, min_share)
    rects, depth = [], [0]

    def walk(node, x, level):
        depth[0] = max(depth[0], level)
        rects.append((node, x, level))
        for child in node[3]:
            walk(child, x, level + 1)
            x += child[1]

    walk(root, 0, 0)
    total = root[1] or 1
    scale = (width - 20) / total
    legend_rows = len(COLORS)
    top = 44
    height = top + (depth[0] + 1) * ROW + 16 + legend_rows * ROW
    base = top + depth[0] * ROW  # the root's row
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        f'<text x="10" y="20" font-size="14">{html.escape(title)}</text>',
        f'<text x="10" y="36">{total} samples; frames under {min_share:.1%} left out; '
        "hover a frame for its samples</text>",
    ]
    for (name, count, group, _), x, level in rects:
        px, py, w = 10 + x * scale, base - level * ROW, count * scale
        tip = html.escape(f"{name}: {count} samples, {count / total:.1%}")
        label = html.escape(_label(name, w))
        out.append(
            f'<g><title>{tip}</title><rect x="{px:.1f}" y="{py}" width="{w:.1f}" height="{ROW - 1}" '
            f'fill="{COLORS[group]}"/>'
            + (f'<text x="{px + 3:.1f}" y="{py + 12}">{label}</text>' if label else "")
            + "</g>"
        )
    y = base + ROW + 16
    for group, share in shares(stacks).items():
        out.append(
            f'<rect x="10" y="{y}" width="12" height="12" fill="{COLORS[group]}"/>'
            f'<text x="28" y="{y + 10}">{html.escape(group)}: {share:.0%} of the samples</text>'
        )
        y += ROW
    out.append("</svg>")
    return "\n".join(out) + "\n"
