#!/usr/bin/env python3
"""Writes the records docket's zstd dictionary is trained on (store/zstd/README.md).

Every record of at least 128 bytes (what the store compresses, FORMAT.md §2) in the golden
logs' segment files, uncompressed, except the `geo` shape's, which the engine benchmark
measures and the dictionary therefore never saw; one file per record, in a sorted order,
so that the same fixtures give the same training set.

Usage: python3 store/zstd/train_records.py OUT_DIR   (needs the `zstd` command)
"""
import glob
import os
import struct
import subprocess
import sys

SEGMENT_HEADER = 32
BATCH_HEADER = 12


def expand(frame):
    return subprocess.run(["zstd", "-d", "-c"], input=frame, capture_output=True, check=True).stdout


def records(path):
    seg = open(path, "rb").read()
    at = SEGMENT_HEADER
    while at + BATCH_HEADER <= len(seg) and seg[at:at + 4] == b"DKTB":
        length = struct.unpack("<I", seg[at + 4:at + 8])[0]
        payload = seg[at + BATCH_HEADER:at + BATCH_HEADER + length]
        p = 0
        while p < len(payload):
            n = struct.unpack("<I", payload[p:p + 4])[0]
            tag, body = payload[p + 4], payload[p + 5:p + 4 + n]
            if tag == 1:  # event: canonical body, prev, hash
                yield body[:-64]
            elif tag == 2:  # blob: hash, content
                yield body[32:]
            elif tag == 3:  # compressed event (plain zstd in these fixtures)
                yield expand(body[:-64])
            elif tag == 4:  # compressed blob
                yield expand(body[32:])
            p += 4 + n
        at += BATCH_HEADER + length


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")
    n = 0
    for path in sorted(glob.glob(os.path.join(root, "*", "*", "log", "*.seg"))):
        if path.split(os.sep)[-3] == "geo":
            continue
        for record in records(path):
            if len(record) >= 128:
                with open(os.path.join(out, f"{n:05d}"), "wb") as f:
                    f.write(record)
                n += 1
    print(f"{n} records in {out}")


if __name__ == "__main__":
    main()
