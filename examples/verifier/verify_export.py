#!/usr/bin/env python3
"""Reference verifier for docket exports (docs/export-format.md), written from that page
alone with off-the-shelf libraries: BLAKE3 (`blake3`), SHA-256 (`hashlib`) and, for
signed checkpoints, Ed25519 (`cryptography`).

    python3 verify_export.py RUN.jsonl [--key VERIFIER_KEY]
    python3 verify_export.py disclose RUN.jsonl SEQ DISCLOSURE

The second form checks a value revealed after a redacted export (`docket disclose` prints
the DISCLOSURE, base64url): that event SEQ of the export commits to it.

Exit 0 and one line saying what was checked when the export is sound; exit 1 and
"line N: why" at the first bad line. With --key, the checkpoint must be signed by that
key (the one you obtained from the instance's operator out of band); without it, the key
the export carries is used and the output says so.
"""

import base64
import hashlib
import json
import sys

import blake3

FORMAT = "docket.export.jsonl"
VERSIONS = (1, 2, 3, 4)  # 2 added `content` lines, 3 `disclosure` and `withheld` lines,
# 4 wrote `recorded_at_ns` as a decimal string
# The BLAKE3 derive-key contexts of docs/export-format.md: fixed, never read from the file.
EVENT_CONTEXT = "docket 2026-11-22 event hash v1"
GENESIS_CONTEXT = "docket 2026-11-22 stream genesis v1"
# The header's descriptions of the chain and the tree, exactly as the page gives them.
CHAIN_ALGORITHM = "BLAKE3 derive-key: hash = derive_key(event_context, prev \u2016 canonical body)"
TREE = {"algorithm": "RFC 9162 SHA-256", "leaf": "SHA-256(0x00 \u2016 record), leaf index = seq - 1"}
HEADER_FIELDS = {"type", "format", "version", "run", "events", "store_format", "chain", "tree"}


# Payload encoding 2 (docs/events.md#content-stored-once): where an event of kind_version 2
# may refer to content by hash; `*` is every element of an array.
CONTENT_POSITIONS = {
    "run.requested": ["/bundle_source", "/input"],
    "agent.call_scheduled": [
        "/request/context/handoff/original_request",
        "/request/decision_inputs/*/payload",
        "/request/context_inputs/*/payload",
    ],
    "agent.responded": ["/response/actions/*/payload"],
    "handoff.allowed": ["/delivered"],
    "tool.returned": ["/result"],
    "domain.written": ["/content"],
    "human.wrote_domain": ["/content"],
    "episode.finished": ["/result"],
    "run.completed": ["/output"],
}


# Payload encoding 3 (docs/events.md#values-committed-apart) commits to values at the same
# positions, and in an answer at every action's content.
COMMITTED_POSITIONS = dict(CONTENT_POSITIONS)
COMMITTED_POSITIONS["agent.responded"] = [
    "/response/actions/*/payload",
    "/response/actions/*/output",
    "/response/actions/*/content",
    "/response/actions/*/inputs",
]


def commitments(kind, payload):
    """(pointer, digest, named) of each value an encoding-3 payload commits to, or a reason:
    at a content position, {"_sd": [digest, ...], clear keys...} (an object, one digest per
    key committed apart) or {"...": digest} (a whole value)."""
    found = []

    def digest_ok(d):
        return isinstance(d, str) and len(d) == 43 and all(
            c.isascii() and (c.isalnum() or c in "-_") for c in d)

    def walk(value, steps, pointer):
        if not steps:
            if isinstance(value, dict) and isinstance(value.get("_sd"), list):
                for d in value["_sd"]:
                    if not digest_ok(d):
                        raise ValueError(f"the commitment at {pointer} holds a malformed digest")
                    found.append((pointer, d, True))
            elif isinstance(value, dict) and set(value) == {"..."} and digest_ok(value["..."]):
                found.append((pointer, value["..."], False))
            else:
                raise ValueError(f"the value at {pointer} is not a commitment")
            return
        step, rest = steps[0], steps[1:]
        if step == "*":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    walk(item, rest, f"{pointer}/{i}")
        elif isinstance(value, dict) and step in value:
            walk(value[step], rest, f"{pointer}/{step}")

    for position in COMMITTED_POSITIONS.get(kind, []):
        walk(payload, position.split("/")[1:], "")
    return found


