"""Generates callbackd_client/schema.py (TypedDicts) from callbackd's OpenAPI document.

    python gen_types.py <daemon URL | openapi.json file>           writes callbackd_client/schema.py
    python gen_types.py --check <daemon URL | openapi.json file>   exits 1 when it differs

A daemon URL is its base (http://127.0.0.1:7420) or the document's own URL; the document needs
no token. Each object schema becomes a TypedDict (optional properties `NotRequired`, nullable
ones `Optional`), `StreamEvent`'s `oneOf` becomes one TypedDict per event type (`StepEvent`,
`CompletedEvent`, ...) and a Union of them, enums become Literals, schema-less fields `Any`.
Standard library only.
"""
from __future__ import annotations

import json
import keyword
import sys
import urllib.request
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "callbackd_client" / "schema.py"

HEADER = '''"""The run API's types, generated from callbackd's /v1/openapi.json by gen_types.py.

Do not edit: regenerate with `python gen_types.py <daemon URL>`.
"""
from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict, Union
'''


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", "_").split("_") if p)


class Gen:
    def __init__(self, doc: dict[str, Any]):
        self.schemas: dict[str, Any] = doc.get("components", {}).get("schemas", {})
        self.classes: list[str] = []     # TypedDict definitions, in order
        self.aliases: list[str] = []     # Union / Literal aliases, after the classes

    def ref(self, s: dict[str, Any]) -> str:
        return str(s["$ref"]).rsplit("/", 1)[1]

    def ty(self, s: Any, hint: str) -> str:
        """The Python type of schema `s`; `hint` names a class for an inline object."""
        if s is True or s == {} or s is None:
            return "Any"
        if "$ref" in s:
            return self.ref(s)
        for key in ("anyOf", "oneOf"):
            if key in s and "discriminator" not in s:
                parts = [self.ty(x, hint) for x in s[key]]
                nonnull = [p for p in parts if p != "None"]
                inner = nonnull[0] if len(nonnull) == 1 else f"Union[{', '.join(nonnull)}]"
                return f"Optional[{inner}]" if "None" in parts else inner
        if "const" in s:
            return f"Literal[{json.dumps(s['const'])}]"
        if "enum" in s:
            vals = [v for v in s["enum"] if v is not None]
            lit = f"Literal[{', '.join(json.dumps(v) for v in vals)}]"
            return f"Optional[{lit}]" if None in s["enum"] else lit
        types = s.get("type")
        if isinstance(types, list):
            nonnull = [t for t in types if t != "null"]
            inner = self.ty({**s, "type": nonnull[0]}, hint) if len(nonnull) == 1 else "Any"
            return f"Optional[{inner}]" if "null" in types else inner
        if types == "string":
            return "str"
        if types == "integer":
            return "int"
        if types == "number":
            return "float"
        if types == "boolean":
            return "bool"
        if types == "null":
            return "None"
        if types == "array":
            return f"list[{self.ty(s.get('items', True), hint + 'Item')}]"
        if types == "object" or "properties" in s:
            if s.get("properties"):
                return self.typed_dict(hint, s)
            extra = s.get("additionalProperties", True)
            return f"dict[str, {self.ty(extra, hint + 'Value')}]"
        return "Any"

    def typed_dict(self, name: str, s: dict[str, Any]) -> str:
        required = set(s.get("required", []))
        fields = []
        for prop, sub in sorted(s["properties"].items()):
            t = self.ty(sub, name + camel(prop))
            fields.append((prop, t if prop in required else f"NotRequired[{t}]"))
        doc = (s.get("description") or "").strip()
        if all(p.isidentifier() and not keyword.iskeyword(p) for p, _ in fields):
            lines = [f"class {name}(TypedDict):"]
            if doc:
                lines.append(f'    """{doc}"""' if '"""' not in doc and "\\" not in doc else "")
            lines += [f"    {p}: {t}" for p, t in fields] or ["    pass"]
            self.classes.append("\n".join(line for line in lines if line))
        else:
            body = ", ".join(f"{json.dumps(p)}: {t}" for p, t in fields)
            self.classes.append(f"{name} = TypedDict({json.dumps(name)}, {{{body}}})")
        return name

    def top(self, name: str, s: Any) -> None:
        if isinstance(s, dict) and "discriminator" in s and "oneOf" in s:
            prop = s["discriminator"]["propertyName"]
            members = []
            for variant in s["oneOf"]:
                if "$ref" in variant:
                    members.append(self.ref(variant))
                    continue
                tag_schema = variant["properties"][prop]
                tag = tag_schema["const"] if "const" in tag_schema else tag_schema["enum"][0]
                members.append(self.typed_dict(camel(tag) + "Event", variant))
            self.aliases.append(f"{name} = Union[\n" + "".join(f"    {m},\n" for m in members) + "]")
        elif isinstance(s, dict) and s.get("properties"):
            self.typed_dict(name, s)
        else:
            self.aliases.append(f"{name} = {self.ty(s, name)}")

    def render(self) -> str:
        for name, s in self.schemas.items():
            self.top(name, s)
        return HEADER + "\n\n" + "\n\n\n".join(self.classes + self.aliases) + "\n"


def load(src: str) -> dict[str, Any]:
    if src.startswith(("http://", "https://")):
        url = src if src.endswith(".json") else src.rstrip("/").removesuffix("/v1") + "/v1/openapi.json"
        with urllib.request.urlopen(url, timeout=30) as r:
            doc = json.load(r)
    else:
        doc = json.loads(Path(src).read_text())
    if not isinstance(doc, dict):
        raise SystemExit(f"{src} is not an OpenAPI document")
    return doc


def main(argv: list[str]) -> int:
    check = bool(argv) and argv[0] == "--check"
    rest = argv[1:] if check else argv
    if len(rest) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    text = Gen(load(rest[0])).render()
    if check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.name} differs from the types generated from {rest[0]}; run `python gen_types.py {rest[0]}`",
                  file=sys.stderr)
            return 1
        print(f"{OUT.name} is up to date", file=sys.stderr)
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
