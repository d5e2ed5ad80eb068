"""A small, conservative parser for the LaTeX and plain-text expressions that make up most final
answers: numbers, fractions, mixed numbers, repeating decimals, roots, powers, pi, e, i, a few
functions, binomials, absolute values and single-letter variables. `evaluate` computes the trees.

It exists for speed: with `evaluate` it settles the common cases in microseconds, where a full
CAS round trip costs milliseconds. It is deliberately narrow. Anything it does not fully
understand raises `Unsupported`, and the caller hands the pair to the CAS instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

MAX_DEPTH = 40
MAX_TOKENS = 400
MAX_DECIMAL_EXPONENT = 1000


class Unsupported(ValueError):
    """The text is outside what the fast path handles with certainty; ask the CAS."""


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
CONSTANT_LETTERS = frozenset({"e", "i"})
FUNCTIONS = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "sec",
        "csc",
        "cot",
        "arcsin",
        "arccos",
        "arctan",
        "sinh",
        "cosh",
        "tanh",
        "ln",
        "exp",
    }
)


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
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind != "space":
            tokens.append(Token(kind, match.group()))
        position = match.end()
    return tokens


_PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")

# The tree is made of small tuples: ("num", Fraction, decimals|None), ("var", name),
# ("const", name), ("neg", x), ("add", a, b), ("sub", a, b), ("mul", a, b), ("div", a, b),
# ("pow", a, b), ("root", x, n), ("func", name, x), ("fact", x), ("based", digits, base).
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
        if (token := self.peek()) is not None:
            raise Unsupported(f"unexpected {token.text!r}")
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
            elif token.text == r"\div":
                # a \div b is an operation, not fraction notation: a * (1/b), never a literal.
                self.take()
                node = ("mul", node, ("div", ("num", Fraction(1), 0), self.unary()))
            elif self.starts_primary(token):
                node = self.implicit_product(node, token)
            else:
                break
        return node

    def implicit_product(self, left: Node, token: Token) -> Node:
        """``left`` times the primary starting at ``token`` (the next token, not yet taken)."""
        negative = left[0] == "neg"
        whole = left[1] if negative else left
        if whole[0] == "num" and whole[2] == 0 and (mixed := self.mixed_fraction(token)) is not None:
            # "2\frac{1}{3}" and "2 1/3" are the mixed number 2 1/3 in answers, not 2 * 1/3; the
            # sign of "-3\frac{8}{9}" covers the whole number.
            value = whole[1] + mixed
            return ("num", -value if negative else value, None)
        if token.kind == "number":
            # "2 3" or "x 2" is not a product anyone writes; refuse rather than guess.
            raise Unsupported("number after a term without an operator")
        return ("mul", left, self.power())

    def mixed_fraction(self, token: Token) -> Fraction | None:
        """The proper fraction of a mixed number starting at ``token``, consumed; else None."""
        start = self.index
        ahead = self.tokens[self.index : self.index + 3]
        if token.text == r"\frac":
            self.take()
            numerator, denominator = self.braced_or_token(), self.braced_or_token()
        elif len(ahead) == 3 and ahead[0].kind == ahead[2].kind == "number" and ahead[1].text == "/":
            numerator, denominator = _number(ahead[0].text), _number(ahead[2].text)
            self.index += 3
        else:
            return None
        if numerator[0] == denominator[0] == "num" and not numerator[2] and not denominator[2]:
            fraction = numerator[1] / denominator[1]
            if 0 <= fraction < 1:
                return fraction
        self.index = start
        return None

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
            following = self.peek()
            if following is not None and following.text == r"\overline":
                return self.repeating_decimal(token.text)
            if following is not None and following.text == "_":
                return self.based_integer(token.text)
            return _number(token.text)
        if token.kind == "letter":
            following = self.peek()
            if token.text in CONSTANT_LETTERS and (following is None or following.text != "_"):
                # In final answers e and i are Euler's number and the imaginary unit far more
                # often than variables; both sides are read the same way either way.
                return ("const", token.text)
            return self.subscripted(token.text)
        if token.text in "({":
            closing = ")" if token.text == "(" else "}"
            self.index -= 1
            return self.group(token.text, closing)
        if token.text == "|":
            self.index -= 1
            return ("abs", self.group("|", "|"))
        if token.kind == "command":
            return self.command(token.text[1:])
        raise Unsupported(f"unsupported token {token.text!r}")

    def digits_argument(self) -> str:
        """The digits of ``\\overline{142}`` or a base subscript ``_{16}``."""
        token = self.take()
        if token.text == "{":
            digits = self.take()
            self.expect("}")
        else:
            digits = token
        if digits.kind != "number" or not digits.text.isdigit():
            raise Unsupported("expected digits")
        return digits.text

    def repeating_decimal(self, text: str) -> Node:
        """``0.1\\overline{6}`` = 1/6: the digits under the bar repeat forever."""
        self.take()
        repeating = self.digits_argument()
        if "." not in text or "e" in text.lower():
            raise Unsupported("a repeating part needs a decimal point before it")
        places = len(text.split(".", 1)[1])
        period = Fraction(int(repeating), 10**places * (10 ** len(repeating) - 1))
        return ("num", Fraction(text) + period, None)

    def based_integer(self, text: str) -> Node:
        """``4343_6``: an integer written in another base, kept as written (digits and base), since
        a question that asks for base 6 is answered by those digits, not by the value."""
        self.take()
        base = int(self.digits_argument())
        if not 2 <= base <= 36 or not text.isdigit():
            raise Unsupported(f"unsupported base-{base} numeral {text}")
        try:
            int(text, base)
        except ValueError:
            raise Unsupported(f"{text} is not a base-{base} numeral") from None
        return ("based", text, base)

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
            return self.function(name)
        if name == "log":
            return self.logarithm()
        if name == "binom":
            top = self.nested(self.braced_or_token)
            return ("binom", top, self.nested(self.braced_or_token))
        raise Unsupported(f"unsupported command \\{name}")

    def function(self, name: str) -> Node:
        """``\\sin(x)``, ``\\sin x``, ``\\sin 2x`` (= sin(2x)) and ``\\sin^2 x`` (= (sin x)^2)."""
        power = None
        if (token := self.peek()) is not None and token.text == "^":
            self.take()
            power = self.nested(self.exponent)
        argument = self.nested(self.function_argument)
        node = ("func", name, argument)
        return node if power is None else ("pow", node, power)

    def function_argument(self) -> Node:
        token = self.peek()
        if token is None:
            raise Unsupported("function without an argument")
        if token.text in "({":
            return self.primary()
        # An unbracketed argument runs over an implicit product and stops at the next function:
        # "\sin 2x" is sin(2x), "\sin x \cos x" is sin(x) cos(x).
        node = self.power()
        while (token := self.peek()) is not None and self.starts_primary(token) and token.kind != "number":
            if token.kind == "command" and token.text[1:] in (*FUNCTIONS, "log"):
                break
            node = ("mul", node, self.power())
        return node

    def logarithm(self) -> Node:
        """``\\log_b x`` = ln x / ln b. A bare ``\\log`` has no agreed base, so it is refused."""
        token = self.peek()
        if token is None or token.text != "_":
            raise Unsupported("\\log without a base")
        self.take()
        base = self.nested(self.exponent)
        argument = self.nested(self.function_argument)
        return ("div", ("func", "ln", argument), ("func", "ln", base))


def _number(text: str) -> Node:
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > MAX_DECIMAL_EXPONENT:
        # Fraction("1e999999999") would build a billion-digit integer.
        raise Unsupported("decimal exponent too large to evaluate here")
    decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    return ("num", Fraction(text), decimals)


def parse_expression(text: str) -> Node:
    """Parse a normalised answer into a tree, or raise `Unsupported`."""
    if _PLAIN_NUMBER.fullmatch(text):
        # Most answers are one number: the tree the parser would build, without tokens and descent
        # (a third of a verdict's time on first contact).
        return _number(text)
    text = text.replace(r"\cdot", "*").replace(r"\times", "*")
    tokens = tokenize(text)
    if len(tokens) > MAX_TOKENS:
        # A flat sum of a thousand terms is a thousand levels deep: no final answer is that long.
        raise Unsupported(f"more than {MAX_TOKENS} tokens")
    return _Parser(tokens).parse()


def variables(node: Node) -> frozenset[str]:
    """Names of the free variables in a tree."""
    if node[0] == "var":
        return frozenset([node[1]])
    found: set[str] = set()
    for child in node[1:]:
        if isinstance(child, tuple):
            found |= variables(child)
    return frozenset(found)


def decimal_places(node: Node) -> int | None:
    """Digits after the point of an answer that is one decimal literal (possibly negated)."""
    if node[0] == "neg":
        return decimal_places(node[1])
    return node[2] if node[0] == "num" and node[2] else None


def decimal_digits(node: Node) -> int | None:
    """Significant digits of an answer that is one decimal literal (possibly negated), else None.

    A decimal like 0.3333333333 is an approximation of something; how many digits it carries
    decides whether it may stand for an exact answer.
    """
    if node[0] == "neg":
        return decimal_digits(node[1])
    if node[0] == "num" and node[2]:
        return len(str(abs(node[1] * 10 ** node[2]).numerator))
    return None


def _is_integer_literal(node: Node) -> bool:
    if node[0] == "neg":
        return _is_integer_literal(node[1])
    return node[0] == "num" and node[2] == 0


def is_literal(node: Node) -> bool:
    """Whether a tree is a number as written, not a computation: an integer, a decimal, a mixed
    number or repeating decimal, a fraction of integers, a numeral in a base, or scientific
    notation (``3 \\times 10^5``, ``10^{-3}``), maybe negated."""
    kind = node[0]
    if kind in ("num", "based"):
        return True
    if kind == "neg":
        return is_literal(node[1])
    if kind == "div":
        return _is_integer_literal(node[1]) and _is_integer_literal(node[2])
    if kind == "pow":
        return node[1] == ("num", 10, 0) and _is_integer_literal(node[2])
    if kind == "mul":
        return node[1][0] == "num" and node[2][0] == "pow" and is_literal(node[2])
    return False
