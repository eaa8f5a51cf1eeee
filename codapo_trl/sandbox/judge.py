"""The judge: the process that computes the verdict of a `call` or `check` run, and never runs the program's code.

The executor ([`codapo_trl.sandbox.executor`]) starts it next to the sandboxed program for every `call` and
`check` run, as `python -E -s -S -m judge` from this directory (standard library only, no site-packages), with two
pipes to the program's process (requests out, answers in), the run's spec (wire-encoded) on its
standard input, and its standard output for the verdict. The program's process runs the program's module and then
only answers the judge's requests ([`codapo_trl.sandbox.runner`]); what comes back is decoded by
[`codapo_trl.sandbox.wire.decode`] into built-in objects, so no object of the program ever reaches a comparison.

- `call`: one request `fn_name(*args)`; the decoded result is compared with the expected value ([`values_match`]).
- `check`: HumanEval's test code (trusted dataset code) runs here, in a fresh namespace, after the prompt (or its
  import lines) has defined the dataset's own helpers; `check(candidate)` gets a proxy that forwards each call to
  the program and returns the decoded result, and the entry point's name is bound to the same proxy (a test that
  calls the function by name calls the program's definition, not the prompt's stub). Arguments the candidate mutated come back too and are written into
  the test's own objects, as a call in one interpreter would leave them.

What the program sends, or fails to send, is the program's result (a failure is never a skip). The judge works in
two stages. First, with nothing of the program's read yet, it decodes its spec and builds the test's namespace; a
failure there is `invalid` (the test cannot run: not the program's fault). Then it writes `judging` on its standard
output and talks to the program's process; from then on every failure is the program's, whatever its cause: data
that breaks the protocol or the wire format's bounds ([`codapo_trl.sandbox.wire`]), an answer that makes the test
or the judge fail, no answer, or the judge stopped by its own limits before a verdict (the executor reads a
`judging` line without a verdict as the program's failure). The judge never formats a value of the program's
except a bounded piece of a string ([`_text`]), and its process has CPU-time and address-space limits
(`RLIMIT_CPU`, `RLIMIT_AS`, from the spec) besides the executor's deadline.

The verdict is one line on standard output after `judging`: `pass`, `wrong <why>`, `error <why>` (the program
failed), `memory <why>`, `ended <why>` (the program closed the channel or died before answering), `timeout` (no
answer by the deadline) or, before `judging` (or for a request the test itself cannot send before the program
answered anything), `invalid <why>`. The trainer reads nothing else from this process. Every wait has the run's
deadline and every answer is read into a bounded buffer; the executor kills the judge one second after the
deadline in any case.

The comparison rules ([`values_match`], [`outputs_match`]) live here too: the judge needs them without importing
the package, and the reward ([`codapo_trl.rewards.code`]) imports them from here.
"""

import math
import os
import resource
import select
import sys
import time


if __package__:
    from . import wire
else:  # run by the executor: this directory is on sys.path
    import wire

FLOAT_TOLERANCE = 1e-6


# ------------------------------------------------------------------------------------------------- comparison


def _number_kind(token):
    """`"int"` for a decimal integer token (ASCII digits, optional sign), `"float"` for a decimal number with a
    fractional part or an exponent (`0.5`, `-.5`, `2.`, `1e-3`, `1.5E+7`), `None` for anything else (`nan`, `inf`,
    `0x1f`, `1_000`, full-width digits). Written with `str` methods: linear in the token, no pattern to backtrack."""
    if not token.isascii():
        return None
    body = token[1:] if token[:1] in ("+", "-") else token
    mantissa, e, exponent = body.replace("E", "e").partition("e")
    if e:
        digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
        if not digits.isdigit():
            return None
    whole, dot, fraction = mantissa.partition(".")
    if not (whole or fraction) or (whole and not whole.isdigit()) or (fraction and not fraction.isdigit()):
        return None
    return "float" if dot or e else "int"


def _tokens(text, size=1 << 16):
    """The whitespace-separated tokens of `text` (as `text.split()` gives them), one at a time: a program's output
    of several MB is never held as a list of its tokens. A token that runs across pieces is joined once."""
    parts = []  # the pieces of a token that runs on past the current piece
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        words = piece.split()
        if parts and (not words or piece[0].isspace()):
            yield "".join(parts)
            parts = []
        if not words:
            continue
        if parts:
            parts.append(words[0])
            if len(words) == 1 and not piece[-1].isspace():
                continue  # the token runs on still
            yield "".join(parts)
            parts = []
            words = words[1:]
        if words and not piece[-1].isspace():
            parts.append(words.pop())
        yield from words
    if parts:
        yield "".join(parts)


