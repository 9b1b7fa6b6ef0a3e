"""A run's trace as a Textual tree: each span with its time, tokens and cost."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from thinkloop.tui.backend import SpanRow


def label(s: SpanRow, t0: float) -> Text:
    a = s.attributes
    parts = [f"{(s.end - s.start) * 1000:.1f} ms", f"@+{(s.start - t0) * 1000:.1f} ms"]
    if "gen_ai.usage.input_tokens" in a:
        parts.append(f"{a['gen_ai.usage.input_tokens']}/"
                     f"{a.get('gen_ai.usage.output_tokens', 0)} tokens")
    if a.get("thinkloop.cost_usd"):
        parts.append(f"${float(a['thinkloop.cost_usd']):.4f}")
    if "thinkloop.run.status" in a:
        parts.append(str(a["thinkloop.run.status"]))
    if s.status == "ERROR":
        parts.append("error")
    return Text.assemble((s.name, "bold"), "  ", "  ".join(parts))


def span_tree(tree: Tree[SpanRow], run_id: str, spans: list[SpanRow]) -> None:
    """Fill ``tree`` with ``spans`` (parents before children, each level by start time)."""
    if not spans:
        tree.reset(Text(f"run {run_id[:8]} has no stored trace"))
        return
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanRow]] = {}
    for s in spans:
        children.setdefault(s.parent_id if s.parent_id in ids else None, []).append(s)
    t0 = min(s.start for s in spans)
    total = max(s.end for s in spans) - t0
    tree.reset(Text(f"trace of run {run_id[:8]}  {total * 1000:.0f} ms  {len(spans)} spans"))

    def add(node: TreeNode[SpanRow], span: SpanRow) -> None:
        kids = sorted(children.get(span.span_id, []), key=lambda x: x.start)
        child = (node.add(label(span, t0), data=span, expand=True) if kids
                 else node.add_leaf(label(span, t0), data=span))
        for c in kids:
            add(child, c)

    for r in sorted(children.get(None, []), key=lambda x: x.start):
        add(tree.root, r)
    tree.root.expand()
