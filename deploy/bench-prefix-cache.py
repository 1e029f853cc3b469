#!/usr/bin/env python3
"""Time to first token per turn of a scripted chat, with the prefix cache on
and off, through a running ringlm head (or two: one started with
--no-prefix-cache). Prints one row per turn:

  turn  prompt_tokens  cached  new  ttft_on_ms  ttft_off_ms  ratio  ideal

ratio = ttft_on / ttft_off; ideal = new / prompt_tokens, the share of the
prompt that must still go through the ring. Loopback addresses only.

  deploy/bench-prefix-cache.py --on 127.0.0.1:8080 --off 127.0.0.1:8081 [--turns 10]
"""
import argparse
import time

from openai_sse import stream_chunks

USER_TURNS = [
    "Tell me a story about a cat.", "What did the cat find?", "Was the cat happy?",
    "Who came to visit?", "What did they eat?", "Where did they go next?",
    "What did they see there?", "Did it rain?", "How did the day end?", "What happened the next day?",
]


def stream_chat(address, messages, max_tokens):
    """Returns (reply text, ttft seconds, usage) of one streamed request."""
    fields = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}
    start = time.monotonic()
    ttft, text, usage = None, "", None
    for chunk in stream_chunks(address, "/v1/chat/completions", fields, timeout=600):
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            piece = choice.get("delta", {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.monotonic() - start
                text += piece
    return text, ttft if ttft is not None else time.monotonic() - start, usage


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--on", required=True, help="head with the prefix cache (host:port)")
    parser.add_argument("--off", required=True, help="head started with --no-prefix-cache")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args()
    messages = []
    print(f"{'turn':>4} {'prompt':>7} {'cached':>7} {'new':>5} {'ttft_on_ms':>11} "
          f"{'ttft_off_ms':>12} {'ratio':>6} {'ideal':>6}")
    for turn in range(args.turns):
        messages.append({"role": "user", "content": USER_TURNS[turn % len(USER_TURNS)]})
        reply_on, ttft_on, usage_on = stream_chat(args.on, messages, args.max_tokens)
        reply_off, ttft_off, _ = stream_chat(args.off, messages, args.max_tokens)
        if reply_on != reply_off:
            raise SystemExit(f"turn {turn + 1}: replies differ with and without the cache")
        prompt = usage_on["prompt_tokens"]
        cached = usage_on["prompt_tokens_details"]["cached_tokens"]
        new = prompt - cached
        print(f"{turn + 1:>4} {prompt:>7} {cached:>7} {new:>5} {ttft_on * 1000:>11.1f} "
              f"{ttft_off * 1000:>12.1f} {ttft_on / ttft_off:>6.3f} {new / prompt:>6.3f}")
        messages.append({"role": "assistant", "content": reply_on})


if __name__ == "__main__":
    main()
