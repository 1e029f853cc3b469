#!/usr/bin/env python3
"""Time to first token with the prompt-prefix cache on and off, through two
OpenAI-compatible servers: a ringlm head and one started with
--no-prefix-cache (or llama-server, once with cache_prompt and once without).
Loopback addresses (127.0.0.0/8) only. Standard library only.

Scripted chat (the default): one conversation of --turns fixed user turns,
all of it on --on, then the same prompts on --off (so one llama-server can be
both); the replies must match. One row per turn:

  turn  prompt  cached  new  ttft_on_ms  ttft_off_ms  ratio  ideal

ratio = ttft_on / ttft_off; ideal = new / prompt, the share of the prompt
that must still be computed.

  deploy/bench-prefix-cache.py --on 127.0.0.1:8080 --off 127.0.0.1:8081 [--turns 10]

Multi-turn (--multiturn), shaped like SGLang's bench_multiturn: C clients
(--clients) hold one conversation each, concurrently, for R rounds
(--rounds). Every conversation starts with the same system prompt of about
S tokens (--system-tokens; varied English words, sized with probe requests,
the measured count is printed); each round adds a user turn of about U tokens
(--user-tokens, different for every client and round) and asks for a reply
of --max-tokens tokens at temperature 0, streamed, sending the whole
conversation so far (system, earlier user turns, the replies as returned).
The whole workload runs on the --on server, then on the --off server.
Before it, probe requests go to each server: they size the system prompt and
leave it in the cache, so every round-1 request can reuse it. Per request it
records the time to the first content token, usage.prompt_tokens, the
completion tokens and the cached (reused) prompt tokens:

  ringlm        usage.prompt_tokens_details.cached_tokens
  llama-server  usage.prompt_tokens_details.cached_tokens or timings.cache_n
                (newer builds), else prompt_tokens - timings.prompt_n
                (timings.prompt_n = prompt tokens evaluated, build 4748)

and an ideal reuse: what a cache holding everything this client sent and
received before could give (at least one prompt token is always computed;
the last sampled token of a reply never has KV):

  round 1:   min(system, prompt - 1), system = the system prompt's tokens
             (prompt of [system, user] minus prompt of [user], from the probe)
  round r>1: min(prev_prompt + prev_completion - 1, prompt - 1), prev = this
             client's previous round

A reply that re-tokenizes differently, or a template that changes earlier
turns, makes the ideal unreachable by that much; template tokens shared with
the probe around the system message (BOS, a user header) can take round 1 a
little above it.

Clients send their next turn as soon as their reply is in (--lockstep starts
every round together). The text comes from --seed, a new one per run unless
given, so a server's cache holds nothing of an earlier run's conversations.
Output: '#' lines (the setup, the measured sizes, the definitions), one
header line, one row per round and an 'all' row, then a '#' line counting
the replies that differ between on and off:

  round  requests  prompt_mean  ideal_mean  cached_mean  reuse
    ttft_on_mean_ms  ttft_on_p50_ms  ttft_on_p99_ms
    ttft_off_mean_ms ttft_off_p50_ms ttft_off_p99_ms

reuse = sum(cached) / sum(ideal) over the round's requests on the --on server
(prompt, ideal and cached are the --on run's). Percentiles are nearest-rank.
A progress line goes to stderr as each round completes on every client.

With --metrics HOST:PORT (repeatable; a stage's metrics port, by default its
gRPC port + 1000) it reads http://HOST:PORT/metrics after the --on run and
prints, per stage, the gauges ringlm_kv_cache_bytes (KV held, shared blocks
once), ringlm_kv_cache_logical_bytes (what the same sessions would take
without sharing), ringlm_kv_blocks{state="used"} and {state="shared"} and the
counter ringlm_kv_blocks_evicted_total, and logical/held (n/a where a metric
is missing), after a '#' line and a header line of its own:

  stage  kv_cache_bytes  kv_cache_logical_bytes  kv_blocks_used
    kv_blocks_shared  kv_blocks_evicted_total  logical/held

  deploy/bench-prefix-cache.py --multiturn --on 127.0.0.1:8080 --off 127.0.0.1:8081 \\
      [--clients 16] [--rounds 5] [--system-tokens 512] [--user-tokens 64] [--max-tokens 64] \\
      [--metrics 127.0.0.1:48801 --metrics 127.0.0.1:48802]
  deploy/bench-prefix-cache.py --multiturn --llama-server --on 127.0.0.1:8090
      (the off run: the same server with cache_prompt false)
"""
import argparse
import ipaddress
import random
import re
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

