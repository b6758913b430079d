#!/usr/bin/python3
"""Relays TCP connections from the bridge address to the API server on loopback.

The apiserver binds one address (127.0.0.1, so it is not exposed on the machine's network);
pods reach it through the `kubernetes` Service, whose endpoint is the advertised bridge address.
Run: /usr/bin/python3 apirelay.py --listen 10.244.0.1:PORT --to 127.0.0.1:PORT [--tag TEXT]
"""

import argparse
import os
import select
import signal
import socket
import sys
import threading


def pipe(a, b):
    socks = [a, b]
    try:
        while True:
            r, _, _ = select.select(socks, [], [], 600)
            if not r:
                continue
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--tag", default="", help="ignored; names the instance in the command line")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda s, f: os._exit(0))
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(addr(args.listen))
    srv.listen(128)
    print("relaying %s -> %s" % (args.listen, args.to), file=sys.stderr, flush=True)
    target = addr(args.to)
    while True:
        c, _ = srv.accept()
        try:
            u = socket.create_connection(target, timeout=5)
            u.settimeout(None)
        except OSError as e:
            print("upstream %s: %s" % (args.to, e), file=sys.stderr, flush=True)
            c.close()
            continue
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()


if __name__ == "__main__":
    main()
