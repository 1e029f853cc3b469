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

With --models A,B,... the streams go to those models in turn (stream i to
the i-th modulo their count): on a head serving several models, 8 streams
with --models a,b against 8 with --models a show what serving two models
costs (docs/multi-model.md).

With --long-prompt N it measures how a long prefill disturbs running streams:
for each stream count it starts the streams, and once each has a few tokens
sends one more request with an N-token prompt (1 token of reply). It prints

  streams  prefill_tokens  prefill_s  itl_p99_before_ms  itl_p99_during_ms  ratio  gaps_during

where "during" is the prefill (from the long request's start to its first
token) and "before" the 3 s or more before it, once every stream has its
first 5 tokens; ratio is during/before. Give the
streams enough --max-tokens to outlast the prefill.

With --long-prompt N --long-first the long prompt goes first, alone, and the
streams arrive 1 s into its prefill. It prints

  streams  prefill_tokens  prefill_s  ttft_p50_ms  ttft_max_ms  itl_p99_during_ms  gaps_during

with the streams' time to first token from their arrival, and the p99 time
between their tokens until the long prompt's first token.

  deploy/bench-concurrency.py --server 127.0.0.1:8080 [--streams 1,2,4,8,16] [--max-tokens 48]
      [--ignore-eos] [--models A,B] [--long-prompt 1500 [--long-first]]
