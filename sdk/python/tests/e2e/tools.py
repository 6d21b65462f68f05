"""The tool executor of the end-to-end test (docs/agent-protocol.md#tool-executors): one
call per line in, one answer per line out. Every call it receives is appended to
$TOOL_LOG, so the test can tell which tools really ran."""

import json
import os
import sys

for line in sys.stdin:
    if not line.strip():
        continue
    call = json.loads(line)
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": call["tool"], "arguments": call["arguments"]}) + "\n")
    if call["tool"] == "lookup":
        answer = {"tool_call_id": call["tool_call_id"], "result": {"shipping": "delayed at the depot"}}
    else:
        answer = {"tool_call_id": call["tool_call_id"], "result": {"refunded": True}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