def _stripped_length(text, size=1 << 16):
    """`len(text.rstrip())`, without copying `text` (read from its end in pieces of `size` characters)."""
    end = len(text)
    while end > 0:
        piece = text[max(0, end - size) : end]
        kept = len(piece.rstrip())
        if kept:
            return end - len(piece) + kept
        end -= len(piece)
    return 0


def _same_text(got, expected, size=1 << 16):
    """Whether `got` and `expected` are the same text but for trailing whitespace (then they have the same tokens),
    compared in pieces of `size` characters: a few ms of the trainer's CPU per MB instead of tens token by token,
    and no copy of either text."""
    n = _stripped_length(got)
    if n != _stripped_length(expected):
        return False
    return all(got[i : min(i + size, n)] == expected[i : min(i + size, n)] for i in range(0, n, size))


def outputs_match(got, expected, tol=FLOAT_TOLERANCE):
    """Whether a program's standard output matches the expected one, token by token.

    Whitespace (line ends, trailing spaces, blank lines) only separates tokens. Tokens compare as text, exactly:
    leading zeros and signs are part of an answer (`00000011`, `+5` are not `11`, `5`). Only an expected token
    written as a decimal number with a fractional part or an exponent (`0.333333`, `1.5e-3`) is matched by any
    decimal number within `tol` (relative or absolute) of it. Linear in the size of both texts, and the output is
    read lazily ([`_tokens`]): the first token that differs ends the comparison.
    """
    if _same_text(got, expected):  # the same tokens: an honest program's usual output, compared in C
        return True
    got_tokens, exp_tokens = _tokens(got), _tokens(expected)
    for e in exp_tokens:
        g = next(got_tokens, None)
        if g is None:
            return False
        if g == e:
            continue
        if _number_kind(e) != "float" or _number_kind(g) is None:
            return False
        fg, fe = float(g), float(e)
        if not (math.isfinite(fg) and math.isfinite(fe) and math.isclose(fg, fe, rel_tol=tol, abs_tol=tol)):
            return False
    return next(got_tokens, None) is None


def values_match(got, expected, tol=FLOAT_TOLERANCE):
    """Whether a call's result (decoded JSON-like: lists, string-keyed dicts) matches the expected JSON value.

    Booleans match only booleans, an expected `int` only a number exactly equal to it, an expected `float` a
    number within `tol` (relative or absolute), strings and `None` only themselves, lists elementwise and dicts by
    keys and values.
    """
    want, have = type(expected), type(got)  # the types
    if want is bool or have is bool:
        return want is have and got == expected
    if want is int:
        return (have is int or have is float) and got == expected
    if want is float:
        if have is not int and have is not float:
            return False
        try:
            return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)
        except OverflowError:  # an int too large for a float
            return False
    if want is list:
        return (
            have is list and len(got) == len(expected) and all(values_match(g, e, tol) for g, e in zip(got, expected))
        )
    if want is dict:
        return (
            have is dict and got.keys() == expected.keys() and all(values_match(got[k], expected[k], tol) for k in got)
        )
    if want is str or expected is None:
        return have is want and got == expected
    return False


def call_result_matches(got, expected):
    """[`values_match`], or the result equals the only element of a one-element expected list (TACO/APPS often
    store a call's expected value wrapped so)."""
    if values_match(got, expected):
        return True
    return type(expected) is list and len(expected) == 1 and values_match(got, expected[0])


# ------------------------------------------------------------------------------------------------- the channel


class ChannelBroken(BaseException):  # noqa: N818 (not an Exception: the test code's `except Exception` cannot catch it)
    """The program's process stopped answering properly; `kind` is a verdict word."""

    def __init__(self, kind, why):
        super().__init__(why)
        self.kind, self.why = kind, why


class CandidateError(Exception):
    """The candidate raised an exception that is not one of Python's built-in `Exception` classes."""


