#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_json and fuzz_remote (fuzz/corpus/json/, fuzz/corpus/remote/) from
the fixtures of testdata/ and from responses shaped as the Hub, S3 and nginx send them (tests/remote/).
Run: python3 fuzz/gen_seeds.py   (deterministic; the seeds are committed with git add -f: .gitignore keeps
what fuzzers add under fuzz/corpus/ out)"""
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARD = "model-00001-of-00001.safetensors"


def header_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def small_header(real, limit=256):
    """The real header's first tensors, re-laid as F32 / BF16 within `limit` bytes of data."""
    out, at = {}, 0
    if "__metadata__" in real:
        out["__metadata__"] = real["__metadata__"]
    for name, t in real.items():
        if name == "__metadata__":
            continue
        dtype = t["dtype"] if t["dtype"] in ("F32", "BF16", "F16") else "F32"
        size = {"F32": 4, "BF16": 2, "F16": 2}[dtype]
        shape = [2, 3] if at + 6 * size <= limit else None
        if shape is None:
            break
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + 6 * size]}
        at += 6 * size
    return out


def json_seeds(out):
    seeds = {}
    for model in ("hf523/gpt2_tied", "hf523/llama_gqa_bf16", "hf211/bert_enc"):
        d = os.path.join(ROOT, "testdata", model)
        config = open(os.path.join(d, "config.json"), "rb").read()
        shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        head = small_header(header_of(os.path.join(d, shards[0])))
        names = [k for k in head if k != "__metadata__"]
        index = json.loads(open(os.path.join(d, "model.safetensors.index.json")).read())
        index["weight_map"] = {k: SHARD for k in names}
        h = json.dumps(head, separators=(",", ":")).encode()
        tag = model.replace("/", "_")
        seeds[tag + "_sharded"] = config + b"\0" + json.dumps(index).encode() + b"\0" + h
        seeds[tag + "_single"] = config + b"\0\0" + h
    seeds["no_config_single"] = b"\0\0" + json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    seeds["config_not_object"] = b"[1, 2]\0\0{}"
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def remote_seeds(out):
    seeds = {
        "headers_206": (b"HTTP/1.1 206 Partial Content\r\nServer: nginx\r\nContent-Length: 1024\r\n"
                        b"Content-Range: bytes 0-1023/20318\r\nETag: \"6567-5e0c8a\"\r\nAccept-Ranges: bytes\r\n\r\n"),
        "headers_redirect": (b"HTTP/1.1 302 Found\r\nLocation: https://cdn.example/x\r\nContent-Length: 0\r\n\r\n"
                             b"HTTP/2 200\r\ncontent-length: 821\r\netag: W/\"abc\"\r\nlink: <https://hf.example/api/models/o/r/"
                             b"tree/main?recursive=true&cursor=Zm9v>; rel=\"next\"\r\n\r\n"),
        "headers_retry": b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Range: bytes */20318\r\n\r\n",
        "s3_error": (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
                     b"signature we calculated does not match</Message></Error>"),
        "hf_error": b"{\"error\":\"Repository Not Found for url: https://huggingface.co/api/models/o/r.\"}",
        "hf_listing": json.dumps([
            {"type": "file", "oid": "a" * 40, "size": 821, "path": "config.json"},
            {"type": "directory", "oid": "b" * 40, "size": 0, "path": "sub"},
            {"type": "file", "oid": "c" * 40, "size": 134, "path": "sub/model.safetensors",
             "lfs": {"oid": "d" * 64, "size": 256128, "pointerSize": 134}},
        ]).encode(),
        "link_two": b"<https://hf.example/a?cursor=1>; rel=\"prev\",<https://hf.example/a?cursor=3>; rel=next",
        "s3_listing": (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
                       b"2006-03-01/\"><Name>b</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>"
                       b"<Delimiter>/</Delimiter><IsTruncated>true</IsTruncated><Contents><Key>m/a&amp;b.pt</Key>"
                       b"<LastModified>2026-01-01T00:00:00.000Z</LastModified><Size>20318</Size></Contents>"
                       b"<CommonPrefixes><Prefix>m/shards/</Prefix></CommonPrefixes>"
                       b"<NextContinuationToken>1&#x2F;abc</NextContinuationToken></ListBucketResult>"),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def main():
    for name, fn in (("json", json_seeds), ("remote", remote_seeds)):
        d = os.path.join(ROOT, "fuzz", "corpus", name)
        os.makedirs(d, exist_ok=True)
        fn(d)


if __name__ == "__main__":
    main()
