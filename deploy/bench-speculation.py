#!/usr/bin/env python3
"""Single-stream decode with and without speculative decoding, through a
ring of ringlmd processes on this host whose node-to-node links are delayed
by deploy/delay_proxy.py (this kernel has no netem).

Each node binds 127.0.0.1:PORT and advertises 127.0.0.2:PORT, where a proxy
relays to it after --delay-ms each way, so every hop between stages pays
the delay (--delay-ms 0: no proxy, the nodes talk directly); the client
talks to the head directly. Runs alternate (plain, speculating with one
step in flight, speculating with --steps-in-flight steps, plain, ...)
--repeats times; the best of each is shown:

  mode  prompt  tokens  ms_per_token  tokens_per_s  tokens_per_trip  acceptance  speedup

rows per prompt (--prompts, separated by '|'); speedup is over plain, and
a last line gives the speedup of several steps in flight over one.
tokens_per_trip =
tokens / (tokens - accepted drafts); acceptance = accepted drafts / drafts
checked (from the head's /metrics, per run). The replies with and without
modes must be the same, or the script fails. With --draft-model, a
second ring whose nodes run it (ringlmd --draft-model) is measured the same
way.

  deploy/bench-speculation.py [--model FILE] [--draft-model FILE] [--nodes 3]
      [--delay-ms 1] [--tokens 200] [--ctx-size N] [--max-drafts 8] [--steps-in-flight 3]
      [--repeats 3] [--threads 1]

Default model: ../shared/models/stories260K-f32.gguf beside the checkout.
Standard library only; loopback addresses only.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def start_ring(a, work, key, extra, tag):
    """Starts a.nodes daemons behind delaying proxies; returns (procs, head, split)."""
    procs = []
    base = 20000 + random.randrange(20000)
    ports = [base + 1 + i for i in range(a.nodes)]
    advertise = "127.0.0.1"
    if a.delay_ms > 0:  # else the nodes talk directly
        advertise = "127.0.0.2"
        pairs = [f"127.0.0.2:{port}=127.0.0.1:{port}" for port in ports]
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(REPO, "deploy", "delay_proxy.py"),
             "--delay-ms", str(a.delay_ms)] + pairs,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"proxy-{tag}.log"), "w")))
    for i, port in enumerate(ports):
        procs.append(subprocess.Popen(
            [a.ringlmd, "--model", a.model, "--grpc-host", "127.0.0.1", "--grpc-port", str(port),
             "--advertise-host", advertise, "--discovery-port", str(base),
             "--loopback-only", "--memory-mb", "4000", "--placement", "memory",
             "--threads", str(a.threads), "--state-dir", os.path.join(work, f"{tag}-s{i}"),
             "--max-drafts", str(a.max_drafts), "--log-level", "warn", "--cluster-key", key]
            + (["--ctx-size", str(a.ctx_size)] if a.ctx_size else []) + extra,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(work, f"{tag}-node{i}.log"), "w")))
    head = f"127.0.0.1:{ports[0]}"
    for _ in range(300):
        r = run([a.ringlm, "status", "--json", "--node", head, "--cluster-key", key])
        if r.returncode == 0:
            status = json.loads(r.stdout)
            if len(status["plan"]["stages"]) == a.nodes:
                break
        time.sleep(0.1)
    else:
        stop(procs)
        sys.exit("bench-speculation: the ring did not form; logs in " + work)
    time.sleep(1)  # every node applies the plan
    split = " ".join(f"[{s['first_layer']},{s['last_layer']})" for s in status["plan"]["stages"])
    return procs, head, split


def stop(procs):
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def modes(a):
    """The modes measured, as (name, extra `ringlm generate` flags)."""
    plain = ("plain", ["--no-speculation"])
    if a.steps_in_flight == 1:
        return [plain, ("1 in flight", ["--steps-in-flight", "1"])]
    return [plain, ("1 in flight", ["--steps-in-flight", "1"]),
            (f"{a.steps_in_flight} in flight", ["--steps-in-flight", str(a.steps_in_flight)])]


def measure(a, head, key, prompt):
    """Best of a.repeats runs of each mode, alternating:
    {mode: (ms, drafted, accepted, tokens)}, after checking that every
    run gave the same reply."""

    def metrics():
        r = run([a.ringlm, "status", "--json", "--node", head, "--cluster-key", key])
        for n in json.loads(r.stdout)["nodes"]:
            if n["self"]:
                m = n.get("metrics") or {}
                return m.get("drafted_tokens", 0), m.get("accepted_draft_tokens", 0)
        return 0, 0

    def generate(extra):
        before = metrics()
        cmd = [a.ringlm, "generate", "--cluster", head, "--cluster-key", key, "--prompt",
               prompt, "--temp", "0", "-n", str(a.tokens), "--ignore-eos", "--timings", "--json"]
        r = run(cmd + extra)
        if r.returncode != 0:
            sys.exit("bench-speculation: generate failed: " + r.stderr)
        m = re.search(r"([\d.]+) ms/token", r.stderr)
        after = metrics()
        return (json.loads(r.stdout)["ids"], float(m.group(1)), after[0] - before[0],
                after[1] - before[1])

    best, ids = {}, None
    for _ in range(a.repeats):
        for mode, extra in modes(a):
            got, ms, drafted, accepted = generate(extra)
            ids = ids if ids is not None else got
            if got != ids:
                sys.exit(f"bench-speculation: '{mode}' changed the reply to '{prompt}'")
            if mode not in best or ms < best[mode][0]:
                best[mode] = (ms, drafted, accepted, len(got))
    return best


def row(name, prompt, result, plain_ms):
    ms, drafted, accepted, n = result
    trip = n / max(1, n - accepted)
    acceptance = accepted / drafted if drafted else 0.0
    print(f"{name:<24} {prompt[:18]:<18} {n:6d} {ms:12.3f} {1000 / ms:12.1f} {trip:15.2f} "
          f"{acceptance:10.2f} {plain_ms / ms:7.2f}x", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=os.path.join(REPO, "..", "shared", "models",
                                                   "stories260K-f32.gguf"))
    p.add_argument("--draft-model", help="also measure with this draft model (a second ring)")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--delay-ms", type=float, default=1.0)
    p.add_argument("--tokens", type=int, default=200,
                   help="tokens to generate, as far as the context allows (see --ctx-size)")
    p.add_argument("--ctx-size", type=int, default=0,
                   help="the nodes' context size (default: the model's; stories260K's is "
                   "128, so prompt plus reply stop there)")
    p.add_argument("--max-drafts", type=int, default=8)
    p.add_argument("--steps-in-flight", type=int, default=3, choices=range(1, 5),
                   help="steps in flight to compare with one (1 to 4)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompts", default="Lily and Tom|Once upon a time|The cat|One day",
                   help="prompts separated by '|'")
    p.add_argument("--build", default=os.environ.get("BUILD_DIR", os.path.join(REPO, "build")))
    a = p.parse_args()
    a.ringlmd = os.path.join(a.build, "daemon", "ringlmd")
    a.ringlm = os.path.join(a.build, "cli", "ringlm")
    prompts = a.prompts.split("|")
    work = tempfile.mkdtemp(prefix="ringlm-spec-")
    procs = []
    try:
        key = os.path.join(work, "cluster.key")
        subprocess.run([a.ringlm, "keygen", "--out", key], check=True, capture_output=True)
        rings = [("n-gram", [])]
        if a.draft_model:
            rings.append(("draft model", ["--draft-model", a.draft_model]))
        for name, extra in rings:
            procs, head, split = start_ring(a, work, key, extra, name.replace(" ", "-"))
            print(f"{name}: model {os.path.basename(a.model)}, {a.nodes} nodes {split}, "
                  f"{a.delay_ms} ms one-way per link, up to {a.tokens} tokens, context "
                  f"{a.ctx_size or 'of the model'}, max {a.max_drafts} drafts, "
                  f"best of {a.repeats}", flush=True)
            print(f"{'mode':<24} {'prompt':<18} {'tokens':>6} {'ms_per_token':>12} "
                  f"{'tokens_per_s':>12} {'tokens_per_trip':>15} {'acceptance':>10} "
                  f"{'speedup':>8}", flush=True)
            total = {mode: 0.0 for mode, _ in modes(a)}
            for prompt in prompts:
                best = measure(a, head, key, prompt)
                for mode, _ in modes(a):
                    label = mode if mode == "plain" else f"{name}, {mode}"
                    row(label, prompt, best[mode], best["plain"][0])
                    total[mode] += best[mode][0]
            # Sums of ms/token: the ratio of the tokens/s over all prompts.
            for mode, _ in modes(a)[1:]:
                print(f"{name}, {mode}: over the prompts, {total['plain'] / total[mode]:.2f}x "
                      "the plain tokens/s", flush=True)
            if a.steps_in_flight > 1:
                several = modes(a)[2][0]
                print(f"{name}: {several} over 1 in flight: "
                      f"{total['1 in flight'] / total[several]:.2f}x", flush=True)
            print(flush=True)
            stop(procs)
            procs = []
    finally:
        stop(procs)
        if os.environ.get("KEEP_LOGS"):
            print("logs in " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