def _text(value, limit=200):
    """A bounded piece of a value the program sent, for a verdict's reason: the start of a string, otherwise only
    its type (formatting a program's value could cost without bound)."""
    return value[:limit] if type(value) is str else f"<{type(value).__name__}>"


class Channel:
    """Requests to the program's process and its answers, each within the run's deadline and `max_bytes`.

    `answered` turns true with the first answer to a call: before it, nothing the test sends can come from the
    program."""

    def __init__(self, req_fd, resp_fd, deadline, max_bytes):
        self.req_fd, self.resp_fd, self.deadline, self.max_bytes = req_fd, resp_fd, deadline, max_bytes
        os.set_blocking(req_fd, False)  # a program that stops reading cannot block a write past the deadline
        self.buf = bytearray()
        self.broken = None
        self.answered = False

    def _ready(self, fd, event):
        # poll, not select: the descriptors keep the trainer's numbers, which can be above select's 1024
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        poller = select.poll()
        poller.register(fd, event)
        return bool(poller.poll(left * 1000))

    def _read_more(self):
        if not self._ready(self.resp_fd, select.POLLIN):
            raise ChannelBroken("timeout", "no answer before the deadline")
        data = os.read(self.resp_fd, 1 << 16)
        if not data:
            raise ChannelBroken("ended", "the program ended before answering")
        self.buf += data

    def receive(self, json_like=False):
        if self.broken is not None:
            raise self.broken
        try:
            while b"\n" not in self.buf:
                if len(self.buf) > 20:
                    raise ChannelBroken("error", "the program wrote something else than an answer on its channel")
                self._read_more()
            head, _, rest = self.buf.partition(b"\n")
            if not head.isdigit() or len(head) > 12 or int(head) > self.max_bytes:
                raise ChannelBroken("error", "the program wrote something else than an answer on its channel")
            n = int(head)
            self.buf = rest
            while len(self.buf) < n:
                self._read_more()
            payload = bytes(self.buf[:n])
            del self.buf[:n]
            try:
                message = wire.decode(payload, json_like)
            except wire.WireError as exc:
                raise ChannelBroken("error", f"the program's answer is not plain data ({exc})") from None
            if type(message) not in (list, tuple) or not message or type(message[0]) is not str:
                raise ChannelBroken("error", "the program's answer is not a message")
            return message
        except ChannelBroken as exc:
            self.broken = exc
            raise

    def send(self, message):
        data = wire.frame(wire.encode(message, max_chars=self.max_bytes))
        try:
            while data:
                if not self._ready(self.req_fd, select.POLLOUT):
                    raise ChannelBroken("timeout", "the program did not read its request before the deadline")
                try:
                    data = data[os.write(self.req_fd, data[: 1 << 16]) :]
                except BlockingIOError:
                    continue
        except OSError:
            raise ChannelBroken("ended", "the program ended before answering") from None


def _raise_from_candidate(name, message):
    import builtins

    cls = getattr(builtins, name, None) if type(name) is str else None
    if (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, (StopIteration, StopAsyncIteration))
    ):
        try:
            exc = cls(message)
        except Exception:
            exc = None
        if exc is not None:
            raise exc
    raise CandidateError(f"{_text(name)}: {_text(message)}")


def _sync(old, new):
    """Make the test's object `old` hold the program's post-call state `new`, keeping the identity of `old` and of
    the containers inside it (what a call in one interpreter would have left)."""
    if type(old) is list and type(new) is list:
        for i in range(min(len(old), len(new))):
            if not _sync(old[i], new[i]):
                old[i] = new[i]
        del old[len(new) :]
        old.extend(new[len(old) :])
        return True
    if type(old) is dict and type(new) is dict:
        for k in [k for k in old if k not in new]:
            del old[k]
        for k, v in new.items():
            if k not in old or not _sync(old[k], v):
                old[k] = v
        return True
    if type(old) is set and type(new) is set:
        old.clear()
        old.update(new)
        return True
    if type(old) is tuple and type(new) is tuple and len(old) == len(new):
        return all([_sync(o, n) or o == n for o, n in zip(old, new)])  # every element, no short cut
    return False


def _state_fits(state, kw_state, args, kwargs):
    """Whether an `ok` answer's post-call state has the shape of the call: `None`, or one value per argument (and a
    dict of keyword arguments by name)."""
    if state is not None and (type(state) not in (list, tuple) or len(state) != len(args)):
        return False
    return kw_state is None or (type(kw_state) is dict and all(type(k) is str and k in kwargs for k in kw_state))


