"""The wire format between the program's process and the judge: plain data only, in a text that cannot carry code.

A value is `None`, `bool`, `int`, `float`, `str`, or a `list`, `tuple`, `dict`, `set` or `frozenset` of values,
written as a prefix-typed text (one letter per value, counts and lengths before contents):

| value | text |
|---|---|
| `None`, `True`, `False` | `n`, `t`, `f` |
| `int` | `i` + hexadecimal digits (`format(v, "x")`) + `;` |
| `float` | `r` + `float.hex(v)` (also `inf`, `-inf`, `nan`) + `;` |
| `str` | `s` + number of characters + `:` + the characters |
| `list`, `tuple`, `dict`, `set`, `frozenset` | `L`, `T`, `D`, `S`, `Z` + number of items + `:` + the items (a dict: key, value, key, value...) |

The text is sent as UTF-8 (lone surrogates allowed) in frames of `<byte length>\\n<bytes>`. [`decode`] accepts only
the canonical text of a value (no leading zeros, no spaces, nothing after the value), and builds built-in objects
only: no class, function or code is ever named or looked up, so whatever bytes a program sends, the judge gets a
plain value or a [`WireError`]. Every value it accepts costs the judge a bounded time to build, format, hash and
compare:

- at most `MAX_DEPTH` levels of nesting;
- an `int` of at most `MAX_INT_HEX_DIGITS` hexadecimal digits (about 78,900 decimal digits), checked on the text's
  length before it is converted: far above what `json.loads` accepts for an expected value (4,300 digits) and
  above what a HumanEval test computes (a 4,750-digit factorial), small enough that decoding, hashing and comparing
  it take microseconds. The judge never formats a received value (Python refuses `str()` of an int of more than
  4,300 digits), so the bound is on cost, not on `str()`;
- keys of a `set`, `frozenset` or `dict` that share a hash value cost, together, at most `MAX_COLLISION_COST`: a
  set compares each key with every other key of its hash value, so a message is refused when the sum over its
  groups of equal hashes of (pairs in the group) x (the longest key's text) passes it. 40,000 integers
  `k * (2**61 - 1)` (all hash to 0) would cost seconds to put in a set and are refused before it is built; the
  dozen such integers of a contrived right answer cost nothing and pass, and honest data seldom has two keys with
  one hash;
- a string or a container is no longer than its frame, which the judge caps (`max_output_bytes`).

[`encode`] refuses the same depths and integers, so the runner reports an honest program's out-of-bounds result as
such (keys sharing a hash cost the program's own process to build; the judge refuses them).

[`encode`] reads a value through the built-in types' own methods (`int.__format__`, `list.__iter__`,
`dict.items`...), so a subclass (`Counter`, `defaultdict`, a `namedtuple`, or a class that lies in `__eq__`) is
sent as the plain value it holds, never as itself.

This module imports nothing: the sandbox's runner executes a copy of it before the program starts, the judge
imports it by path, and the trainer imports it as `codapo_trl.sandbox.wire`.
"""

MAX_DEPTH = 100
MAX_INT_HEX_DIGITS = 1 << 16
MAX_COLLISION_COST = 1 << 22  # characters compared, summed over a message (a few milliseconds)


class WireError(ValueError):
    """A value that cannot be sent, or a text that is not the canonical encoding of a value."""


def encode(value, max_chars=1 << 22):
    """The wire text of `value` as UTF-8 bytes; raises [`WireError`] for anything that is not plain data, nested
    deeper than `MAX_DEPTH`, longer than `max_chars` characters, or an `int` of more than `MAX_INT_HEX_DIGITS`
    hexadecimal digits."""
    out = []
    _encode(value, out, 0, [0, max_chars])
    return "".join(out).encode("utf-8", "surrogatepass")


def _encode(v, out, depth, size):
    if depth > MAX_DEPTH:
        raise WireError(f"nested more than {MAX_DEPTH} levels deep")
    if v is None:
        piece = "n"
    elif v is True:
        piece = "t"
    elif v is False:
        piece = "f"
    elif isinstance(v, int):
        if int.bit_length(v) > 4 * MAX_INT_HEX_DIGITS:
            raise WireError(f"an int of more than {MAX_INT_HEX_DIGITS} hexadecimal digits")
        piece = "i" + int.__format__(v, "x") + ";"
    elif isinstance(v, float):
        piece = "r" + float.hex(v) + ";"
    elif isinstance(v, str):
        text = str.__str__(v)
        piece = f"s{len(text)}:{text}"
    else:
        if isinstance(v, list):
            tag, items = "L", list(list.__iter__(v))
        elif isinstance(v, tuple):
            tag, items = "T", list(tuple.__iter__(v))
        elif isinstance(v, dict):
            tag, items = "D", list(dict.items(v))
        elif isinstance(v, set):
            tag, items = "S", list(set.__iter__(v))
        elif isinstance(v, frozenset):
            tag, items = "Z", list(frozenset.__iter__(v))
        else:
            raise WireError(f"a {type(v).__name__} is not plain data")
        out.append(f"{tag}{len(items)}:")
        size[0] += len(out[-1])
        for item in items:
            if tag == "D":
                _encode(item[0], out, depth + 1, size)
                _encode(item[1], out, depth + 1, size)
            else:
                _encode(item, out, depth + 1, size)
        return
    size[0] += len(piece)
    if size[0] > size[1]:
        raise WireError(f"longer than {size[1]} characters")
    out.append(piece)


