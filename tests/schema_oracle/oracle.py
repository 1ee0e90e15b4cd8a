"""The independent side of the differential test of callbackd's schema validator.

Reads one JSON request per line on stdin, {"schema": S, "draft": "2020-12" | "7",
"instances": [I, ...]}, and answers
one line per request on stdout: {"valid": [bool, ...]}, or {"error": "..."} when the oracle
cannot judge (for instance S is not a valid draft 2020-12 schema). The first line it writes
is {"ready": "<jsonschema version>"}; if the package is missing it writes {"missing": "..."}
and exits 3, so the Rust side can say so instead of guessing.

The oracle is the `jsonschema` package's Draft202012Validator (Draft7Validator for the draft 7
spellings callbackd also reads: `items` as a list with `additionalItems`, `definitions`),
with settings that make
it judge JSON as JSON Schema means it rather than as Python sees it:
- numbers are read as exact decimals (json.loads(parse_float=Decimal), with a context wide
  enough that `%` never rounds), so `multipleOf` and the bounds are decided on the number as
  written; `integer` is then any number without a fractional part (`1.0` included);
- `pattern` is ECMA-262 (JSON Schema's dialect), not Python's `re`: the few constructs whose
  meaning differs are rewritten before `re.search` (see ecma_to_python).
"""
import decimal
import json
import re
import sys
from decimal import Decimal

try:
    import jsonschema
    from jsonschema import validators
    from jsonschema.exceptions import ValidationError
except ImportError as e:  # the Rust side reports this as "oracle missing"
    print(json.dumps({"missing": str(e)}), flush=True)
    sys.exit(3)

decimal.getcontext().prec = 5000
decimal.getcontext().Emax = decimal.MAX_EMAX
decimal.getcontext().Emin = decimal.MIN_EMIN

# ECMA-262 WhiteSpace and LineTerminator: what \s means there.
ECMA_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
CLASS = {"d": "0-9", "w": "0-9A-Za-z_", "s": ECMA_SPACE}


def ecma_to_python(src):
    """Rewrites the ECMA-262 constructs Python's re reads differently:
    `\\d`, `\\w`, `\\s` are ASCII digits, ASCII word characters and ECMA whitespace (Python:
    Unicode classes); `.` stops at every line terminator (Python: only at \\n); `$` is the
    very end (Python: also before a final \\n). `\\b` is ASCII through re.ASCII (the classes
    above are explicit, so the flag changes nothing else)."""
    out, i, in_class = [], 0, False
    while i < len(src):
        c = src[i]
        if c == "\\" and i + 1 < len(src):
            e = src[i + 1]
            i += 2
            if e.lower() in CLASS:
                if in_class:
                    out.append(CLASS[e])  # the generator uses no negated escapes in brackets
                else:
                    out.append("[" + ("^" if e.isupper() else "") + CLASS[e.lower()] + "]")
            else:
                out.append("\\" + e)
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if src[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if src[i + 1 : i + 2] == "]":
                out.append("\\]")
                i += 1
        elif c == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
        elif c == "$":
            out.append("\\Z")
        else:
            out.append(c)
        i += 1
    return re.compile("".join(out), re.ASCII)


def is_integer(checker, instance):
    if isinstance(instance, bool):
        return False
    if isinstance(instance, int):
        return True
    return isinstance(instance, Decimal) and instance.is_finite() and instance == instance.to_integral_value()


def pattern(validator, patrn, instance, schema):
    if validator.is_type(instance, "string") and not ecma_to_python(patrn).search(instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def oracle(base):
    return base, validators.extend(
        base,
        validators={"pattern": pattern},
        type_checker=base.TYPE_CHECKER.redefine("integer", is_integer),
    )


ORACLES = {
    "2020-12": oracle(validators.Draft202012Validator),
    "7": oracle(validators.Draft7Validator),
}


def judge(request):
    schema = request["schema"]
    base, cls = ORACLES[request.get("draft", "2020-12")]
    base.check_schema(schema)
    v = cls(schema)
    return [v.is_valid(i) for i in request["instances"]]


def main():
    from importlib.metadata import version

    print(json.dumps({"ready": version("jsonschema")}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = {"valid": judge(json.loads(line, parse_float=Decimal))}
        except Exception as e:  # noqa: BLE001 - any failure is reported, not fatal
            answer = {"error": f"{type(e).__name__}: {e}"[:2000]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
