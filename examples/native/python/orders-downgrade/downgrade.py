"""The orders-v2 -> orders-v1 downgrade, hand-written (no json module), so
that every rule of examples/wasm/testdata/README.md is explicit:

- the value is ONE JSON object (RFC 8259), whitespace around it allowed;
- top level: order_id (string), customer (object with id (string)),
  amount_cents (integer literal fitting int64), currency (string); other
  fields ignored but must be valid JSON;
- duplicate keys in the top level or in customer are errors;
- invalid UTF-8 or an unpaired surrogate escape anywhere is an error;
- nesting deeper than 64 (top level = 1) is an error; null value is an error;
- output {"order_id":S,"customer_id":S,"amount_cents":N,"currency":S},
  compact, strings escaped minimally.
"""

MAX_DEPTH = 64
SCHEMA_HEADER = "fluid-schema-version"
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_WS = " \t\n\r"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = "0123456789abcdefABCDEF"


class DowngradeError(Exception):
    """A record that cannot be downgraded; the message is the reason."""


class _Int:
    """An integer literal as written: no fraction, no exponent."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def fail(self, what):
        raise DowngradeError("invalid JSON at byte offset %d: %s" % (self._byte_offset(), what))

    def _byte_offset(self):
        return len(self.s[: self.i].encode("utf-8", "surrogatepass"))

    def ws(self):
        s, i, n = self.s, self.i, len(self.s)
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, depth, track_dups=False):
        """Parses any value. Objects and arrays are at level depth."""
        self.ws()
        if self.i >= len(self.s):
            self.fail("unexpected end of input")
        c = self.s[self.i]
        if c == "{":
            return self.obj(depth, track_dups)
        if c == "[":
            return self.arr(depth)
        if c == '"':
            return self.string()
        if c == "-" or "0" <= c <= "9":
            return self.number()
        for lit, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(lit, self.i):
                self.i += len(lit)
                return val
        self.fail("unexpected character %r" % c)

    def obj(self, depth, track_dups):
        if depth > MAX_DEPTH:
            self.fail("nesting deeper than %d" % MAX_DEPTH)
        self.i += 1  # {
        out = {} if track_dups else None
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == "}":
            self.i += 1
            return out if track_dups else {}
        while True:
            self.ws()
            if self.i >= len(self.s) or self.s[self.i] != '"':
                self.fail("expected a string key")
            key = self.string()
            self.ws()
            if self.i >= len(self.s) or self.s[self.i] != ":":
                self.fail("expected ':'")
            self.i += 1
            # Only the top level and customer need their members: customer
            # is the one nested object whose duplicates matter.
            val = self.value(depth + 1, track_dups=track_dups and depth == 1 and key == "customer")
            if track_dups:
                if key in out:
                    raise DowngradeError("duplicate key %s" % _quote(key))
                out[key] = val
            self.ws()
            if self.i >= len(self.s):
                self.fail("unexpected end of input in an object")
            c = self.s[self.i]
            self.i += 1
            if c == "}":
                return out if track_dups else {}
            if c != ",":
                self.fail("expected ',' or '}'")

    def arr(self, depth):
        if depth > MAX_DEPTH:
            self.fail("nesting deeper than %d" % MAX_DEPTH)
        self.i += 1  # [
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == "]":
            self.i += 1
            return []
        while True:
            self.value(depth + 1)
            self.ws()
            if self.i >= len(self.s):
                self.fail("unexpected end of input in an array")
            c = self.s[self.i]
            self.i += 1
            if c == "]":
                return []
            if c != ",":
                self.fail("expected ',' or ']'")

    def hex4(self):
        h = self.s[self.i : self.i + 4]
        if len(h) != 4 or any(c not in _HEX for c in h):
            self.fail("bad \\u escape")
        self.i += 4
        return int(h, 16)

    def string(self):
        self.i += 1  # opening quote
        s, n = self.s, len(self.s)
        parts = []
        start = self.i
        while True:
            if self.i >= n:
                self.fail("unterminated string")
            c = s[self.i]
            if c == '"':
                parts.append(s[start : self.i])
                self.i += 1
                return "".join(parts)
            if c < " ":
                self.fail("control character in a string")
            if c != "\\":
                self.i += 1
                continue
            parts.append(s[start : self.i])
            self.i += 1
            if self.i >= n:
                self.fail("unterminated escape")
            e = s[self.i]
            self.i += 1
            if e in _ESCAPES:
                parts.append(_ESCAPES[e])
            elif e == "u":
                cp = self.hex4()
                if 0xD800 <= cp <= 0xDBFF:
                    if s.startswith("\\u", self.i):
                        self.i += 2
                        lo = self.hex4()
                        if not 0xDC00 <= lo <= 0xDFFF:
                            raise DowngradeError("unpaired surrogate escape in a string")
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    else:
                        raise DowngradeError("unpaired surrogate escape in a string")
                elif 0xDC00 <= cp <= 0xDFFF:
                    raise DowngradeError("unpaired surrogate escape in a string")
                parts.append(chr(cp))
            else:
                self.fail("bad escape \\%s" % e)
            start = self.i

    def number(self):
        s, n = self.s, len(self.s)
        start = self.i
        if s[self.i] == "-":
            self.i += 1
        if self.i >= n or not "0" <= s[self.i] <= "9":
            self.fail("bad number")
        if s[self.i] == "0":
            self.i += 1
        else:
            while self.i < n and "0" <= s[self.i] <= "9":
                self.i += 1
        integer = True
        if self.i < n and s[self.i] == ".":
            integer = False
            self.i += 1
            d = self.i
            while self.i < n and "0" <= s[self.i] <= "9":
                self.i += 1
            if self.i == d:
                self.fail("bad number")
        if self.i < n and s[self.i] in "eE":
            integer = False
            self.i += 1
            if self.i < n and s[self.i] in "+-":
                self.i += 1
            d = self.i
            while self.i < n and "0" <= s[self.i] <= "9":
                self.i += 1
            if self.i == d:
                self.fail("bad number")
        if not integer:
            return float("nan")  # a number, but not an integer literal
        lit = s[start : self.i]
        # int64 has at most 19 digits; a longer literal is out of range (and
        # Python refuses to convert very long ones).
        if len(lit.lstrip("-")) > 19:
            return _Int(None)
        return _Int(int(lit))


def _quote(s):
    """s as a JSON string, escaped minimally."""
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t"}.get(o, "\\u%04x" % o))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def downgrade_value(value):
    """Returns the orders-v1 value (bytes) for an orders-v2 value (bytes or
    None), or raises DowngradeError with the reason."""
    if value is None:
        raise DowngradeError("null value")
    try:
        text = bytes(value).decode("utf-8")
    except UnicodeDecodeError as e:
        raise DowngradeError("invalid UTF-8 at byte offset %d" % e.start) from None
    p = _Parser(text)
    p.ws()
    if p.i >= len(text) or text[p.i] != "{":
        if p.i >= len(text):
            raise DowngradeError("empty value")
        raise DowngradeError("value is not a JSON object")
    top = p.value(1, track_dups=True)
    p.ws()
    if p.i != len(text):
        p.fail("data after the JSON object")

    order_id = top.get("order_id")
    if not isinstance(order_id, str):
        raise DowngradeError("order_id: missing or not a string")
    customer = top.get("customer")
    if not isinstance(customer, dict):
        raise DowngradeError("customer: missing or not an object")
    cid = customer.get("id")
    if not isinstance(cid, str):
        raise DowngradeError("customer.id: missing or not a string")
    amount = top.get("amount_cents")
    if not isinstance(amount, _Int):
        raise DowngradeError("amount_cents: missing or not an integer")
    if amount.value is None or not INT64_MIN <= amount.value <= INT64_MAX:
        raise DowngradeError("amount_cents: out of int64 range")
    currency = top.get("currency")
    if not isinstance(currency, str):
        raise DowngradeError("currency: missing or not a string")
    out = '{"order_id":%s,"customer_id":%s,"amount_cents":%d,"currency":%s}' % (
        _quote(order_id),
        _quote(cid),
        amount.value,
        _quote(currency),
    )
    return out.encode("utf-8")