def decode(data, json_like=False):
    """The value whose wire text is `data` (bytes), made of built-in objects only.

    With `json_like=True` the value is built as JSON would hold it, for comparison with a JSON-decoded expected
    value: tuples become lists, dict keys that are numbers, booleans or `None` become the strings JSON writes for
    them, and sets are refused. Then no hash of a value the program chose is ever computed except a string's
    (randomised per process), so no crafted set of colliding keys can make the decoding slow.

    Raises:
        WireError: `data` is not the canonical wire text of one plain value.
    """
    try:
        text = data.decode("utf-8", "surrogatepass")
        value, end = _decode(text, 0, 0, json_like, [MAX_COLLISION_COST])
    except WireError:
        raise
    except (ValueError, TypeError, IndexError, OverflowError, RecursionError, MemoryError) as exc:
        raise WireError(f"not plain data: {type(exc).__name__}") from None
    if end != len(text):
        raise WireError("trailing data")
    return value


def _count(text, pos, stop):
    end = text.index(stop, pos)
    digits = text[pos:end]
    if not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0") or len(digits) > 12:
        raise WireError("bad count")
    return int(digits), end + 1


_JSON_KEYS = {None: "null", True: "true", False: "false"}


def _json_key(k):
    if type(k) is str:
        return k
    if k is None or type(k) is bool:
        return _JSON_KEYS[k]
    if type(k) is int:
        return str(k)
    if type(k) is float:
        return "NaN" if k != k else ("Infinity" if k == 1e400 else ("-Infinity" if k == -1e400 else repr(k)))
    raise WireError(f"a dict key of type {type(k).__name__} has no JSON form")


def _decode(text, pos, depth, json_like, budget):
    if depth > MAX_DEPTH:
        raise WireError(f"nested more than {MAX_DEPTH} levels deep")
    tag = text[pos]
    pos += 1
    if tag == "n":
        return None, pos
    if tag == "t":
        return True, pos
    if tag == "f":
        return False, pos
    if tag == "i":
        end = text.index(";", pos)
        token = text[pos:end]
        if len(token) > MAX_INT_HEX_DIGITS + (token[:1] == "-"):  # before converting it
            raise WireError(f"an int of more than {MAX_INT_HEX_DIGITS} hexadecimal digits")
        value = int(token, 16)
        if not token.isascii() or int.__format__(value, "x") != token:
            raise WireError("non-canonical int")
        return value, end + 1
    if tag == "r":
        end = text.index(";", pos)
        token = text[pos:end]
        value = float.fromhex(token)
        if float.hex(value) != token:
            raise WireError("non-canonical float")
        return value, end + 1
    if tag == "s":
        n, pos = _count(text, pos, ":")
        if pos + n > len(text):
            raise WireError("string past the end")
        return text[pos : pos + n], pos + n
    if tag not in "LTDSZ":
        raise WireError("unknown tag")
    n, pos = _count(text, pos, ":")
    if n > len(text) - pos:  # every item takes at least one character
        raise WireError("count past the end")
    if tag == "D":
        keys, values, spans = [], [], []
        for _ in range(n):
            start = pos
            key, pos = _decode(text, pos, depth + 1, json_like, budget)
            spans.append(pos - start)
            value, pos = _decode(text, pos, depth + 1, json_like, budget)
            keys.append(_json_key(key) if json_like else key)
            values.append(value)
        if not json_like:  # JSON keys are strings, whose hash is randomised per process
            _check_hashes(keys, spans, budget)
        return dict(zip(keys, values)), pos
    items, spans = [], []
    for _ in range(n):
        start = pos
        item, pos = _decode(text, pos, depth + 1, json_like, budget)
        items.append(item)
        spans.append(pos - start)
    if tag == "L" or (tag == "T" and json_like):
        return items, pos
    if tag == "T":
        return tuple(items), pos
    if json_like:
        raise WireError("a set has no JSON form")
    _check_hashes(items, spans, budget)
    return (set(items) if tag == "S" else frozenset(items)), pos


def _check_hashes(keys, spans, budget):
    """Charge `budget` (a one-item list) for the comparisons that building a set or dict of `keys` (whose texts are
    `spans` characters long) can make among keys sharing a hash value; refuse them when it runs out. A
    `TypeError` for an unhashable key becomes a [`WireError`] in [`decode`]."""
    hashes = list(map(hash, keys))  # each key hashed once, in time proportional to its text
    if len(set(hashes)) == len(hashes):  # the usual case; distinct hash values never collide as set items
        return
    groups = {}
    for h, span in zip(hashes, spans):
        group = groups.setdefault(h, [0, 0])
        group[0] += 1
        group[1] = max(group[1], span)
    budget[0] -= sum(n * (n - 1) // 2 * span for n, span in groups.values())
    if budget[0] < 0:
        raise WireError("keys that share a hash value would cost too much to put in a set or dict")


def frame(payload):
    """`payload` (bytes) as one frame: its length in decimal, a newline, the bytes."""
    return str(len(payload)).encode() + b"\n" + payload
