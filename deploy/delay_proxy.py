#!/usr/bin/env python3
"""A TCP proxy that delays every byte by a fixed time in each direction: a
stand-in for a LAN link's latency where the kernel has no netem.

    deploy/delay_proxy.py --delay-ms 1 127.0.0.2:47801=127.0.0.1:47801 [...]

Each LISTEN=TARGET pair accepts connections on LISTEN and relays them to
TARGET. Data read at time t is written at t + delay, in order, so the link
keeps its bandwidth and gains only latency. Runs until killed; prints one
line per pair once it listens. Standard library only.
"""
import argparse
import collections
import socket
import sys
import threading
import time


def parse_address(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


def relay(src, dst, delay):
    """Copies src to dst, each chunk `delay` seconds after it arrived."""
    pending = collections.deque()
    ready = threading.Condition()

    def writer():
        while True:
            with ready:
                while not pending:
                    ready.wait()
                due, data = pending.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if data is None:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    out = threading.Thread(target=writer, daemon=True)
    out.start()
    while True:
        try:
            data = src.recv(1 << 16)
        except OSError:
            data = b""
        with ready:
            pending.append((time.monotonic() + delay, data or None))
            ready.notify()
        if not data:
            break
    out.join()


def serve(listen, target, delay):
    server = socket.create_server(listen, reuse_port=False)
    print(f"delay_proxy: {listen[0]}:{listen[1]} -> {target[0]}:{target[1]}, "
          f"{delay * 1000:.2f} ms each way", flush=True)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection(target, timeout=5)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def connection(a=client, b=upstream):
            back = threading.Thread(target=relay, args=(b, a, delay), daemon=True)
            back.start()
            relay(a, b, delay)
            back.join()
            a.close()
            b.close()

        threading.Thread(target=connection, daemon=True).start()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=1.0, help="one-way delay (default 1)")
    parser.add_argument("pairs", nargs="+", metavar="LISTEN=TARGET")
    args = parser.parse_args()
    threads = []
    for pair in args.pairs:
        listen, _, target = pair.partition("=")
        if not target:
            sys.exit(f"delay_proxy: '{pair}' is not LISTEN=TARGET")
        t = threading.Thread(target=serve, daemon=True,
                             args=(parse_address(listen), parse_address(target),
                                   args.delay_ms / 1000.0))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