from openai_sse import stream_chunks

USER_TURNS = [
    "Tell me a story about a cat.", "What did the cat find?", "Was the cat happy?",
    "Who came to visit?", "What did they eat?", "Where did they go next?",
    "What did they see there?", "Did it rain?", "How did the day end?", "What happened the next day?",
]

# Common English words of many shapes, so that text made of them tokenizes
# like prose (not like one word repeated).
WORDS = """
the a little girl boy dog cat bird tree house garden river mountain forest town
village market bridge tower castle window door table chair book letter story song
music dance game ball kite boat ship train road path field flower grass leaf stone
sand water rain snow wind cloud sun moon star night morning evening day week year
friend family mother father sister brother teacher doctor farmer baker king queen
happy sad angry quiet loud bright dark warm cold old young big small tall short
fast slow soft hard green blue red yellow white black golden silver wooden gentle
brave kind clever curious careful hungry sleepy busy lucky strange famous simple
walk run jump swim climb sing read write draw paint build cook bake eat drink sleep
dream laugh smile cry shout whisper listen watch look find lose give take bring
carry open close begin finish help share learn teach remember forget wonder travel
visit return because after before while when where then also always never often
sometimes together almost quickly slowly suddenly finally early late very really
about above across around behind below beside between inside outside under over
apple bread cheese honey milk soup cake cookie orange lemon basket blanket candle
lantern mirror ribbon button pocket puzzle ladder bucket wagon bicycle picnic
""".split()


def parse_address(text):
    """host:port with an IPv4 host in 127.0.0.0/8, for argparse."""
    host, _, port = text.rpartition(":")
    try:
        if ipaddress.IPv4Address(host) not in ipaddress.IPv4Network("127.0.0.0/8"):
            raise ValueError
        if not 1 <= int(port) <= 65535:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give HOST:PORT with HOST a loopback IPv4 address (127.0.0.0/8)")
    return f"{host}:{int(port)}"


def cached_tokens(usage, timings):
    """Reused prompt tokens as the server reports them, or None."""
    details = (usage or {}).get("prompt_tokens_details") or {}
    if isinstance(details.get("cached_tokens"), int):
        return details["cached_tokens"]  # ringlm, newer llama-server
    timings = timings or {}
    if isinstance(timings.get("cache_n"), int):
        return timings["cache_n"]  # newer llama-server
    if usage and isinstance(timings.get("prompt_n"), int) and timings["prompt_n"] >= 0:
        return usage["prompt_tokens"] - timings["prompt_n"]  # llama-server build 4748
    return None


class Reply:
    __slots__ = ("text", "ttft", "prompt", "completion", "cached")

    def __init__(self, text, ttft, prompt, completion, cached):
        self.text, self.ttft, self.prompt, self.completion, self.cached = (
            text, ttft, prompt, completion, cached)


def stream_chat(address, messages, max_tokens, extra=None, timeout=900):
    """One streamed chat completion at temperature 0. ttft is the time to the
    first content piece (to the end of the stream when there is none)."""
    fields = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}
    fields.update(extra or {})
    start = time.monotonic()
    ttft, pieces, usage, timings = None, [], None, None
    for chunk in stream_chunks(address, "/v1/chat/completions", fields, timeout=timeout):
        if chunk.get("usage"):
            usage = chunk["usage"]
        if chunk.get("timings"):
            timings = chunk["timings"]
        for choice in chunk.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.monotonic() - start
                pieces.append(piece)
    if not usage:
        raise RuntimeError(f"{address}: the stream carried no usage")
    return Reply("".join(pieces), ttft if ttft is not None else time.monotonic() - start,
                 usage["prompt_tokens"], usage.get("completion_tokens", 0),
                 cached_tokens(usage, timings))