def disclosure_digest(disclosure):
    """RFC 9901: SHA-256 of the disclosure's base64url text as given, base64url, no padding."""
    digest = hashlib.sha256(disclosure.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def unique_keys(pairs):
    """An object whose keys are each given once: JSON readers differ on which copy of a
    duplicated key they keep (RFC 8259 section 4), so an export names each key once."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def not_json(word):
    raise ValueError(f"{word} is not JSON")


def loads(text):
    """JSON with each key of every object given once."""
    return json.loads(text, object_pairs_hook=unique_keys, parse_constant=not_json)


def raw_member(text, name):
    """The text of the value of the top-level member `name` of the JSON object `text`,
    exactly as written (the line's keys are unique: `loads` read it first)."""
    decoder = json.JSONDecoder()
    space = " \t\n\r"
    i = len(text) - len(text.lstrip(space)) + 1  # past the opening brace
    while True:
        i += len(text[i:]) - len(text[i:].lstrip(space))
        key, i = decoder.raw_decode(text, i)
        i += len(text[i:]) - len(text[i:].lstrip(space)) + 1  # past the colon
        i += len(text[i:]) - len(text[i:].lstrip(space))
        _, end = decoder.raw_decode(text, i)
        if key == name:
            return text[i:end]
        i = end + len(text[end:]) - len(text[end:].lstrip(space)) + 1  # past the comma


def same_json(a, b):
    """Whether two parsed JSON values are the same value: of the same JSON type all the way
    down (Python's own == takes true for 1 and 1 for 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


def open_disclosure(disclosure):
    """[salt, name, value] or [salt, value] from a base64url disclosure, or a reason."""
    raw = base64.urlsafe_b64decode(disclosure + "=" * (-len(disclosure) % 4))
    value = loads(raw)
    if not isinstance(value, list) or len(value) not in (2, 3) or not isinstance(value[0], str):
        raise ValueError("a disclosure is a JSON array [salt, name, value] or [salt, value]")
    if len(value) == 3 and not isinstance(value[1], str):
        raise ValueError("a disclosure's name is a string")
    return value


def references(kind, payload):
    """(pointer, hash hex, len) of each reference in an encoding-2 payload, or a reason."""
    found = []

    def walk(value, steps, pointer):
        if not steps:
            if isinstance(value, dict) and set(value) == {"blake3", "len"}:
                h, n = value["blake3"], value["len"]
                ok = isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)
                if not ok or not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise ValueError(f"the reference at {pointer} is malformed")
                found.append((pointer, h, n))
            return
        step, rest = steps[0], steps[1:]
        if step == "*":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    walk(item, rest, f"{pointer}/{i}")
        elif isinstance(value, dict) and step in value:
            walk(value[step], rest, f"{pointer}/{step}")

    for position in CONTENT_POSITIONS.get(kind, []):
        walk(payload, position.split("/")[1:], "")
    return found


class Bad(Exception):
    def __init__(self, line, why):
        super().__init__(f"line {line}: {why}")
        self.why = why


# --- the canonical event body (store/FORMAT.md, section 3) -------------------------------


class Reader:
    def __init__(self, data, line):
        self.data, self.at, self.line = data, 0, line

    def byte(self):
        if self.at >= len(self.data):
            raise Bad(self.line, "record: the event body is cut short")
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self):
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise Bad(self.line, "record: a varint is too long")

    def take(self, n):
        if self.at + n > len(self.data):
            raise Bad(self.line, "record: the event body is cut short")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def string(self):
        raw = self.take(self.varint())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Bad(self.line, "record: a string is not UTF-8")


def decode_body(body, line):
    r = Reader(body, line)
    fields = {"stream": r.string(), "seq": r.varint(), "kind": r.string(), "kind_version": r.varint()}
    z = r.varint()
    fields["recorded_at_ns"] = (z >> 1) ^ -(z & 1)
    tag = r.byte()
    if tag == 0:
        fields["policy"] = None
    elif tag == 1:
        fields["policy"] = r.take(32).hex()
    else:
        raise Bad(line, "record: bad policy tag")
    tag = r.byte()
    if tag == 0:
        fields["payload"] = ("inline", r.take(r.varint()))
    elif tag == 1:
        blob_hash = r.take(32)
        fields["payload"] = ("blob", blob_hash, r.varint())
    else:
        raise Bad(line, "record: bad payload tag")
    if r.at != len(body):
        raise Bad(line, f"record: {len(body) - r.at} unexpected bytes after the event body")
    return fields


EVENT_FIELDS = {
    "type", "seq", "leaf_index", "kind", "kind_version", "recorded_at_ns", "policy",
    "payload", "payload_bytes", "payload_blob", "prev", "hash", "record",
}


def b64(text, line, field):
    """Standard base64 with padding, in its one canonical spelling."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise Bad(line, f"`{field}` is not base64")
    if base64.b64encode(raw).decode() != text:
        raise Bad(line, f"`{field}` is not base64 in its canonical form")
    return raw


# --- RFC 9162 Merkle tree -----------------------------------------------------------------


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def tree_root(leaves):
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    # Pair from the left; an odd node at the end moves up unchanged (RFC 9162, section 2.1.1).
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


# --- C2SP signed notes and checkpoints ------------------------------------------------------


def parse_verifier_key(vkey):
    # The key's base64 may itself hold a "+": only the first two split.
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise ValueError("a verifier key is name+keyid+key")
    name, key_id, key = parts
    raw = base64.b64decode(key, validate=True)
    if len(raw) != 33 or raw[0] != 1:
        raise ValueError("not an Ed25519 verifier key (algorithm byte 0x01 and 32 bytes)")
    expected = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if bytes.fromhex(key_id) != expected:
        raise ValueError("the key id does not match the key")
    return name, expected, raw[1:]


def check_note(note, vkey):
    """Returns the checkpoint body lines when `note` carries a valid signature of `vkey`."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    name, key_id, public = parse_verifier_key(vkey)
    text, sep, signatures = note.partition("\n\n")
    if not sep:
        raise ValueError("the note has no blank line before its signatures")
    message = (text + "\n").encode()
    key = Ed25519PublicKey.from_public_bytes(public)
    if not signatures.endswith("\n"):
        raise ValueError("the note does not end with a newline")
    lines = signatures[:-1].split("\n")
    # Every signature line is well formed before any is trusted: a note is one text.
    for sig_line in lines:
        if not sig_line.startswith("\u2014 ") or " " not in sig_line[2:]:
            raise ValueError("a signature line is not an em dash, a space, a name, a space and base64")
    for sig_line in lines:
        signer, _, b64 = sig_line[2:].rpartition(" ")
        raw = base64.b64decode(b64, validate=True)
        if signer == name and raw[:4] == key_id:
            try:
                key.verify(raw[4:], message)
            except InvalidSignature:
                raise ValueError(f"the signature of {name} does not verify")
            return text.split("\n")
    raise ValueError(f"the note is not signed by {name}")


# --- the export -------------------------------------------------------------------------------


def verify(path, trusted_key=None):
    """The export's summary, or Bad naming its first bad line: a field missing or of the
    wrong type is named at the line being checked."""
    current = [1]
    try:
        return check_lines(path, trusted_key, current)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise Bad(current[0], f"a field is missing or has the wrong type: {e!r}")


def check_lines(path, trusted_key, current):
    with open(path, encoding="utf-8") as f:
        lines = [(n, text) for n, text in enumerate(f, start=1) if text.strip()]
    if not lines:
        raise Bad(1, "the file is empty")

    def obj(n, text):
        current[0] = n
        try:
            value = loads(text)
        except ValueError as e:
            raise Bad(n, f"not JSON: {e}")
        if not isinstance(value, dict):
            raise Bad(n, "not a JSON object")
        return value

    n, header = lines[0][0], obj(*lines[0])
    if header.get("type") != "header" or header.get("format") != FORMAT or not any(same_json(header.get("version"), v) for v in VERSIONS):
        raise Bad(n, f"not a {FORMAT} version {' or '.join(map(str, VERSIONS))} header")
    run = header["run"]
    chain = header.get("chain") or {}
    if chain.get("event_context") != EVENT_CONTEXT or chain.get("genesis_context") != GENESIS_CONTEXT:
        raise Bad(n, "the header names hash contexts other than the format's")
    if set(header) != HEADER_FIELDS or set(chain) != {"algorithm", "event_context", "genesis_context", "genesis"} \
            or chain["algorithm"] != CHAIN_ALGORITHM or not same_json(header["tree"], TREE):
        raise Bad(n, "the header's fields or its descriptions of the chain and the tree are not the format's")
    prev = blake3.blake3(run.encode(), derive_key_context=GENESIS_CONTEXT).digest()
    if chain.get("genesis") != prev.hex() or not same_json(header.get("store_format"), 1):
        raise Bad(n, "the header's genesis or store format is not this run's")
    event_context = EVENT_CONTEXT
    leaves, rest = [], lines[1:]
    # Content lines: each follows the event that first refers to it, in its order.
    given, pending = {}, []  # hash hex -> length; [(pointer, hash hex, length)]
    # Disclosure and withheld lines: each follows the event that first commits to the value.
    owed, settled, counts = [], set(), {"disclosed": 0, "withheld": 0}  # [(pointer, digest, named)]
    while rest and obj(*rest[0]).get("type") in ("event", "content", "disclosure", "withheld"):
        (n, text), rest = rest[0], rest[1:]
        line = obj(n, text)
        if line["type"] in ("disclosure", "withheld"):
            fields = {"type", "digest", "disclosure" if line["type"] == "disclosure" else "why"}
            if header["version"] < 3 or set(line) != fields:
                raise Bad(n, f"a `{line['type']}` line holds exactly {', '.join(sorted(fields))} (version 3)")
            if not owed or owed[0][1] != line["digest"]:
                raise Bad(n, f"digest {line['digest']} is not the one expected here")
            pointer, digest, named = owed.pop(0)
            if line["type"] == "disclosure":
                if disclosure_digest(line["disclosure"]) != digest:
                    raise Bad(n, f"the disclosure does not hash to its digest {digest}")
                try:
                    opened = open_disclosure(line["disclosure"])
                except ValueError as e:
                    raise Bad(n, f"the disclosure of the value at {pointer} is not one: {e}")
                if (len(opened) == 3) != named:
                    raise Bad(n, f"the disclosure of the value at {pointer} has the wrong shape")
                counts["disclosed"] += 1
            else:
                if line["why"] not in ("redacted", "shredded"):
                    raise Bad(n, "`why` is redacted or shredded")
                counts["withheld"] += 1
            settled.add(digest)
            continue
        if owed:
            raise Bad(n, f"the value at {owed[0][0]} (digest {owed[0][1]}) of the event before has no `disclosure` or `withheld` line")
        if line["type"] == "content":
            if header["version"] < 2 or set(line) != {"type", "hash", "len", "content"}:
                raise Bad(n, "a `content` line holds exactly type, hash, len and content (version 2)")
            data = b64(line["content"], n, "content")
            if blake3.blake3(data).hexdigest() != line["hash"] or not same_json(len(data), line["len"]):
                raise Bad(n, "the content does not hash to the hash it names, or its length differs")
            if not pending or pending[0][1:] != (line["hash"], line["len"]):
                raise Bad(n, f"content {line['hash']} is not the content expected here")
            given[line["hash"]] = pending.pop(0)[2]
            continue
        if pending:
            raise Bad(n, f"the content at {pending[0][0]} (blob {pending[0][1]}) of the event before has no `content` line")
        unknown = set(line) - EVENT_FIELDS
        if unknown:
            raise Bad(n, f"field {sorted(unknown)[0]!r} is not part of the export format")
        record = b64(line["record"], n, "record")
        if len(record) < 64:
            raise Bad(n, "record is shorter than its two hashes")
        body, rec_prev, rec_hash = record[:-64], record[-64:-32], record[-32:]
        fields = decode_body(body, n)
        seq = len(leaves) + 1
        if fields["stream"] != run:
            raise Bad(n, f"event of run {fields['stream']} in the export of run {run}")
        if fields["seq"] != seq:
            raise Bad(n, f"expected event {seq}, found event {fields['seq']}")
        if header["version"] >= 4:
            # A decimal string, as docket writes an integer: no sign but `-`, no leading zero.
            at = line.get("recorded_at_ns")
            if not isinstance(at, str) or str(fields["recorded_at_ns"]) != at:
                raise Bad(n, f"`recorded_at_ns` says {at!r}, the record says {str(fields['recorded_at_ns'])!r}")
        names = ("seq", "kind", "kind_version", "policy") if header["version"] >= 4 else \
            ("seq", "kind", "kind_version", "recorded_at_ns", "policy")
        for name in names:
            if not same_json(line.get(name), fields[name]):
                raise Bad(n, f"`{name}` says {line.get(name)!r}, the record says {fields[name]!r}")
        if not same_json(line.get("leaf_index"), seq - 1):
            raise Bad(n, "`leaf_index` is not seq - 1")
        payload = fields["payload"]
        if payload[0] == "inline":
            content = payload[1]
        else:
            blob = line.get("payload_blob") or {}
            if blob.get("hash") != payload[1].hex() or not same_json(blob.get("len"), payload[2]) or len(blob) != 3:
                raise Bad(n, "`payload_blob` does not name the blob the record names")
            content = b64(blob.get("content", ""), n, "payload_blob.content")
            if blake3.blake3(content).digest() != payload[1] or len(content) != payload[2]:
                raise Bad(n, "the blob's content does not hash to the blob the record names")
        if payload[0] == "inline" and "payload_blob" in line:
            raise Bad(n, "`payload_blob` on an event whose payload is inline")
        if "payload" in line:
            # Bytes, not parsed values: the record covers bytes, and parsed values compare
            # equal across key orders, escapes and number spellings.
            if raw_member(text, "payload").encode("utf-8") != content:
                raise Bad(n, "`payload` differs from the payload the record covers")
        elif b64(line.get("payload_bytes", ""), n, "payload_bytes") != content:
            raise Bad(n, "`payload_bytes` differ from the payload the record covers")
        if fields["kind_version"] == 2:
            try:
                refs = references(fields["kind"], loads(content))
            except ValueError as e:
                raise Bad(n, f"the payload does not read as encoding 2: {e}")
            for pointer, h, length in refs:
                if h in given and given[h] != length:
                    raise Bad(n, f"the reference at {pointer} says {length} bytes, its content has {given[h]}")
                if h not in given and all(p[1] != h for p in pending):
                    pending.append((pointer, h, length))
        if fields["kind_version"] == 3 and header["version"] >= 3:
            try:
                committed = commitments(fields["kind"], loads(content))
            except ValueError as e:
                raise Bad(n, f"the payload does not read as encoding 3: {e}")
            for pointer, d, named in committed:
                if d not in settled and all(o[1] != d for o in owed):
                    owed.append((pointer, d, named))
        if line.get("prev") != rec_prev.hex() or line.get("hash") != rec_hash.hex():
            raise Bad(n, "`prev` or `hash` differ from the record's")
        if rec_prev != prev:
            raise Bad(n, "`prev` is not the previous event's hash: the chain is broken here")
        if blake3.blake3(rec_prev + body, derive_key_context=event_context).digest() != rec_hash:
            raise Bad(n, "the record does not hash to its recorded hash: it was changed after it was written")
        prev = rec_hash
        leaves.append(leaf_hash(record))
    if not rest:
        raise Bad(lines[-1][0] + 1, "the export ends before its tree head line: it was cut short")
    (n, text), rest = rest[0], rest[1:]
    if pending:
        raise Bad(n, f"the content at {pending[0][0]} (blob {pending[0][1]}) of the event before has no `content` line")
    if owed:
        raise Bad(n, f"the value at {owed[0][0]} (digest {owed[0][1]}) of the event before has no `disclosure` or `withheld` line")
    tree = obj(n, text)
    if tree.get("type") != "tree":
        raise Bad(n, f"expected an event or the tree head, found a {tree.get('type')!r} line")
    root = tree_root(leaves)
    if not same_json(tree.get("size"), len(leaves)) or tree.get("root") != base64.b64encode(root).decode():
        raise Bad(n, "the tree head does not match the events")
    if not same_json(header.get("events"), len(leaves)):
        raise Bad(n, f"the header promises {header.get('events')} events, the export holds {len(leaves)}")
    signed = "not signed"
    if rest:
        (n, text), rest = rest[0], rest[1:]
        checkpoint = obj(n, text)
        if checkpoint.get("type") != "checkpoint":
            raise Bad(n, "only a checkpoint line may follow the tree head")
        if trusted_key and checkpoint.get("verifier_key") != trusted_key:
            raise Bad(n, f"checkpoint: the export names verifier key {checkpoint.get('verifier_key')!r}, not the key you gave")
        vkey = trusted_key or checkpoint["verifier_key"]
        try:
            body = check_note(checkpoint["note"], vkey)
        except (ValueError, KeyError) as e:
            raise Bad(n, f"checkpoint: {e}")
        if len(body) < 3 or body[1] != str(len(leaves)) or body[2] != base64.b64encode(root).decode():
            raise Bad(n, "checkpoint: its size and root are not the export's tree head")
        origin = f"{vkey.split('+')[0]}/run/{run}"  # the signing key's name, /run/, the run id
        if body[0] != origin:
            raise Bad(n, f"checkpoint: its origin {body[0]!r} is not {origin!r}")
        signed = f"signed by {vkey.split('+')[0]}" + ("" if trusted_key else " (the key the export carries; pass --key to check against one you trust)")
    elif trusted_key:
        raise Bad(n + 1, "the export ends without the signed checkpoint the key you gave should have signed")
    if rest:
        raise Bad(rest[0][0], "nothing may follow the checkpoint line")
    values = ""
    if counts["withheld"]:
        values = f", {counts['disclosed']} values disclosed, {counts['withheld']} withheld"
    return f"sound: run {run}, {len(leaves)} events, root {base64.b64encode(root).decode()}, {signed}{values}"


def check_disclosure(path, seq, disclosure, trusted_key=None):
    """That event `seq` of a sound export commits to `disclosure` (docs/export-format.md,
    "Checking a disclosure"): its digest is one the event's payload lists."""
    verify(path, trusted_key)
    digest = disclosure_digest(disclosure)
    opened = open_disclosure(disclosure)
    with open(path, encoding="utf-8") as f:
        for text in f:
            line = loads(text)
            if line.get("type") == "event" and line.get("seq") == seq:
                if line.get("kind_version") != 3 or "payload" not in line:
                    raise Bad(0, f"event {seq} does not commit to values apart (payload encoding 3)")
                for pointer, d, named in commitments(line["kind"], line["payload"]):
                    if d == digest and named == (len(opened) == 3):
                        where = pointer + ("/" + opened[1] if named else "")
                        return f"event {seq} commits to {where} = {json.dumps(opened[-1])[:200]} (digest {digest})"
                raise Bad(0, f"event {seq} does not commit to this disclosure: its digest {digest} is not in its payload")
    raise Bad(0, f"the export has no event {seq}")


def main(argv):
    args = argv[1:]
    key = None
    if "--key" in args:
        i = args.index("--key")
        key = args[i + 1]
        del args[i : i + 2]
    if len(args) == 4 and args[0] == "disclose":
        try:
            print(f"{args[1]}: {check_disclosure(args[1], int(args[2]), args[3], key)}")
            return 0
        except Bad as e:
            print(f"{args[1]}: {e.why}")
            return 1
        except (KeyError, TypeError, ValueError) as e:
            print(f"{args[1]}: malformed export or disclosure: {e!r}")
            return 1
    if len(args) != 1:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    try:
        print(f"{args[0]}: {verify(args[0], key)}")
        return 0
    except Bad as e:
        print(f"{args[0]}: {e}")
        return 1
    except (KeyError, TypeError, ValueError) as e:
        print(f"{args[0]}: malformed export: {e!r}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