"""
import argparse
import statistics
import threading
import time

from openai_sse import stream_chunks

WORDS = ["river", "mountain", "lantern", "garden", "harbor", "meadow", "castle", "forest",
         "desert", "island", "valley", "village", "bridge", "tower", "market", "orchard"]


def stream_completion(address, prompt, max_tokens, ignore_eos, out, arrivals=None, model=None):
    """Appends (arrival times of the token chunks, completion tokens) to out.
    The arrival times go into `arrivals` (a new list unless given), so a
    caller can watch them as they come."""
    fields = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}
    if ignore_eos:  # llama-server's extension; ringlm refuses fields it does not know
        fields["ignore_eos"] = True
    if model:
        fields["model"] = model
    arrivals = [] if arrivals is None else arrivals
    usage = None
    for chunk in stream_chunks(address, "/v1/completions", fields, timeout=900):
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            if choice.get("text"):
                arrivals.append(time.monotonic())
    tokens = usage["completion_tokens"] if usage else len(arrivals)
    out.append((arrivals, tokens))


def long_prefill(address, n_tokens, salt, out):
    """Appends (start, first token time) of one request with an n-token prompt
    (a different one for each salt, so no round finds it cached)."""
    fields = {"prompt": [1] + [1000 + (7 * i + 101 * salt) % 20000 for i in range(n_tokens - 1)],
              "max_tokens": 1, "temperature": 0, "stream": True}
    start = time.monotonic()
    for chunk in stream_chunks(address, "/v1/completions", fields, timeout=900):
        if any(c.get("text") for c in chunk.get("choices", [])):
            out.append((start, time.monotonic()))
            return
    out.append((start, time.monotonic()))


def run_with_long_prompt(address, streams, max_tokens, ignore_eos, n_prompt):
    results, errors, long_result = [], [], []

    def worker(i):
        words = " ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(6))
        try:
            stream_completion(address, f"Far away, beyond the {words},", max_tokens, ignore_eos,
                              results, live[i])
        except Exception as e:
            errors.append(e)

    live = [[] for _ in range(streams)]
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    while not errors and any(len(a) < 5 for a in live) and any(t.is_alive() for t in threads):
        time.sleep(0.05)
    time.sleep(3.0)
    long_thread = threading.Thread(target=long_prefill,
                                   args=(address, n_prompt, streams, long_result))
    long_thread.start()
    long_thread.join()
    for t in threads:
        t.join()
    if errors or not long_result:
        raise SystemExit(f"{streams} streams with a long prompt: {errors[:1] or 'no reply'}")
    start, first = long_result[0]
    before, during = [], []
    for arrivals, _ in results:
        settled = arrivals[4:]  # the first tokens overlap the other streams' prompts
        for a, b in zip(settled, settled[1:]):
            if b <= start:
                before.append(b - a)
            elif a < first:
                during.append(b - a)
    p99_before = percentile(before, 0.99) * 1000 if before else 0
    p99_during = percentile(during, 0.99) * 1000 if during else 0
    return (first - start, p99_before, p99_during,
            p99_during / p99_before if p99_before > 0 else 0, len(during))


def run_arriving_during_long_prompt(address, streams, max_tokens, ignore_eos, n_prompt):
    results, errors, long_result = [], [], []

    def worker(i):
        words = " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(6))
        try:
            stream_completion(address, f"Long ago, near the {words},", max_tokens, ignore_eos,
                              results)
        except Exception as e:
            errors.append(e)

    long_thread = threading.Thread(target=long_prefill,
                                   args=(address, n_prompt, streams, long_result))
    long_thread.start()
    time.sleep(1.0)
    arrival = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads + [long_thread]:
        t.join()
    if errors or not long_result or any(not a for a, _ in results):
        raise SystemExit(f"{streams} streams after a long prompt: {errors[:1] or 'no reply'}")
    start, first = long_result[0]
    ttfts = [arrivals[0] - arrival for arrivals, _ in results]
    during = [b - a for arrivals, _ in results for a, b in zip(arrivals, arrivals[1:]) if a < first]
    return (first - start, statistics.median(ttfts) * 1000, max(ttfts) * 1000,
            percentile(during, 0.99) * 1000 if during else 0, len(during))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


def run(address, streams, max_tokens, ignore_eos, round_index, models):
    results, threads, errors = [], [], []

    def worker(i):
        words = " ".join(WORDS[(i * 7 + round_index * 3 + k) % len(WORDS)] for k in range(6))
        try:
            stream_completion(address, f"Once upon a time, by the {words},", max_tokens,
                              ignore_eos, results, model=models[i % len(models)])
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
    parser.add_argument("--models", default="",
                        help="comma-separated model names; stream i asks for the i-th in turn "
                             "(default: the server's first model)")
    parser.add_argument("--long-prompt", type=int, default=0,
                        help="measure the streams while a prompt of this many tokens is prefilled")
    parser.add_argument("--long-first", action="store_true",
                        help="with --long-prompt: the streams arrive during its prefill")
    args = parser.parse_args()
    if args.long_prompt > 0 and args.long_first:
        print(f"{'streams':>7} {'prefill_tokens':>14} {'prefill_s':>9} {'ttft_p50_ms':>11} "
              f"{'ttft_max_ms':>11} {'itl_p99_during_ms':>17} {'gaps_during':>11}", flush=True)
        for n in (int(s) for s in args.streams.split(",")):
            seconds, ttft_p50, ttft_max, during, gaps = run_arriving_during_long_prompt(
                args.server, n, args.max_tokens, args.ignore_eos, args.long_prompt)
            print(f"{n:>7} {args.long_prompt:>14} {seconds:>9.2f} {ttft_p50:>11.1f} "
                  f"{ttft_max:>11.1f} {during:>17.1f} {gaps:>11}", flush=True)
        return
    if args.long_prompt > 0:
        print(f"{'streams':>7} {'prefill_tokens':>14} {'prefill_s':>9} {'itl_p99_before_ms':>17} "
              f"{'itl_p99_during_ms':>17} {'ratio':>6} {'gaps_during':>11}", flush=True)
        for n in (int(s) for s in args.streams.split(",")):
            seconds, before, during, ratio, gaps = run_with_long_prompt(
                args.server, n, args.max_tokens, args.ignore_eos, args.long_prompt)
            print(f"{n:>7} {args.long_prompt:>14} {seconds:>9.2f} {before:>17.1f} {during:>17.1f} "
                  f"{ratio:>6.2f} {gaps:>11}", flush=True)
        return
    print(f"{'streams':>7} {'agg_tok_s':>10} {'stream_tok_s':>12} {'itl_p50_ms':>10} "
          f"{'itl_p99_ms':>10} {'ttft_p50_ms':>11}", flush=True)
    for round_index, n in enumerate(int(s) for s in args.streams.split(",")):
        agg, per_stream, p50, p99, ttft = run(args.server, n, args.max_tokens, args.ignore_eos,
                                              round_index, args.models.split(",") if args.models
                                              else [None])
        print(f"{n:>7} {agg:>10.1f} {per_stream:>12.1f} {p50:>10.1f} {p99:>10.1f} {ttft:>11.1f}",
              flush=True)


if __name__ == "__main__":
    main()
