"""Which pages require a symptom: the check behind the linter's `alerts/page-symptom`.

A page (severity critical) must require a user-visible symptom measured against an SLO: an error ratio the
bundle records per model (`model:servescope_<sli>_errors:ratio...`: the latency SLOs' burn on their own
bound, the endpoints' availability) or per model and revision (a canary's burn on the same bounds).
"Requires" is read off the expression's operators: every branch of an `or` must require it; one operand of
an `and` (or of a comparison, or of an arithmetic join, which keep only matching series) is enough; what
follows `unless` does not count. A record of the rule file counts when every rule recording it requires a
symptom (a burn of an error ratio over its windows). A cause alone (a queue, preemptions, KV usage, GPU
utilisation) never passes.

The one other kind of page is the monitoring's own blindness: an expression that reads only Prometheus' `up`
and kube-state-metrics' `kube_*` series (the exporters are gone, so no symptom can be measured).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from servescope.bundle.alerts.promql import Binary, Call, Node, Selector, walk

# Per model, or per model and revision (a canary's own burn, rules_canary.py).
SYMPTOM_RECORD = re.compile(r"^model(_revision)?:servescope_\w+_errors:ratio\w*$")
# Series that say whether the monitoring sees, not what it sees.
BLINDNESS_SERIES = re.compile(r"^(up|kube_\w+)$")
# Functions whose result is not the argument's series: a symptom inside them is not required.
NEGATING = frozenset({"absent", "absent_over_time", "vector", "scalar", "time"})
# Binary operators from the loosest to the tightest binding (PromQL's precedence).
PRECEDENCE = (
    ("or",),
    ("and", "unless"),
    ("==", "!=", "<=", "<", ">=", ">"),
    ("+", "-"),
    ("*", "/", "%", "atan2"),
)


def split(node: Binary) -> tuple[list[str], list[Node]]:
    """The loosest operators of a chain and the operands they join (chains of tighter operators inside):
    `ops[i]` joins `parts[i]` and `parts[i + 1]`.

    `a and b or c` is (["or"], [a and b, c]); `a > 1 unless b` is (["unless"], [a > 1, b]).
    """
    for level in PRECEDENCE:
        if any(op in level for op in node.ops):
            ops: list[str] = []
            parts: list[Node] = []
            start = 0
            for i, op in enumerate(node.ops):
                if op in level:
                    parts.append(_chain(node, start, i))
                    ops.append(op)
                    start = i + 1
            parts.append(_chain(node, start, len(node.ops)))
            return ops, parts
    return list(node.ops), list(node.children)


def _chain(node: Binary, first: int, last: int) -> Node:
    """Operands first..last of `node` (and the operators between them) as one node."""
    if first == last:
        return node.children[first]
    return Binary(node.children[first : last + 1], ops=node.ops[first:last])


def requires_symptom(node: Node, records: Mapping[str, Sequence[Node]] | None = None) -> bool:
    """Whether every series the expression returns exists only where a symptom record does. `records`:
    the expressions of the rule file's recording rules, by name: a record that requires a symptom (a
    burn of an error ratio over its windows) is one too."""
    return _requires(node, records or {}, frozenset())


def _requires(node: Node, records: Mapping[str, Sequence[Node]], seen: frozenset[str]) -> bool:
    if isinstance(node, Selector):
        if SYMPTOM_RECORD.match(node.name):
            return True
        trees = records.get(node.name, ()) if node.name not in seen else ()
        return bool(trees) and all(_requires(tree, records, seen | {node.name}) for tree in trees)
    if isinstance(node, Call) and node.name.lower() in NEGATING:
        return False
    if isinstance(node, Binary):
        ops, parts = split(node)
        if ops and ops[0] == "or":
            return all(_requires(part, records, seen) for part in parts)
        # and / unless at one level: the first operand and those after `and` are what it keeps.
        kept = [parts[0], *(part for op, part in zip(ops, parts[1:], strict=True) if op != "unless")]
        return any(_requires(part, records, seen) for part in kept)
    return any(_requires(child, records, seen) for child in node.children)


def reads_only_blindness(node: Node) -> bool:
    """Whether the expression reads nothing but `up` and kube-state-metrics' series (and reads some)."""
    names = [n.name for n, _ in walk(node) if isinstance(n, Selector) and n.name]
    return bool(names) and all(BLINDNESS_SERIES.match(name) for name in names)
