"""A small, conservative parser and evaluator for the LaTeX and plain-text expressions that make up
most final answers: numbers, fractions, mixed numbers, roots, powers, pi, a few functions and
single-letter variables.

It exists for speed: it settles the common cases in microseconds, where a full CAS round trip
costs milliseconds. It is deliberately narrow. Anything it does not fully understand raises
`Unsupported`, and the caller hands the pair to the CAS instead of guessing.

Values are exact (`fractions.Fraction`) whenever the arithmetic allows, and complex floats
otherwise (irrational roots, pi, transcendental functions).
"""

from __future__ import annotations

import cmath
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

Value = Fraction | complex

MAX_DEPTH = 40
MAX_EXACT_EXPONENT = 512
MAX_EXACT_BITS = 4096


class Unsupported(ValueError):
    """The text is outside what this parser handles with certainty; ask the CAS."""


_TOKEN = re.compile(
    r"""
    (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+(?![.\d]))?)
  | (?P<command>\\[a-zA-Z]+)
  | (?P<letter>[a-zA-Z])
  | (?P<symbol>[-+*/^(){}\[\]!_'|])
  | (?P<space>\s+)
    """,
    re.VERBOSE,
)

GREEK = frozenset(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "varepsilon",
        "zeta",
        "eta",
        "theta",
        "vartheta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "rho",
        "sigma",
        "tau",
        "upsilon",
        "phi",
        "varphi",
        "chi",
        "psi",
        "omega",
    ]
)
FUNCTIONS: Mapping[str, Callable[[complex], complex]] = {
    "sin": cmath.sin,
    "cos": cmath.cos,
    "tan": cmath.tan,
    "ln": cmath.log,
    "exp": cmath.exp,
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise Unsupported(f"unexpected character {text[position]!r}")
        kind = match.lastgroup
        if kind != "space":
            tokens.append(Token(kind, match.group()))
        position = match.end()
    return tokens


# The tree is made of small tuples: ("num", Fraction, decimals|None), ("var", name),
# ("const", name), ("neg", x), ("add", a, b), ("sub", a, b), ("mul", a, b), ("div", a, b),
# ("pow", a, b), ("root", x, n), ("func", name, x), ("fact", x).
Node = tuple


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    def peek(self) -> Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise Unsupported("unexpected end of expression")
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            raise Unsupported(f"expected {text!r}, found {token.text!r}")

    def parse(self) -> Node:
        node = self.expression()
        if self.peek() is not None:
            raise Unsupported(f"unexpected {self.peek().text!r}")
        return node

    def nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unsupported("expression nested too deeply")
        try:
            return parse()
        finally:
            self.depth -= 1

    def expression(self) -> Node:
        node = self.term()
        while (token := self.peek()) is not None and token.text in "+-":
            self.take()
            node = ("add" if token.text == "+" else "sub", node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while (token := self.peek()) is not None:
            if token.text in "*/":
                self.take()
                node = ("mul" if token.text == "*" else "div", node, self.unary())
            elif self.starts_primary(token):
                node = self.implicit_product(node)
            else:
                break
        return node

    def implicit_product(self, left: Node) -> Node:
        token = self.peek()
        # "2\frac{1}{3}" is the mixed number 2 1/3 in competition answers, not 2 * 1/3.
        if token.text == r"\frac" and left[0] == "num" and left[2] == 0:
            right = self.power()
            if right[0] == "div" and right[1][0] == "num" and right[2][0] == "num":
                numerator, denominator = right[1][1], right[2][1]
                if (
                    numerator.denominator == 1
                    and denominator.denominator == 1
                    and 0 < numerator < denominator
                ):
                    return ("num", left[1] + numerator / denominator, None)
            return ("mul", left, right)
        if token.kind == "number":
            # "2 3" or "x 2" is not a product anyone writes; refuse rather than guess.
            raise Unsupported("number after a term without an operator")
        return ("mul", left, self.power())

    @staticmethod
    def starts_primary(token: Token) -> bool:
        if token.kind in ("letter", "number"):
            return True
        if token.kind == "command":
            return token.text not in (r"\cdot", r"\times", r"\div", r"\pm", r"\mp")
        return token.text in "({"

    def unary(self) -> Node:
        token = self.peek()
        if token is not None and token.text in "+-":
            self.take()
            operand = self.nested(self.unary)
            return ("neg", operand) if token.text == "-" else operand
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if (token := self.peek()) is not None and token.text == "^":
            self.take()
            exponent = self.nested(self.exponent)
            return ("pow", base, exponent)
        return base

    def exponent(self) -> Node:
        token = self.peek()
        if token is not None and token.text == "{":
            return self.group("{", "}")
        if token is not None and token.text in "+-":
            self.take()
            operand = self.exponent()
            return ("neg", operand) if token.text == "-" else operand
        if token is not None and token.kind == "number":
            # "x^23" means x^{23} in plain text, but "x^2 3" is unusual enough to refuse.
            self.take()
            return _number(token.text)
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while (token := self.peek()) is not None and token.text == "!":
            self.take()
            node = ("fact", node)
        return node

    def group(self, opening: str, closing: str) -> Node:
        self.expect(opening)
        node = self.nested(self.expression)
        self.expect(closing)
        return node

    def braced_or_token(self) -> Node:
        """An argument of \\frac or \\sqrt: a braced group, or one digit / letter (\\frac12)."""
        token = self.peek()
        if token is not None and token.text == "{":
            return self.group("{", "}")
        token = self.take()
        if token.kind == "number":
            # \frac12 means \frac{1}{2}: a bare argument is a single digit.
            if len(token.text) > 1:
                self.tokens[self.index - 1 : self.index] = [
                    Token("number", token.text[0]),
                    Token("number", token.text[1:]),
                ]
            return _number(token.text[0])
        if token.kind == "letter":
            return ("var", token.text)
        raise Unsupported(f"unsupported argument {token.text!r}")

    def primary(self) -> Node:
        token = self.take()
        if token.kind == "number":
            return _number(token.text)
        if token.kind == "letter":
            return self.subscripted(token.text)
        if token.text in "({":
            closing = ")" if token.text == "(" else "}"
            self.index -= 1
            return self.group(token.text, closing)
        if token.kind == "command":
            return self.command(token.text[1:])
        raise Unsupported(f"unsupported token {token.text!r}")

    def subscripted(self, name: str) -> Node:
        if (token := self.peek()) is not None and token.text == "_":
            self.take()
            subscript = self.take()
            if subscript.text == "{":
                parts = []
                while (inner := self.take()).text != "}":
                    if inner.kind not in ("number", "letter"):
                        raise Unsupported("complex subscript")
                    parts.append(inner.text)
                name = f"{name}_{''.join(parts)}"
            elif subscript.kind in ("number", "letter"):
                name = f"{name}_{subscript.text}"
            else:
                raise Unsupported("complex subscript")
        return ("var", name)

    def command(self, name: str) -> Node:
        if name == "frac":
            numerator = self.nested(self.braced_or_token)
            denominator = self.nested(self.braced_or_token)
            return ("div", numerator, denominator)
        if name == "sqrt":
            degree: Node = ("num", Fraction(2), 0)
            if (token := self.peek()) is not None and token.text == "[":
                degree = self.group("[", "]")
            return ("root", self.nested(self.braced_or_token), degree)
        if name == "pi":
            return ("const", "pi")
        if name in GREEK:
            return self.subscripted(name)
        if name in FUNCTIONS:
            token = self.peek()
            if token is None or token.text not in "({":
                raise Unsupported(f"\\{name} without a bracketed argument")
            return ("func", name, self.nested(self.primary))
        raise Unsupported(f"unsupported command \\{name}")


def _number(text: str) -> Node:
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return ("num", Fraction(text), decimals)


def parse_expression(text: str) -> Node:
    """Parse a normalised answer into a tree, or raise `Unsupported`."""
    text = text.replace(r"\cdot", "*").replace(r"\times", "*").replace(r"\div", "/")
    return _Parser(tokenize(text)).parse()


def variables(node: Node) -> frozenset[str]:
    """Names of the free variables in a tree."""
    if node[0] == "var":
        return frozenset([node[1]])
    found: set[str] = set()
    for child in node[1:]:
        if isinstance(child, tuple):
            found |= variables(child)
    return frozenset(found)


def single_decimal_places(node: Node) -> int | None:
    """Decimal places of an answer that is one decimal literal (possibly negated), else None.

    A decimal like 0.333333 is an approximation of something; the number of places it carries
    decides how close it must be to an exact answer.
    """
    if node[0] == "neg":
        return single_decimal_places(node[1])
    if node[0] == "num" and node[2]:
        return node[2]
    return None


def evaluate(node: Node, point: Mapping[str, complex] | None = None) -> Value:
    """Value of a tree, exact where possible; variables take their values from ``point``."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "var":
        if point is None or node[1] not in point:
            raise Unsupported(f"free variable {node[1]}")
        return point[node[1]]
    if kind == "const":
        return complex(math.pi)
    if kind == "neg":
        return -evaluate(node[1], point)
    if kind == "func":
        return FUNCTIONS[node[1]](complex(evaluate(node[2], point)))
    if kind == "fact":
        return _factorial(evaluate(node[1], point))
    if kind == "root":
        return _root(evaluate(node[1], point), evaluate(node[2], point))
    left, right = evaluate(node[1], point), evaluate(node[2], point)
    if kind == "add":
        return left + right
    if kind == "sub":
        return left - right
    if kind == "mul":
        return left * right
    if kind == "div":
        if right == 0:
            raise Unsupported("division by zero")
        if isinstance(left, Fraction) and isinstance(right, Fraction):
            return left / right
        return complex(left) / complex(right)
    if kind == "pow":
        return _power(left, right)
    raise Unsupported(f"unknown node {kind}")


def _factorial(value: Value) -> Value:
    if isinstance(value, Fraction) and value.denominator == 1 and 0 <= value <= 500:
        return Fraction(math.factorial(int(value)))
    raise Unsupported("factorial of a non-integer or a huge number")


def _exact_root(value: Fraction, degree: int) -> Fraction | None:
    if value < 0 and degree % 2 == 0:
        return None
    sign = -1 if value < 0 else 1
    roots = []
    for part in (abs(value.numerator), value.denominator):
        root = round(part ** (1 / degree)) if part.bit_length() < 1000 else None
        if root is None:
            return None
        # Float roots are off by one near perfect powers; check the neighbours exactly.
        for candidate in (root - 1, root, root + 1):
            if candidate >= 0 and candidate**degree == part:
                roots.append(candidate)
                break
        else:
            return None
    return sign * Fraction(roots[0], roots[1])


def _root(value: Value, degree: Value) -> Value:
    if isinstance(degree, Fraction) and degree.denominator == 1 and 2 <= degree <= 64:
        if isinstance(value, Fraction):
            exact = _exact_root(value, int(degree))
            if exact is not None:
                return exact
            if value < 0 and degree % 2 == 1:
                return -complex(float(-value) ** (1 / float(degree)))
        return _power(value, 1 / degree)
    return _power(value, 1 / degree if isinstance(degree, Fraction) else 1 / complex(degree))


def _power(base: Value, exponent: Value) -> Value:
    if isinstance(base, Fraction) and isinstance(exponent, Fraction):
        if exponent.denominator == 1:
            power = int(exponent)
            size = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
            if abs(power) <= MAX_EXACT_EXPONENT and size * abs(power) <= MAX_EXACT_BITS:
                if base == 0 and power < 0:
                    raise Unsupported("division by zero")
                return base**power
            raise Unsupported("exponent too large to evaluate here")
        if exponent.denominator <= 64 and exponent.numerator.bit_length() < 16:
            root = _exact_root(base, exponent.denominator) if base != 0 else Fraction(0)
            if root is not None:
                return _power(root, Fraction(exponent.numerator))
    try:
        result = complex(base) ** complex(exponent)
    except (OverflowError, ZeroDivisionError) as error:
        raise Unsupported(f"power out of range: {error}") from None
    if not (math.isfinite(result.real) and math.isfinite(result.imag)):
        raise Unsupported("power out of range")
    return result
