"""The JSONPath subset Step Functions accepts, as a small parser: is this string a valid path of this kind?

AWS's rules (https://docs.aws.amazon.com/step-functions/latest/dg/amazon-states-language-paths.html,
the ASL spec https://states-language.net/spec.html#path and its intrinsic functions
https://docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html):

* a *path* starts with ``$`` (the state input), ``$$`` (the Context object) or ``$name``
  (a workflow variable) and may use ``..``, ``*``, slices, lists and ``[?(...)]`` filters;
* a *reference path* identifies one node: only ``.name``, ``['name']`` and ``[index]``
  (no ``@ , : ? *``, no ``..``, no functions);
* ``ResultPath`` is a reference path into the state input: no ``$$``, no variables;
* a ``.$`` value in a payload template is a path or an intrinsic function ``States.X(...)``.

Functions such as ``length()`` are not supported anywhere. The grammar of names follows the
spec's samples (any character but ``. [ ] ( ) ' " , < > ! = @ ?`` and spaces, ``\\`` escapes one).
"""

from __future__ import annotations

import re
from enum import StrEnum


class PathKind(StrEnum):
    PATH = "path"
    REFERENCE = "reference path"
    RESULT = "result path"
    PAYLOAD = "payload template value"


# https://docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html
INTRINSICS = frozenset(
    f"States.{n}"
    for n in [
        "Array",
        "ArrayPartition",
        "ArrayContains",
        "ArrayRange",
        "ArrayGetItem",
        "ArrayLength",
        "ArrayUnique",
        "Base64Encode",
        "Base64Decode",
        "Hash",
        "JsonMerge",
        "StringToJson",
        "JsonToString",
        "MathRandom",
        "MathAdd",
        "StringSplit",
        "UUID",
        "Format",
    ]
)

_NAME_STOP = set(".[]()'\",<>!=@? \t\r\n")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"\d+")
_MULTI_INDEX = re.compile(r"-?\d+|-?\d*:-?\d*(:-?\d+)?|-?\d+(\s*,\s*-?\d+)+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")


class PathError(ValueError):
    pass


def path_error(text: str, kind: PathKind) -> str | None:
    """None when ``text`` is a valid ``kind``, else why not."""
    try:
        if kind is PathKind.PAYLOAD and text.startswith("States."):
            _Parser(text).intrinsic_call(whole=True)
        else:
            _Parser(text).path(kind)
    except PathError as exc:
        return str(exc)
    return None


