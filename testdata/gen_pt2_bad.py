#!/usr/bin/python3
"""Hostile and malicious `.pt2` files derived from real ones (issue 15), and what ckpt must do with each.

    python3 testdata/gen_pt2_bad.py [OUTDIR]     # OUTDIR defaults to testdata/pt2/bad; no torch needed

Reads testdata/pt2/t214/*.pt2 and t26/*.pt2 (run gen_pt2.py first), edits members by hand (this is
the one place where bytes are hand-made: hostile input), and rewrites the zip with Python's zipfile
(stored, 1980-01-01 timestamps, so reruns are byte-identical). Writes OUTDIR/expected.json, format in
testdata/EXPECTED.md ("testdata/pt2/bad/expected.json"):

- reader cases (`command: summary`): exit 3, one-line error naming the file, `member` (when not null)
  and `json_pointer` (when not null, RFC 6901 as nlohmann::json::json_pointer prints it);
- scan cases (`command: check`): exit 1 and `findings` as in testdata/check/expected.json
  (every entry matched by a finding with that id whose location contains every `where_contains`).

The pickles put in here name os.system / posix.system with the argument "true"; ckpt never runs
them, and nothing in this script unpickles them.
"""

import io
import json
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATE = (1980, 1, 1, 0, 0, 0)

# os.system("true") as protocol 2: PROTO, GLOBAL, BINUNICODE, TUPLE1, REDUCE, STOP.
PAYLOAD = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R."


def read_members(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_zip(path, members, deflate=()):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, DATE)
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)


def replace(members, name, data):
    assert any(n == name for n, _ in members), name
    return [(n, data if n == name else d) for n, d in members]


def with_pickle(torch_save_zip, payload=PAYLOAD):
    """A torch.save zip (bytes) with its data.pkl replaced by `payload`; returns (bytes, data.pkl name)."""
    inner = read_members(io.BytesIO(torch_save_zip))
    pkl = next(n for n, _ in inner if n.endswith("/data.pkl"))
    buf = io.BytesIO()
    write_zip(buf, replace(inner, pkl, payload))
    return buf.getvalue(), pkl


