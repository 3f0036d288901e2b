"""A PromQL tokenizer and a small parser: enough to find metric names and the functions they sit in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from servescope.core.errors import ServescopeError

AGGREGATORS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)


class PromQLError(ServescopeError, ValueError):
    reason = "promql_invalid"


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:\d+(?:ms|s|m|h|d|w|y))+(?![\w.])|0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>=(){},@])
    """,
    re.VERBOSE,
)
_BINARY_SYMBOLS = frozenset({"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<="})
_BINARY_WORDS = frozenset({"and", "or", "unless", "atan2"})
_MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokenize(expr: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if not match or match.lastgroup is None:
            raise PromQLError(f"unexpected character {expr[pos]!r} at offset {pos}")
        if match.lastgroup != "space":
            tokens.append(Token(match.lastgroup, match.group()))
        pos = match.end()
    return tokens


@dataclass
class Node:
    children: list[Node] = field(default_factory=list)


@dataclass
class Selector(Node):
    name: str = ""
    matchers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call(Node):
    """A function call or an aggregation; `grouping` is ("by"|"without", labels) for aggregations."""

    name: str = ""
    grouping: tuple[str, tuple[str, ...]] | None = None


@dataclass
class Binary(Node):
    """Operands joined by binary operators, left to right as written: `ops[i]` joins children i and i+1
    (`and`, `or`, `unless`, `>`, `*`, ...; lower case). Precedence is not applied: see `split`."""

    ops: list[str] = field(default_factory=list)


@dataclass
class Range(Node):
    """`x[5m]`, a subquery `x[1h:5m]`, or a modifier (offset, @) around one child."""


class _Parser:
    def __init__(self, expr: str) -> None:
        self.tokens = tokenize(expr)
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def is_next(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.kind in ("op", "ident") and token.text.lower() in texts

    def take(self, kind: str | None = None, text: str | None = None) -> Token:
        token = self.peek()
        if token is None:
            raise PromQLError(f"unexpected end of expression, expected {text or kind}")
        if (kind and token.kind != kind) or (text and token.text.lower() != text):
            raise PromQLError(f"unexpected {token.text!r}, expected {text or kind}")
        self.pos += 1
        return token

    def parse(self) -> Node:
        node = self.expr()
        if self.peek() is not None:
            raise PromQLError(f"unexpected {self.tokens[self.pos].text!r} after the expression")
        return node

    def expr(self) -> Node:
        operands, ops = [self.unary()], []
        while (token := self.peek()) is not None and (
            (token.kind == "op" and token.text in _BINARY_SYMBOLS)
            or (token.kind == "ident" and token.text.lower() in _BINARY_WORDS)
        ):
            self.pos += 1
            ops.append(token.text.lower())
            if self.is_next("bool"):
                self.pos += 1
            if self.is_next("on", "ignoring"):
                self.pos += 1
                self.labels()
            if self.is_next("group_left", "group_right"):
                self.pos += 1
                if self.is_next("("):
                    self.labels()
            operands.append(self.unary())
        return operands[0] if len(operands) == 1 else Binary(operands, ops=ops)

    def unary(self) -> Node:
        if self.is_next("-", "+"):
            self.pos += 1
            return self.unary()
        node = self.primary()
        while True:
            token = self.peek()
            if token is not None and token.kind == "range":
                self.pos += 1
                node = Range([node])
            elif self.is_next("offset"):
                self.pos += 1
                if self.is_next("-"):
                    self.pos += 1
                self.take("number")
                node = Range([node])
            elif self.is_next("@"):
                self.pos += 1
                if self.is_next("start", "end"):
                    self.pos += 1
                    self.take("op", "(")
                    self.take("op", ")")
                else:
                    self.take("number")
                node = Range([node])
            else:
                return node

    def primary(self) -> Node:
        token = self.take()
        if token.kind in ("number", "string"):
            return Node()
        if token.kind == "op" and token.text == "(":
            inner = self.expr()
            self.take("op", ")")
            return Node([inner])
        if token.kind == "op" and token.text == "{":
            matchers = self.matchers()
            return Selector(name=matchers.get("__name__", ""), matchers=matchers)
        if token.kind != "ident":
            raise PromQLError(f"unexpected {token.text!r}")
        name = token.text
        if name.lower() in ("inf", "nan"):
            return Node()
        if name.lower() in AGGREGATORS and self.is_next("by", "without", "("):
            return self.aggregation(name.lower())
        if self.is_next("("):
            self.pos += 1
            return Call(self.arguments(), name=name)
        matchers = {}
        if self.is_next("{"):
            self.pos += 1
            matchers = self.matchers()
        return Selector(name=name, matchers=matchers)

    def aggregation(self, name: str) -> Call:
        grouping = self.grouping() if self.is_next("by", "without") else None
        self.take("op", "(")
        args = self.arguments()
        if grouping is None and self.is_next("by", "without"):
            grouping = self.grouping()
        return Call(args, name=name, grouping=grouping)

    def grouping(self) -> tuple[str, tuple[str, ...]]:
        kind = self.take("ident").text.lower()
        return kind, self.labels()

    def arguments(self) -> list[Node]:
        """After `(`: comma-separated expressions up to `)`."""
        args: list[Node] = []
        if self.is_next(")"):
            self.pos += 1
            return args
        while True:
            args.append(self.expr())
            if self.is_next(","):
                self.pos += 1
                continue
            self.take("op", ")")
            return args

    def labels(self) -> tuple[str, ...]:
        self.take("op", "(")
        names: list[str] = []
        while not self.is_next(")"):
            names.append(self.take("ident").text)
            if not self.is_next(","):
                break
            self.pos += 1
        self.take("op", ")")
        return tuple(names)

    def matchers(self) -> dict[str, str]:
        """After `{`: label matchers up to `}`."""
        found: dict[str, str] = {}
        while not self.is_next("}"):
            label = self.take("ident").text
            op = self.take("op")
            if op.text not in _MATCH_OPS:
                raise PromQLError(f"unexpected {op.text!r} in label matchers")
            found[label] = self.take("string").text[1:-1]
            if not self.is_next(","):
                break
            self.pos += 1
        self.take("op", "}")
        return found


def parse_promql(expr: str) -> Node:
    """A tree of the expression: Selectors, Calls (functions and aggregations), Ranges, other Nodes."""
    return _Parser(expr).parse()


def walk(node: Node, enclosing: Call | None = None) -> Iterator[tuple[Node, Call | None]]:
    """Every node, with the innermost function or aggregation it sits in (parentheses do not count)."""
    yield node, enclosing
    inner = node if isinstance(node, Call) else enclosing
    for child in node.children:
        yield from walk(child, inner)


def unwrap(node: Node) -> Node:
    """Through parentheses, ranges and modifiers to what they hold."""
    while type(node) in (Node, Range) and len(node.children) == 1:
        node = node.children[0]
    return node
