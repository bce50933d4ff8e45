#!/usr/bin/env python3
"""ckpt's JSON documents against the JSON Schema files in schemas/ (draft 2020-12), for every runner in
tests/cli: each document names its schema in its `schema` field ("ckpt.summary/1"); that schema's file is
schemas/ckpt.summary-1.schema.json ("/" becomes "-"); the document must satisfy it. A document without a
`schema` field, with an id that has no file, or that breaks its schema is a problem, so a new output or
a renamed field fails the test that printed it until schemas/ says so.

Integers are strict here: ckpt writes counts without a fraction, and JSON Schema's `integer` would also
take 2.0, which would hide a count written as a double.

The validator is Debian's python3-jsonschema (4.10 in Debian 12; scripts/deps.sh installs it).

    json_schemas.py --root . --self-test   # the schema files are valid schemas, and the validator catches a broken document
    json_schemas.py --root . FILE...       # validate documents saved in files (one document, an array or JSON Lines)
"""
import argparse
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import jsonschema
except ImportError as _e:  # every validation then reports it: no test passes without the check
    jsonschema = None
    _IMPORT_ERROR = "python3-jsonschema is missing for %s (%s): scripts/deps.sh installs it" % (sys.executable, _e)


def schema_path(schema_id, root=ROOT):
    """The file of a schema id: ckpt.summary/1 -> schemas/ckpt.summary-1.schema.json."""
    return os.path.join(root, "schemas", schema_id.replace("/", "-") + ".schema.json")


def is_sarif(doc):
    """SARIF logs (check --format sarif) name the OASIS schema, not one of ckpt's: the SARIF test validates
    them against the official schema."""
    return isinstance(doc, dict) and "runs" in doc and ("sarif" in str(doc.get("$schema", "")).lower() or doc.get("version") == "2.1.0")