def make_candidate(channel, name):
    """The `candidate` the test calls: forwards the call to the program and returns its decoded result."""

    def candidate(*args, **kwargs):
        if channel.broken is not None:
            raise channel.broken
        try:
            channel.send(("call", args, kwargs))
        except wire.WireError as exc:
            # Before the program answered anything the test's values are the test's own; after, they may hold what
            # the program answered (too large or too deep to send back): the program's failure, never a skip.
            kind = "error" if channel.answered else "invalid"
            channel.broken = ChannelBroken(kind, f"the test passes a value that cannot be sent ({exc})")
            raise channel.broken from None
        except ChannelBroken as exc:
            channel.broken = exc
            raise
        answer = channel.receive()
        channel.answered = True
        if answer[0] == "ok" and len(answer) == 4 and _state_fits(answer[2], answer[3], args, kwargs):
            try:
                for old, new in zip(args, answer[2] or ()):
                    _sync(old, new)
                for key, new in (answer[3] or {}).items():
                    if key in kwargs:
                        _sync(kwargs[key], new)
            except Exception:  # (a RecursionError, a state the test's objects cannot take): never the test's
                channel.broken = ChannelBroken("error", "the program's answer does not fit the call's arguments")
                raise channel.broken from None
            return answer[1]
        if answer[0] == "raise" and len(answer) == 3:
            _raise_from_candidate(answer[1], answer[2])
        if answer[0] == "bad" and len(answer) == 2:
            channel.broken = ChannelBroken("error", f"the candidate returned {_text(answer[1])}")
            raise channel.broken
        channel.broken = ChannelBroken("error", "the program's answer is not a message")
        raise channel.broken

    candidate.__name__ = candidate.__qualname__ = name
    return candidate


# ------------------------------------------------------------------------------------------------- verdicts


def _failure(exc):
    if isinstance(exc, ChannelBroken):
        return f"{exc.kind} {exc.why}"
    if isinstance(exc, AssertionError):
        return "wrong assertion failed"
    if isinstance(exc, MemoryError):
        return "memory MemoryError"
    # Only a string argument is shown: str() of an exception holding a program's value could cost without bound.
    text = _text(exc.args[0]) if len(exc.args) == 1 and type(exc.args[0]) is str else ""
    return f"error {type(exc).__name__}" + (f": {text}" if text else "")


def _ready(channel, spec):
    channel.send(("init", spec["mode"], spec["name"], spec.get("module", "solution"), spec.get("prelude", "")))
    hello = channel.receive()
    if hello[0] == "error" and len(hello) == 2:
        raise ChannelBroken("error", f"the program raised {_text(hello[1])}")
    if hello[0] != "ready" or len(hello) != 2:
        raise ChannelBroken("error", "the program's answer is not a message")
    if hello[1] is not True:
        raise ChannelBroken("error", f"{spec['name']} is not defined")


def judge_call(channel, spec):
    """The verdict on one `call` test case."""
    _ready(channel, spec)
    channel.send(("call", tuple(spec["args"]), {}))
    answer = channel.receive(json_like=True)
    channel.answered = True
    if answer[0] == "ok" and len(answer) == 4:
        return "pass" if call_result_matches(answer[1], spec["expected"]) else "wrong wrong return value"
    if answer[0] == "raise" and len(answer) == 3:
        kind = "memory" if answer[1] == "MemoryError" else "error"
        return f"{kind} the candidate raised {_text(answer[1])}: {_text(answer[2])}"
    if answer[0] == "bad" and len(answer) == 2:
        return f"error the candidate returned {_text(answer[1])}"
    return "error the program's answer is not a message"


