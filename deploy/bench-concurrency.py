#!/usr/bin/env python3
"""Aggregate decode speed and time between tokens with N streams at once,
against any OpenAI-compatible server (a ringlm head, or llama-server for
comparison). For each stream count it starts N streamed /v1/completions of
the same length at the same moment and prints one row:

  streams  agg_tok_s  stream_tok_s  itl_p50_ms  itl_p99_ms  ttft_p50_ms

agg_tok_s counts every stream's tokens after its first, over the time from
the first first token to the last token; stream_tok_s is the mean of the
streams' own decode rates; itl is the time between consecutive tokens of a
stream, over all streams. Each stream gets a different prompt, so no prefix
is shared. Loopback or LAN addresses only.

  deploy/bench-concurrency.py --server 127.0.0.1:8080 [--streams 1,2,4,8,16] [--max-tokens 48]
      [--ignore-eos]
"""
import argparse
import statistics
import threading
import time

from openai_sse import stream_chunks

WORDS = ["river", "mountain", "lantern", "garden", "harbor", "meadow", "castle", "forest",
         "desert", "island", "valley", "village", "bridge", "tower", "market", "orchard"]


def stream_completion(address, prompt, max_tokens, ignore_eos, out):
    """Appends (arrival times of the token chunks, completion tokens) to out."""
    fields = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}
    if ignore_eos:  # llama-server's extension; ringlm refuses fields it does not know
        fields["ignore_eos"] = True
    arrivals, usage = [], None
    for chunk in stream_chunks(address, "/v1/completions", fields, timeout=900):
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            if choice.get("text"):
                arrivals.append(time.monotonic())
    tokens = usage["completion_tokens"] if usage else len(arrivals)
    out.append((arrivals, tokens))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


def run(address, streams, max_tokens, ignore_eos, round_index):
    results, threads, errors = [], [], []

    def worker(i):
        words = " ".join(WORDS[(i * 7 + round_index * 3 + k) % len(WORDS)] for k in range(6))
        try:
            stream_completion(address, f"Once upon a time, by the {words},", max_tokens,
                              ignore_eos, results)
        except Exception as e:  # reported below, the run is not valid
            errors.append(e)

    for i in range(streams):
        threads.append(threading.Thread(target=worker, args=(i,)))
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"{streams} streams: {errors[0]}")
    firsts = [a[0] for a, _ in results if a]
    lasts = [a[-1] for a, _ in results if a]
    decoded = sum(max(0, n - 1) for _, n in results)
    span = max(lasts) - min(firsts)
    gaps, rates = [], []
    for arrivals, n in results:
        gaps += [b - a for a, b in zip(arrivals, arrivals[1:])]
        if len(arrivals) > 1 and arrivals[-1] > arrivals[0]:
            rates.append((n - 1) / (arrivals[-1] - arrivals[0]))
    ttfts = [f - start for f in firsts]
    return (decoded / span if span > 0 else 0, statistics.mean(rates) if rates else 0,
            percentile(gaps, 0.5) * 1000 if gaps else 0,
            percentile(gaps, 0.99) * 1000 if gaps else 0, percentile(ttfts, 0.5) * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="host:port of the OpenAI-compatible API")
    parser.add_argument("--streams", default="1,2,4,8,16", help="comma-separated stream counts")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--ignore-eos", action="store_true",
                        help="send llama-server's ignore_eos (not for ringlm)")
    args = parser.parse_args()
    print(f"{'streams':>7} {'agg_tok_s':>10} {'stream_tok_s':>12} {'itl_p50_ms':>10} "
          f"{'itl_p99_ms':>10} {'ttft_p50_ms':>11}", flush=True)
    for round_index, n in enumerate(int(s) for s in args.streams.split(",")):
        agg, per_stream, p50, p99, ttft = run(args.server, n, args.max_tokens, args.ignore_eos,
                                              round_index)
        print(f"{n:>7} {agg:>10.1f} {per_stream:>12.1f} {p50:>10.1f} {p99:>10.1f} {ttft:>11.1f}",
              flush=True)


if __name__ == "__main__":
    main()