def describe(error):
    """One line for a failed request, with the server's answer when there is one."""
    if isinstance(error, urllib.error.HTTPError):
        try:
            body = error.read().decode(errors="replace").strip()
        except Exception:
            body = ""
        return f"{error.url}: HTTP {error.code}: {body[:300] or error.reason}"
    if isinstance(error, urllib.error.URLError):
        return f"{error.reason}"
    return f"{type(error).__name__}: {error}" if not isinstance(error, RuntimeError) else str(error)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


# ---------------------------------------------------------------- scripted chat

def scripted(args):
    """The whole conversation on --on, then the same prompts on --off (so a
    llama-server that is both keeps its cache through the on pass)."""
    on_extra = {"cache_prompt": True} if args.llama_server else {}
    off_extra = {"cache_prompt": False} if args.llama_server else {}
    max_tokens = args.max_tokens if args.max_tokens is not None else 8
    messages, on_replies = [], []
    for turn in range(args.turns):
        messages.append({"role": "user", "content": USER_TURNS[turn % len(USER_TURNS)]})
        on_replies.append(stream_chat(args.on, messages, max_tokens, on_extra, args.timeout))
        messages.append({"role": "assistant", "content": on_replies[-1].text})
    print(f"{'turn':>4} {'prompt':>7} {'cached':>7} {'new':>5} {'ttft_on_ms':>11} "
          f"{'ttft_off_ms':>12} {'ratio':>6} {'ideal':>6}", flush=True)
    for turn, on in enumerate(on_replies):
        off = stream_chat(args.off, messages[:2 * turn + 1], max_tokens, off_extra, args.timeout)
        if on.text != off.text:
            raise SystemExit(f"turn {turn + 1}: replies differ with and without the cache")
        cached = on.cached or 0
        new = on.prompt - cached
        print(f"{turn + 1:>4} {on.prompt:>7} {cached:>7} {new:>5} {on.ttft * 1000:>11.1f} "
              f"{off.ttft * 1000:>12.1f} {on.ttft / off.ttft:>6.3f} {new / on.prompt:>6.3f}",
              flush=True)


# ---------------------------------------------------------------- multi-turn

def word_text(rng, n_words):
    """n_words words from WORDS as sentences of 6 to 14 words."""
    out, left = [], n_words
    while left > 0:
        n = min(left, rng.randint(6, 14))
        words = [rng.choice(WORDS) for _ in range(n)]
        out.append(" ".join(words).capitalize() + ".")
        left -= n
    return " ".join(out)