def context_fields(text: str) -> list[str]:
    """The first member after each ``$$.`` in a path or intrinsic call (``Task`` for ``$$.Task.Token``)."""
    return [m.group(1) for m in re.finditer(r"\$\$\.([A-Za-z]+)", text)]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str) -> PathError:
        return PathError(f"{why} at character {self.pos + 1} of {self.text!r}")

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    # ---------------------------------------------------------------- paths
    def path(self, kind: PathKind) -> None:
        multi = kind in (PathKind.PATH, PathKind.PAYLOAD)
        self.root(kind)
        while not self.at_end():
            self.segment(multi, kind)

    def root(self, kind: PathKind) -> None:
        if self.peek(2) == "$$":
            if kind is PathKind.RESULT:
                raise self.fail("ResultPath cannot write into the Context object ($$)")
            self.pos += 2
            return
        if self.peek() != "$":
            raise self.fail("a path starts with $")
        self.pos += 1
        variable = _VARIABLE.match(self.text, self.pos)
        if variable:
            if kind is PathKind.RESULT:
                raise self.fail("ResultPath cannot name a variable")
            self.pos = variable.end()

    def segment(self, multi: bool, kind: PathKind) -> None:
        if self.peek(2) == "..":
            self.need(multi, "'..' (descent) selects many nodes", kind)
            self.pos += 2
            if self.peek() == "[":
                self.bracket(multi, kind)
            else:
                self.member(multi, kind)
        elif self.peek() == ".":
            self.pos += 1
            self.member(multi, kind)
        elif self.peek() == "[":
            self.bracket(multi, kind)
        else:
            raise self.fail(f"unexpected {self.peek()!r}")

    def need(self, multi: bool, what: str, kind: PathKind) -> None:
        if not multi:
            raise self.fail(f"a {kind} identifies one node; {what}")

    def member(self, multi: bool, kind: PathKind) -> None:
        if self.peek() == "*":
            self.need(multi, "'*' selects many nodes", kind)
            self.pos += 1
            return
        start = self.pos
        while not self.at_end() and self.peek() not in _NAME_STOP:
            self.pos += 2 if self.peek() == "\\" else 1
        if self.pos == start:
            raise self.fail("a member name is missing")
        if self.pos > len(self.text):
            raise self.fail("a dangling escape")
        if self.peek() == "(":
            raise self.fail("functions such as length() are not supported")

    def bracket(self, multi: bool, kind: PathKind) -> None:
        self.pos += 1  # [
        self.spaces()
        first = self.peek()
        if not first:
            raise self.fail("']' expected")
        if first in "'\"":
            self.quoted()
            self.spaces()
            while self.peek() == ",":
                self.need(multi, "a list of names selects many nodes", kind)
                self.pos += 1
                self.spaces()
                self.quoted()
                self.spaces()
        elif first == "*":
            self.need(multi, "'[*]' selects many nodes", kind)
            self.pos += 1
        elif first in "?(":
            self.need(multi, "filters and expressions select computed nodes", kind)
            if first == "?":
                self.pos += 1
            self.balanced_parens()
        else:
            self.index(multi, kind)
        self.spaces()
        if self.peek() != "]":
            raise self.fail("']' expected")
        self.pos += 1

    def index(self, multi: bool, kind: PathKind) -> None:
        end = self.text.find("]", self.pos)
        if end < 0:
            raise self.fail("']' expected")
        body = self.text[self.pos : end].strip()
        if _INDEX.fullmatch(body):
            self.pos = end
            return
        if _MULTI_INDEX.fullmatch(body):
            self.need(multi, f"[{body}] (negative index, slice or list) is not a single node", kind)
            self.pos = end
            return
        raise self.fail(f"[{body}] is not an index, a slice, a quoted name, '*' or a filter")

    def spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def quoted(self) -> None:
        quote = self.peek()
        if not quote or quote not in "'\"":
            raise self.fail("a quoted name expected")
        self.pos += 1
        while not self.at_end() and self.peek() != quote:
            self.pos += 2 if self.peek() == "\\" else 1
        if self.at_end():
            raise self.fail("unterminated quoted name")
        self.pos += 1

    def balanced_parens(self) -> None:
        if self.peek() != "(":
            raise self.fail("'(' expected")
        depth = 0
        while not self.at_end():
            c = self.peek()
            if c in "'\"":
                self.quoted()
                continue
            depth += {"(": 1, ")": -1}.get(c, 0)
            self.pos += 1
            if depth == 0:
                if self.text[self.pos - 2] == "(":
                    raise self.fail("an empty expression")
                return
        raise self.fail("unbalanced parentheses")

    # ---------------------------------------------------------------- intrinsic functions
    def intrinsic_call(self, *, whole: bool) -> None:
        name = re.match(r"States\.[A-Za-z0-9]+", self.text[self.pos :])
        if not name or name.group(0) not in INTRINSICS:
            raise self.fail("unknown intrinsic function")
        self.pos += name.end()
        if self.peek() != "(":
            raise self.fail("'(' expected after the function name")
        self.pos += 1
        self.spaces()
        if self.peek() == ")":
            self.pos += 1
        else:
            self.arguments()
        if whole and not self.at_end():
            raise self.fail("text after the intrinsic function")

    def arguments(self) -> None:
        while True:
            self.spaces()
            self.argument()
            self.spaces()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == ")":
                self.pos += 1
                return
            raise self.fail("',' or ')' expected")

    def argument(self) -> None:
        c = self.peek()
        if c == "'":
            self.quoted()
        elif c == "$":
            end = self.argument_end()
            _Parser(self.text[self.pos : end]).path(PathKind.PATH)
            self.pos = end
        elif self.text.startswith("States.", self.pos):
            self.intrinsic_call(whole=False)
        else:
            literal = re.match(r"true|false|null", self.text[self.pos :]) or _NUMBER.match(
                self.text, self.pos
            )
            if not literal:
                raise self.fail("an argument is a 'string', a number, true/false/null, a path or a call")
            self.pos = literal.end() if literal.re is _NUMBER else self.pos + literal.end()

    def argument_end(self) -> int:
        """Where a path argument ends: the next ',' or ')' outside brackets, quotes and parentheses."""
        depth, i = 0, self.pos
        while i < len(self.text):
            c = self.text[i]
            if c in "'\"":
                close = self.text.find(c, i + 1)
                i = len(self.text) if close < 0 else close + 1
                continue
            if c in "[(":
                depth += 1
            elif c in "])":
                if depth == 0 and c == ")":
                    return i
                depth -= 1
            elif c == "," and depth == 0:
                return i
            i += 1
        return i