class Schemas:
    """The validators of schemas/, loaded once per id."""

    def __init__(self, root=ROOT):
        self.root = root
        self._validators = {}

    def validator(self, schema_id):
        """(validator, None) or (None, why not)."""
        if jsonschema is None:
            return None, _IMPORT_ERROR
        if schema_id not in self._validators:
            path = schema_path(schema_id, self.root)
            if not os.path.isfile(path):
                self._validators[schema_id] = (None, "no schema file %s for %r" % (os.path.relpath(path, self.root), schema_id))
            else:
                with open(path) as f:
                    schema = json.load(f)
                base = jsonschema.Draft202012Validator
                strict = base.TYPE_CHECKER.redefine("integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
                cls = jsonschema.validators.extend(base, type_checker=strict)
                self._validators[schema_id] = (cls(schema), None)
        return self._validators[schema_id]

    def problems(self, doc):
        """What is wrong with one parsed document: [] when it satisfies its schema."""
        if is_sarif(doc):
            return []
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
            return ["not a ckpt document: no \"schema\" field in %s" % json.dumps(doc)[:120]]
        v, why = self.validator(doc["schema"])
        if v is None:
            return [why]
        out = []
        for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            where = "/" + "/".join(str(p) for p in e.absolute_path)
            out.append("%s %s: %s" % (doc["schema"], where, e.message[:300]))
        return out[:10]

    def output_problems(self, text):
        """What is wrong with the JSON that one run printed: one document, an array of documents, or a
        stream of documents (JSON Lines, or several documents one after the other: several inputs)."""
        docs, dec, pos, values = [], json.JSONDecoder(), 0, 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos == len(text):
                break
            try:
                doc, pos = dec.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                return ["stdout is not JSON: %s" % e]
            docs += doc if isinstance(doc, list) else [doc]
            values += 1
        if not values:
            return ["stdout holds no JSON document"]
        out = []
        for d in docs:
            out += self.problems(d)
        return out


def wants_json(args):
    """Whether a command line asks ckpt for JSON (one document or JSON Lines)."""
    args = list(args)
    return any(a in ("--json", "--jsonl", "--format=json", "--format=jsonl", "-fjson", "-fjsonl") for a in args) or any(
        a in ("--format", "-f") and b in ("json", "jsonl") for a, b in zip(args, args[1:]))


def refs(node):
    """Every $ref in a schema (each file is self-contained: refs point into its own $defs)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def self_test(root):
    """The schema files are valid draft 2020-12 schemas with the $id and title of their name, their shared
    definitions are the same in every file, and the validator rejects documents that break them."""
    problems = []
    if jsonschema is None:
        return [_IMPORT_ERROR]
    files = sorted(f for f in os.listdir(os.path.join(root, "schemas")) if f.endswith(".schema.json"))
    shared = {}
    for name in files:
        schema = json.load(open(os.path.join(root, "schemas", name)))
        sid = name[: -len(".schema.json")]
        sid = sid[: sid.rfind("-")] + "/" + sid[sid.rfind("-") + 1:]
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            problems.append("%s: not a valid schema: %s" % (name, e.message))
        if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            problems.append("%s: $schema is not draft 2020-12" % name)
        if schema.get("$id") != "urn:ckpt:schema:" + sid or schema.get("title") != sid:
            problems.append("%s: $id / title do not name %s" % (name, sid))
        if schema.get("properties", {}).get("schema") != {"const": sid}:
            problems.append("%s: the schema field is not const %r" % (name, sid))
        closed = [k for k in ("additionalProperties", "unevaluatedProperties") if ('"%s": false' % k) in json.dumps(schema)]
        if closed:
            problems.append("%s: %s false: a /1 schema must let objects gain fields" % (name, ", ".join(closed)))
        for ref in refs(schema):
            if not (ref.startswith("#/$defs/") and ref[len("#/$defs/"):] in schema.get("$defs", {})):
                problems.append("%s: $ref %s names no definition of the file" % (name, ref))
        for key, d in schema.get("$defs", {}).items():
            if key in shared and shared[key][1] != d:
                problems.append("%s: $defs/%s differs from %s's" % (name, key, shared[key][0]))
            shared.setdefault(key, (name, d))
    if len(files) < 4:
        problems.append("only %d schema files in schemas/" % len(files))

    # Documents that break the schemas in known ways: each must be caught, at the right place.
    s = Schemas(root)
    summary = {
        "schema": "ckpt.summary/1", "file": "m.pt", "file_size": 10, "format": "torch-zip", "container": "zip", "prefix": "m",
        "content": "state_dict", "model_key": "", "pickle_protocol": 2, "records": {"version": "3"}, "split_inferred": False,
        "metadata": {},
        "totals": {k: 0 for k in ("tensors", "elements", "unique_elements", "storage_bytes", "file_storage_bytes", "bytes", "parameters",
                                  "trainable", "non_trainable", "buffers", "attributes", "parameter_bytes", "uninitialized", "meta",
                                  "storages")},
        "modules": [], "tensors": [], "warnings": [],
    }
    if s.problems(summary):
        problems.append("a valid summary document is rejected: %s" % s.problems(summary))

    def broken(what, change, where):
        doc = copy.deepcopy(summary)
        change(doc)
        found = s.problems(doc)
        if not found or (where and not any(where in p for p in found)):
            problems.append("not caught: %s (got %s)" % (what, found))

    broken("totals.parameters as a string", lambda d: d["totals"].update(parameters="26"), "/totals/parameters")
    broken("totals.parameters as 26.0", lambda d: d["totals"].update(parameters=26.0), "/totals/parameters")
    broken("a missing required field", lambda d: d["totals"].pop("buffers"), "'buffers' is a required property")
    broken("an unknown format", lambda d: d.update(format="gguf"), "/format")
    broken("a tensor kind outside the enum", lambda d: d["tensors"].append(
        {"name": "w", "dtype": "float32", "shape": [2], "stride": [1], "numel": 2, "bytes": 8, "kind": "weight", "kind_inferred": False,
         "state": "materialized", "requires_grad": False, "device": "cpu", "storage": "0", "offset": 0, "layout": "strided"}), "/tensors/0/kind")
    broken("a finding with severity 'fatal'", lambda d: d["warnings"].append(
        {"id": "meta-tensors", "severity": "fatal", "message": "m", "fix": "f", "where": []}), "/warnings/0/severity")
    broken("methods outside TorchScript", lambda d: d.update(methods=[]), None)
    check = {"schema": "ckpt.check/1", "file": "m.pt", "format": None, "fail_on": "error", "failed": False,
             "counts": {"error": 0, "warning": 1, "info": 0}, "read_error": "m.pt: not a checkpoint",
             "status": "incomplete",
             "findings": [{"id": "scan-incomplete", "severity": "warning", "message": "m", "fix": "f", "where": ["data.pkl+0x22"],
                           "locations": [{"where": "data.pkl+0x22", "file": None, "member": "data.pkl", "offset": 34,
                                          "opcode": "STACK_GLOBAL", "global": "posix.system"}]}]}
    diff = {"schema": "ckpt.diff/1", "a": {"file": "a.pt", "format": "torch-zip", "tensors": 1},
            "b": {"file": "b.pt", "format": "safetensors", "tensors": 1}, "values_compared": True, "atol": 0.0, "rtol": 0.0,
            "keys_equal": True, "prefix": None, "paired": 1, "only_in_a": [], "only_in_b": [],
            "changed": [{"a": "w", "b": "w", "dtype_a": "float32", "dtype_b": "float32", "shape_a": [2], "shape_b": [2],
                         "values_compared": True, "values_equal": False, "max_abs_diff": 1.0, "max_rel_diff": 0.5, "within_tolerance": False}],
            "max_abs_diff": 1.0, "equal": False, "within_tolerance": False}
    for doc in (check, diff):
        if s.problems(doc):
            problems.append("a valid %s document is rejected: %s" % (doc["schema"], s.problems(doc)))
    for what, doc, change, where in (
            ("a location offset as a string", check, lambda d: d["findings"][0]["locations"][0].update(offset="0x22"),
             "/findings/0/locations/0/offset"),
            ("a location without its null file", check, lambda d: d["findings"][0]["locations"][0].pop("file"),
             "/findings/0/locations/0"),
            ("status 'ok'", check, lambda d: d.update(status="ok"), "/status"),
            ("fail_on 'sometimes'", check, lambda d: d.update(fail_on="sometimes"), "/fail_on"),
            ("a rule id that is not kebab-case", check, lambda d: d["findings"][0].update(id="Scan Incomplete"), "/findings/0/id"),
            ("compared values without max_rel_diff", diff, lambda d: d["changed"][0].pop("max_rel_diff"), "/changed/0"),
            ("within_tolerance null with --values", diff, lambda d: d.update(within_tolerance=None), "/within_tolerance")):
        bad = copy.deepcopy(doc)
        change(bad)
        if not any(where in p for p in s.problems(bad)):
            problems.append("not caught: %s (got %s)" % (what, s.problems(bad)))
    extra = copy.deepcopy(summary)
    extra["totals"]["new_count"] = 1
    extra["a_new_field"] = {"x": 1}
    if s.problems(extra):
        problems.append("an additive field is rejected: %s" % s.problems(extra))
    if not s.problems({"schema": "ckpt.nothing/1"}):
        problems.append("an unknown schema id is accepted")
    if not s.problems({"file": "m.pt"}):
        problems.append("a document without a schema field is accepted")
    if not s.output_problems("File: m.pt\n"):
        problems.append("text is accepted as JSON")
    if s.output_problems(json.dumps(check) + "\n" + json.dumps(diff, indent=2) + "\n") or s.output_problems(json.dumps([check, check])):
        problems.append("a stream or an array of valid documents is rejected")
    if not s.output_problems(json.dumps(check) + "\n" + json.dumps(dict(diff, paired=-1)) + "\n"):
        problems.append("a broken document after a valid one is accepted")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    problems = self_test(a.root) if a.self_test else []
    s = Schemas(a.root)
    for f in a.files:
        problems += ["%s: %s" % (f, p) for p in s.output_problems(open(f).read())]
    for p in problems:
        print("FAIL:", p)
    print("schemas: %d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