def size_system_prompt(address, target, extra, timeout, seed):
    """A system prompt of about `target` tokens on this server: returns
    (text, its tokens, tokens per word). Its token count is the prompt of
    [system, user] minus that of [user]."""
    user = [{"role": "user", "content": "Hello."}]
    base = stream_chat(address, user, 1, extra, timeout).prompt
    words, best = max(1, target // 4), None  # under target for up to 4 tokens a word
    for _ in range(5):
        text = word_text(random.Random(seed), words)  # same seed: longer texts extend shorter
        tokens = stream_chat(address, [{"role": "system", "content": text}] + user, 1, extra,
                             timeout).prompt - base
        if best is None or abs(tokens - target) < abs(best[1] - target):
            best = (text, tokens, words)
        if abs(tokens - target) <= max(2, target // 50):
            break
        words = max(1, round(words * target / max(1, tokens)))
    text, tokens, words = best
    return text, tokens, tokens / words


def user_text(seed, client, round_index, n_words):
    return word_text(random.Random(f"{seed}/{client}/{round_index}"), n_words)


def size_user_turns(address, target, per_word, extra, timeout, seed):
    """Words per user turn for about `target` tokens: returns (words, the
    tokens of a sample turn), measured as what the turn adds to a message."""
    hello = [{"role": "user", "content": "Hello."}]
    base = stream_chat(address, hello, 1, extra, timeout).prompt
    words, best = max(1, round(target / per_word)), None
    for _ in range(4):
        text = "Hello. " + user_text(seed, 0, 0, words)
        tokens = stream_chat(address, [{"role": "user", "content": text}], 1, extra,
                             timeout).prompt - base
        if best is None or abs(tokens - target) < abs(best[1] - target):
            best = (words, tokens)
        if abs(tokens - target) <= max(1, target // 25):
            break
        words = max(1, round(words * target / max(1, tokens)))
    return best


def user_turns(clients, rounds, n_words, seed):
    """The user turn of every client and round, each different."""
    return [[user_text(seed, c, r, n_words) for r in range(rounds)] for c in range(clients)]


def run_workload(name, address, system, turns, max_tokens, extra, timeout, lockstep):
    """Every client's conversation, concurrently; returns replies[c][r]."""
    clients, rounds = len(turns), len(turns[0])
    replies = [[None] * rounds for _ in range(clients)]
    done = [0] * rounds
    errors, lock = [], threading.Lock()
    barrier = threading.Barrier(clients) if lockstep else None
    start = time.monotonic()

    def client(c):
        messages = [{"role": "system", "content": system}]
        try:
            for r in range(rounds):
                if errors:
                    return
                if barrier:
                    barrier.wait()
                messages.append({"role": "user", "content": turns[c][r]})
                reply = stream_chat(address, list(messages), max_tokens, extra, timeout)
                messages.append({"role": "assistant", "content": reply.text})
                replies[c][r] = reply
                with lock:
                    done[r] += 1
                    if done[r] == clients:
                        print(f"{name}: round {r + 1}/{rounds} done on all {clients} clients, "
                              f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
        except Exception as e:  # the run is not valid; stop the others
            with lock:
                errors.append(f"client {c + 1}: {describe(e)}")
            if barrier:
                barrier.abort()

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if "BrokenBarrierError" not in e]  # the others, stopped
    if errors:
        raise SystemExit(f"{name} run failed: {(real or errors)[0]}")
    return replies, time.monotonic() - start


def ideal_reuse(replies, system_tokens):
    """ideal[c][r] as defined in the docstring."""
    ideal = []
    for row in replies:
        out = []
        for r, reply in enumerate(row):
            if r == 0:
                best = system_tokens
            else:
                prev = row[r - 1]
                best = prev.prompt + prev.completion - 1
            out.append(max(0, min(best, reply.prompt - 1)))
        ideal.append(out)
    return ideal


def fmt(value, width, digits=1):
    if value is None:
        return f"{'n/a':>{width}}"
    return f"{value:>{width}.{digits}f}"


def ttft_stats(replies):
    ms = [x.ttft * 1000 for x in replies]
    return statistics.mean(ms), percentile(ms, 0.5), percentile(ms, 0.99)


# ------------------------------------------------------------ Prometheus metrics

METRIC_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
STAGE_METRICS = [
    ("kv_cache_bytes", "ringlm_kv_cache_bytes", {}),
    ("kv_cache_logical_bytes", "ringlm_kv_cache_logical_bytes", {}),
    ("kv_blocks_used", "ringlm_kv_blocks", {"state": "used"}),
    ("kv_blocks_shared", "ringlm_kv_blocks", {"state": "shared"}),
    ("kv_blocks_evicted_total", "ringlm_kv_blocks_evicted_total", {}),
]


def scrape(address):
    """{(name, frozenset(labels)): value} of http://address/metrics, None if unreachable."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
            text = response.read().decode(errors="replace")
    except Exception:
        return None
    series = {}
    for line in text.splitlines():
        m = METRIC_LINE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        series[(m.group(1), frozenset(LABEL.findall(m.group(2) or "")))] = value
    return series


def metric(series, name, labels):
    """The sum over the series of `name` that carry `labels`, None without any."""
    want = set(labels.items())
    values = [v for (n, ls), v in series.items() if n == name and want <= ls]
    return sum(values) if values else None


def stage_metrics_lines(addresses):
    """The per-stage metrics table, as lines to print."""
    names = [column for column, _, _ in STAGE_METRICS]
    widths = [max(12, len(n)) for n in names]
    lines = ["# stage KV metrics, read after the on run (n/a: not exported)",
             f"{'stage':<21} " + " ".join(f"{n:>{w}}" for n, w in zip(names, widths))
             + f" {'logical/held':>12}"]
    for address in addresses:
        series = scrape(address)
        values = [metric(series, name, labels) if series is not None else None
                  for _, name, labels in STAGE_METRICS]
        cells = ["n/a" if v is None else f"{v:.0f}" for v in values]
        held, logical = values[0], values[1]
        ratio = f"{logical / held:.3f}" if held and logical is not None else "n/a"
        lines.append(f"{address:<21} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths))
                     + f" {ratio:>12}" + ("" if series is not None else "  # unreachable"))
    return lines


def multiturn(args):
    max_tokens = args.max_tokens if args.max_tokens is not None else 64
    on_extra = {"cache_prompt": True} if args.llama_server else {}
    off_extra = {"cache_prompt": False} if args.llama_server else {}
    kind = "llama-server" if args.llama_server else "ringlm"
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)

    print(f"sizing the system prompt on {args.on}", file=sys.stderr, flush=True)
    system, system_tokens, per_word = size_system_prompt(args.on, args.system_tokens, on_extra,
                                                         args.timeout, args.seed)
    n_user_words, user_sample = size_user_turns(args.on, args.user_tokens, per_word, on_extra,
                                                args.timeout, args.seed)
    turns = user_turns(args.clients, args.rounds, n_user_words, args.seed)
    # The probes: [system, user] on each server leaves the shared prefix in
    # the --on server's cache; a second one shows what it reuses of it.
    probe = [{"role": "system", "content": system}, {"role": "user", "content": "Hello."}]
    stream_chat(args.on, probe, 1, on_extra, args.timeout)
    probe[1]["content"] = "Good morning."
    probe_cached = stream_chat(args.on, probe, 1, on_extra, args.timeout).cached
    if not args.no_off:
        stream_chat(args.off, probe, 1, off_extra, args.timeout)

    on, on_s = run_workload("on", args.on, system, turns, max_tokens, on_extra, args.timeout,
                            args.lockstep)
    stage_lines = stage_metrics_lines(args.metrics) if args.metrics else []
    off, off_s = (None, 0.0) if args.no_off else run_workload(
        "off", args.off, system, turns, max_tokens, off_extra, args.timeout, args.lockstep)
    ideal = ideal_reuse(on, system_tokens)

    off_how = ("the same server, cache_prompt false" if args.llama_server and args.off == args.on
               else "cache_prompt false" if args.llama_server else "--no-prefix-cache")
    print(f"# multiturn: {args.clients} clients x {args.rounds} rounds, temperature 0, "
          f"max_tokens {max_tokens}{', lockstep rounds' if args.lockstep else ''}, "
          f"seed {args.seed}")
    print(f"# on: {args.on} ({kind}{', cache_prompt true' if args.llama_server else ''}); "
          f"off: {'not run (--no-off)' if args.no_off else f'{args.off} ({off_how})'}")
    print(f"# system prompt: {system_tokens} tokens (asked {args.system_tokens}); user turn: "
          f"{n_user_words} words, a sample {user_sample} tokens (asked {args.user_tokens}); "
          f"second probe reused {'n/a' if probe_cached is None else probe_cached} tokens on 'on'")
    print("# ideal: round 1 min(system, prompt-1); round r>1 "
          "min(prev_prompt + prev_completion - 1, prompt - 1); reuse = sum(cached)/sum(ideal)")
    print(f"# wall time: on {on_s:.1f} s, off {off_s:.1f} s")
    print(f"{'round':>5} {'requests':>8} {'prompt_mean':>11} {'ideal_mean':>10} "
          f"{'cached_mean':>11} {'reuse':>6} {'ttft_on_mean_ms':>15} {'ttft_on_p50_ms':>14} "
          f"{'ttft_on_p99_ms':>14} {'ttft_off_mean_ms':>16} {'ttft_off_p50_ms':>15} "
          f"{'ttft_off_p99_ms':>15}")
    rows = [(str(r + 1), [(c, r) for c in range(args.clients)]) for r in range(args.rounds)]
    rows.append(("all", [(c, r) for r in range(args.rounds) for c in range(args.clients)]))
    for label, keys in rows:
        on_r = [on[c][r] for c, r in keys]
        off_r = None if off is None else [off[c][r] for c, r in keys]
        ideal_sum = sum(ideal[c][r] for c, r in keys)
        cached = [x.cached for x in on_r]
        known = None not in cached
        cached_sum = sum(cached) if known else None
        reuse = cached_sum / ideal_sum if known and ideal_sum > 0 else None
        print(f"{label:>5} {len(keys):>8} {statistics.mean(x.prompt for x in on_r):>11.1f} "
              f"{ideal_sum / len(keys):>10.1f} "
              f"{fmt(cached_sum / len(keys) if known else None, 11)} {fmt(reuse, 6, 3)} "
              + "{:>15.1f} {:>14.1f} {:>14.1f} ".format(*ttft_stats(on_r))
              + ("{:>16} {:>15} {:>15}".format("n/a", "n/a", "n/a") if off_r is None else
                 "{:>16.1f} {:>15.1f} {:>15.1f}".format(*ttft_stats(off_r))), flush=True)
    if off is not None:
        differ = sum(on[c][r].text != off[c][r].text
                     for c in range(args.clients) for r in range(args.rounds))
        print(f"# replies that differ between on and off: {differ} of "
              f"{args.clients * args.rounds}", flush=True)
    for line in stage_lines:
        print(line, flush=True)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Scripted chat"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--on", required=True, type=parse_address,
                        help="the server with the cache: a ringlm head, or llama-server "
                             "(host:port)")
    parser.add_argument("--off", type=parse_address,
                        help="a ringlm head started with --no-prefix-cache; with --llama-server "
                             "optional (default: the --on server, sent cache_prompt false)")
    parser.add_argument("--llama-server", action="store_true",
                        help="the servers are llama-server: send cache_prompt true to --on and "
                             "false to --off (ringlm refuses that field)")
    parser.add_argument("--max-tokens", type=int,
                        help="reply length (default: 8 scripted, 64 multi-turn)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds per request (default: %(default)s)")
    scripted_group = parser.add_argument_group("scripted chat")
    scripted_group.add_argument("--turns", type=int, default=10,
                                help="user turns (default: %(default)s)")
    multi = parser.add_argument_group("multi-turn")
    multi.add_argument("--multiturn", action="store_true", help="run the multi-turn workload")
    multi.add_argument("--clients", type=int, default=16,
                       help="concurrent conversations (default: %(default)s)")
    multi.add_argument("--rounds", type=int, default=5,
                       help="user turns per conversation (default: %(default)s)")
    multi.add_argument("--system-tokens", type=int, default=512,
                       help="shared system prompt tokens to aim for (default: %(default)s)")
    multi.add_argument("--user-tokens", type=int, default=64,
                       help="user turn tokens to aim for (default: %(default)s)")
    multi.add_argument("--no-off", action="store_true",
                       help="run the workload on --on only (the off columns print n/a)")
    multi.add_argument("--lockstep", action="store_true",
                       help="start each round together on every client (default: each client "
                            "sends its next turn as soon as its reply is in)")
    multi.add_argument("--seed", type=int,
                       help="seed of the generated text (default: a new one per run, so a "
                            "server's cache holds nothing of an earlier run's conversations)")
    multi.add_argument("--metrics", action="append", type=parse_address, default=[],
                       metavar="HOST:PORT",
                       help="a stage's metrics address, read after the on run (repeatable)")
    args = parser.parse_args()
    if args.off is None:
        if not args.llama_server and not args.no_off:
            parser.error("--off is required (a ringlm head started with --no-prefix-cache)")
        args.off = args.on
    for name in ("clients", "rounds", "system_tokens", "user_tokens", "turns"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    try:
        if args.multiturn:
            multiturn(args)
        else:
            scripted(args)
    except (OSError, RuntimeError, ValueError, KeyError) as e:  # URLError is an OSError
        raise SystemExit(f"bench-prefix-cache: {describe(e)}")


if __name__ == "__main__":
    main()
