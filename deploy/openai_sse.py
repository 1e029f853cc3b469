"""The chunks of a streamed OpenAI-style request (server-sent events), for
the benchmark scripts beside this file. Standard library only."""
import json
import urllib.request


def stream_chunks(address, path, fields, timeout):
    """Yields each JSON chunk of a streamed POST of `fields` to
    http://address/path, until [DONE]; an error chunk raises RuntimeError."""
    request = urllib.request.Request(f"http://{address}{path}", data=json.dumps(fields).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            yield chunk