def edit_json(members, name, fn, raw=None):
    doc = json.loads(dict(members)[name])
    fn(doc)
    text = raw(doc) if raw else json.dumps(doc)
    return replace(members, name, text.encode())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "pt2", "bad")
    os.makedirs(out, exist_ok=True)
    src = os.path.join(HERE, "pt2", "t214", "convbn.pt2")
    base = read_members(src)
    P = "convbn/"
    CFG = P + "data/weights/model_weights_config.json"
    MODEL = P + "models/model.json"
    expected = {}

    def reader_case(name, members, member, pointer, why, deflate=()):
        write_zip(os.path.join(out, name), members, deflate)
        expected[name] = {"command": "summary", "exit": 3, "member": member, "json_pointer": pointer,
                          "source": "t214/convbn.pt2", "why": why}

    # 1. models/*.json that is not JSON.
    text = dict(base)[MODEL]
    reader_case("broken_model_json.pt2", replace(base, MODEL, text[: len(text) // 2]), MODEL, None,
                "models/model.json cut in half: a JSON parse error; name the member (and its byte offset)")

    # 2-3. weight paths outside the archive.
    def set_path(v):
        return lambda d: d["config"]["fc.weight"].__setitem__("path_name", v)

    ptr = "/config/fc.weight/path_name"
    reader_case("weight_path_dotdot.pt2", edit_json(base, CFG, set_path("../../x")), CFG, ptr,
                "path_name escapes data/weights/ (..): must be refused, nothing outside the archive read")
    reader_case("weight_path_absolute.pt2", edit_json(base, CFG, set_path("/etc/passwd")), CFG, ptr,
                "absolute path_name: must be refused, nothing outside the archive read")

    # 4. declared size larger than the stored bytes (fc.weight is 5x64 float32 = 1280 bytes).
    def bigger(d):
        d["config"]["fc.weight"]["tensor_meta"]["sizes"][0] = {"as_int": 50}
    reader_case("size_mismatch.pt2", edit_json(base, CFG, bigger), CFG, "/config/fc.weight/tensor_meta/sizes",
                "sizes say 50x64 float32 (12800 bytes) but data/weights/weight_4 holds 1280: exit 3 naming the "
                "tensor's config entry (the weight member may be named too)")

    # 5. stored bytes shorter than declared: the weight file itself truncated.
    cut = [(n, d[:100] if n == P + "data/weights/weight_4" else d) for n, d in base]
    reader_case("weight_file_short.pt2", cut, P + "data/weights/weight_4", None,
                "data/weights/weight_4 holds 100 bytes, fc.weight needs 1280 (summary may report this lazily, "
                "but load/diff must refuse; summary must not read past the member)")

    # 6. a million dimensions (deflated: 13 MB of JSON in a few KB).
    def many_dims(d):
        tm = d["config"]["fc.weight"]["tensor_meta"]
        tm["sizes"] = [{"as_int": 1}] * 1_000_000
        tm["strides"] = [{"as_int": 1}] * 1_000_000
    reader_case("huge_dim_count.pt2", edit_json(base, CFG, many_dims), CFG, "/config/fc.weight/tensor_meta/sizes",
                "1e6 dimensions: refuse by a dimension limit, in bounded memory and time", deflate={CFG})

    # 7. a dimension of 2^62 (numel * itemsize overflows int64).
    def huge_dim(d):
        d["config"]["fc.weight"]["tensor_meta"]["sizes"][0] = {"as_int": 2**62}
    reader_case("huge_dim_value.pt2", edit_json(base, CFG, huge_dim), CFG, "/config/fc.weight/tensor_meta/sizes/0",
                "a dimension of 2^62: byte size overflows; refuse without wrapping around")

    # 8. the same tensor name twice in the weights config (JSON text with a duplicate key).
    def dup(d):
        return None
    cfg = json.loads(dict(base)[CFG])
    entry = json.dumps(cfg["config"]["fc.bias"])
    text = json.dumps(cfg)
    needle = '"fc.bias": ' + entry
    assert needle in text
    text = text.replace(needle, needle + ', "fc.bias": ' + entry)
    reader_case("duplicate_tensor_name.pt2", replace(base, CFG, text.encode()), CFG, "/config/fc.bias",
                "fc.bias appears twice as a key of config: JSON parsers keep one silently; refuse")

    # 9. the archive cut short (no central directory).
    whole = open(src, "rb").read()
    with open(os.path.join(out, "truncated.pt2"), "wb") as f:
        f.write(whole[: len(whole) * 2 // 3])
    expected["truncated.pt2"] = {"command": "summary", "exit": 3, "member": None, "json_pointer": None,
                                 "source": "t214/convbn.pt2 (the original bytes, first 2/3)",
                                 "why": "no end of central directory: a one-line zip error with a byte offset"}

    # 10. config pointing at a member that is not there.
    reader_case("missing_weight_member.pt2", edit_json(base, CFG, set_path("weight_99")), CFG, ptr,
                "path_name weight_99 names no member (the error may name data/weights/weight_99 too)")

    # 11. a use_pickle weight that is not a torch.save zip at all.
    pw = read_members(os.path.join(HERE, "pt2", "t214", "pickled_weights.pt2"))
    reader_case("use_pickle_garbage.pt2",
                replace(pw, "pickled_weights/data/weights/weight_0", b"not a pickle"),
                "pickled_weights/data/weights/weight_0", None,
                "use_pickle weight whose bytes are neither a zip nor a pickle")
    expected["use_pickle_garbage.pt2"]["source"] = "t214/pickled_weights.pt2"

    # ------------------------------------------------------------------ check: pickles in every place
    def check_case(name, members, where, source, why):
        write_zip(os.path.join(out, name), members)
        expected[name] = {"command": "check", "exit": 1, "source": source, "why": why,
                          "findings": [{"id": "dangerous-global", "where_contains": where}]}

    si = P + "data/sample_inputs/model.pt"
    blob, pkl = with_pickle(dict(base)[si])
    check_case("malicious_sample_inputs.pt2", replace(base, si, blob), [si, pkl], "t214/convbn.pt2",
               "data/sample_inputs/model.pt's data.pkl calls os.system: the location names outer and inner member")

    w0 = "pickled_weights/data/weights/weight_0"
    blob, pkl = with_pickle(dict(pw)[w0])
    check_case("malicious_pickled_weight.pt2", replace(pw, w0, blob), [w0, pkl], "t214/pickled_weights.pt2",
               "the use_pickle weight (a torch.save zip) calls os.system")

    check_case("malicious_bare_constant.pt2", base + [(P + "data/constants/opaque_obj_0", PAYLOAD)],
               [P + "data/constants/opaque_obj_0"], "t214/convbn.pt2",
               "a bare pickle where torch 2.14 keeps pickled opaque constants (pickle.loads)")

    old = read_members(os.path.join(HERE, "pt2", "t26", "convbn.pt2"))
    blob, pkl = with_pickle(dict(old)["serialized_example_inputs.pt"])
    check_case("malicious_t26_example_inputs.pt2", replace(old, "serialized_example_inputs.pt", blob),
               ["serialized_example_inputs.pt", pkl], "t26/convbn.pt2",
               "torch 2.6 layout: serialized_example_inputs.pt's data.pkl calls os.system")

    # Nesting: a torch.save zip in a zip in a zip ... 40 deep, the payload at the bottom. The scan
    # must stop at its depth limit and say it did not look further.
    inner = PAYLOAD
    for i in range(40):
        buf = io.BytesIO()
        write_zip(buf, [(f"n{i}/data.pkl" if i == 0 else f"n{i}/nested.pt", inner)])
        inner = buf.getvalue()
    write_zip(os.path.join(out, "nested_deep.pt2"), replace(base, si, inner))
    expected["nested_deep.pt2"] = {
        "command": "check", "exit": 0, "exit_fail_on_warning": 1, "source": "t214/convbn.pt2",
        "why": "sample_inputs is a zip nested 40 deep; the scan stops at its depth limit and reports it",
        "findings": [{"id": "scan-incomplete", "where_contains": [si]}]}

    # Many nested archives: one member holding 300 small torch.save-like zips, each clean.
    clean = b"\x80\x02}q\x00."  # an empty dict
    blobs = []
    for i in range(300):
        buf = io.BytesIO()
        write_zip(buf, [(f"a{i}/data.pkl", clean)])
        blobs.append((f"b{i}.pt", buf.getvalue()))
    buf = io.BytesIO()
    write_zip(buf, blobs)
    write_zip(os.path.join(out, "nested_many.pt2"), base + [(P + "extra/blobs.pt", buf.getvalue())])
    expected["nested_many.pt2"] = {
        "command": "check", "exit": 0, "exit_fail_on_warning": 1, "source": "t214/convbn.pt2",
        "why": "a member holding 300 nested torch.save zips: more than the scan's budget of nested archives "
               "(256); it reports the rest unscanned",
        "findings": [{"id": "scan-incomplete", "where_contains": [P + "extra/blobs.pt:"]}]}

    # Native code: the real AOTInductor packages (no edits) must give native-code.
    for rel, art in (("../t26/aoti_small.pt2", ".so"), ("../t214/aoti_cpp_only.pt2", ".cpp")):
        with zipfile.ZipFile(os.path.join(out, rel)) as z:
            hits = [n for n in z.namelist() if n.endswith(art)]
        assert hits, rel
        expected[rel] = {"command": "check", "exit": 1, "source": rel[3:], "why": "an AOTInductor package ships "
                         "native code that loading it runs", "findings": [{"id": "native-code", "where_contains": [hits[0]]}]}

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    for n in sorted(expected):
        print(n, expected[n]["command"])


if __name__ == "__main__":
    main()