def _names(code):
    """Every name a code object or the code objects inside it use (globals, attributes, stores): a superset."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _test_namespace(spec):
    import builtins

    ns = {"__name__": "__check__", "__builtins__": builtins}
    try:
        test = compile(spec["test"], "test.py", "exec")
    except SyntaxError as exc:
        raise ChannelBroken("invalid", f"the test code failed: SyntaxError: {exc}") from None
    try:
        context = compile(spec.get("context") or "", "prompt.py", "exec")
    except SyntaxError:  # a prompt that is not a module on its own: its import lines
        context = compile(spec.get("prelude") or "", "prelude.py", "exec")
    # The prompt runs only when the test may use a name it defines (HumanEval/32's `poly`): most only call
    # `candidate`, and a prompt's `from typing import List` alone would cost more than the rest of the judge. The
    # function under test does not count: its name is bound to the candidate ([`judge_check`]), never to the
    # prompt's body-less stub.
    try:
        if _names(test) & (set(context.co_names) - {spec["name"]}):
            exec(context, ns)
        exec(test, ns)
    except BaseException as exc:
        raise ChannelBroken("invalid", f"the test code failed: {type(exc).__name__}: {exc}") from None
    if not callable(ns.get("check")):
        raise ChannelBroken("invalid", "the test defines no check(candidate)")
    return ns


def judge_check(channel, spec, ns):
    """The verdict on a HumanEval-style `check` run, the test's namespace `ns` built ([`_test_namespace`])."""
    _ready(channel, spec)
    candidate = make_candidate(channel, spec["name"])
    # A test may call the function under test by its name as well as `candidate` (HumanEval/33 compares with
    # `sort_third(...)`): that name is the program's own definition, as in HumanEval's harness, where the prompt,
    # the completion and the test share one namespace; the prompt's stub (a docstring, returning None) never is.
    ns[spec["name"]] = candidate
    try:
        ns["check"](candidate)
    except BaseException as exc:
        if channel.broken is not None:  # whatever the test made of it
            raise channel.broken from None
        return _failure(exc)
    if channel.broken is not None:  # the test caught it
        raise channel.broken
    return "pass"


def _limit(name, value):
    res = getattr(resource, name)
    hard = resource.getrlimit(res)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(res, (value, hard))


def main():
    """Read the spec, judge, write the verdict line (run by the executor, see the module docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in ("", here):  # only there to import this module and `wire`: not for the test's imports
        while entry in sys.path:
            sys.path.remove(entry)
    verdict_fd = os.dup(1)
    os.dup2(2, 1)  # what the test code prints goes to stderr, never into the verdict
    # Stage 1: nothing of the program's is read here; a failure is the test's or the sandbox's (`invalid`).
    try:
        raw = sys.stdin.buffer.read()
        spec = wire.decode(raw)
        # SIGXCPU (the soft limit) ends the process as the hard one would: a judge without a verdict
        _limit("RLIMIT_CPU", spec["cpu_s"])
        _limit("RLIMIT_AS", spec["memory_bytes"])
        _limit("RLIMIT_CORE", 0)  # a judge ended by a signal writes no core file
        os.chdir(spec["cwd"])
        start = time.monotonic()
        channel = Channel(spec["req_fd"], spec["resp_fd"], start + spec["budget"], spec["max_bytes"])
        ns = _test_namespace(spec) if spec["mode"] == "check" else None
        for key in ("args", "expected"):  # large JSON texts come as they are (see `Harness.judge_spec`)
            if key + "_json" in spec:
                import json

                spec[key] = json.loads(spec.pop(key + "_json"))
    except ChannelBroken as exc:  # a test without `check`
        _write(verdict_fd, _failure(exc), end=True)
    except BaseException as exc:
        _write(verdict_fd, f"invalid judge failure: {type(exc).__name__}: {exc}", end=True)
    # Stage 2: from here on every failure is the program's (see the module docstring).
    _write(verdict_fd, "judging")
    reserve = bytearray(1 << 20)  # given back on a MemoryError, so that the verdict can still be written
    try:
        verdict = judge_call(channel, spec) if ns is None else judge_check(channel, spec, ns)
    except ChannelBroken as exc:
        verdict = _failure(exc)
    except MemoryError:
        del reserve
        verdict = "memory the judge ran out of memory on the program's answers"
    except BaseException as exc:
        verdict = f"error the judge could not use the program's answers ({type(exc).__name__})"
    _write(verdict_fd, verdict, end=True)


def _write(fd, line, end=False):
    """One line on the verdict descriptor; with `end`, the verdict: the judge exits."""
    os.write(fd, (line.replace("\n", " ")[:1000] + "\n").encode("utf-8", "replace"))
    if end:
        os._exit(0)


if __name__ == "__main__":
    main()
