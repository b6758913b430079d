#!/usr/bin/python3
"""Benchmark peer: tfk8s from Python (the pybind11 package). Same protocol as peer_official.py:
one measured operation per call, one JSON line {"ms": ...}; client creation is not measured.

  peer_tfk8s.py apply <kubeconfig> <spec.json>                 TFCluster.apply
  peer_tfk8s.py list <kubeconfig> <ns>                         list every pod as dicts
  peer_tfk8s.py watch-replay <kubeconfig> <ns> <rv> <count>    decode a replayed watch
  peer_tfk8s.py fleet-sync <kubeconfig>                        tfk8s.Fleet over every namespace
                                                               until wait_for_sync()
"""
import json
import sys
import time

import tfk8s


def connect(kubeconfig):
    config = tfk8s.load_kubeconfig(kubeconfig)
    config.rate_limit = tfk8s.RateLimit(0, 0)  # measure the library, not client-side throttling
    client = tfk8s.Client(config=config)
    client.server_version()  # connect outside the measurement
    return client


def apply(kubeconfig, spec_path):
    client = connect(kubeconfig)
    spec = json.load(open(spec_path))
    t0 = time.perf_counter()
    cluster = tfk8s.TFCluster(client, spec)
    applied = cluster.apply()
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "objects": len(applied)}))


def list_pods(kubeconfig, ns):
    client = connect(kubeconfig)
    t0 = time.perf_counter()
    pods = client.list("v1", "Pod", ns)
    names = sum(1 for p in pods["items"] if p["metadata"]["name"])
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "items": names}))


def watch_replay(kubeconfig, ns, rv, count):
    client = connect(kubeconfig)
    t0 = time.perf_counter()
    events = 0
    with client.watch("v1", "ConfigMap", ns, label_selector="bench=watch", resource_version=rv,
                      timeout_seconds=120) as stream:
        for event in stream:
            if event.object["metadata"]["name"]:
                events += 1
            if events >= count:
                break
    seconds = time.perf_counter() - t0
    print(json.dumps({"ms": seconds * 1000, "events": events,
                      "events_per_s": events / seconds if seconds > 0 else 0}))


def fleet_sync(kubeconfig):
    client = connect(kubeconfig)
    client.resolve_preferred("batch", "CronJob", ["v1", "v1beta1"])  # cached, as the C++ run
    t0 = time.perf_counter()
    fleet = tfk8s.Fleet(client)
    if not fleet.wait_for_sync(600):
        raise SystemExit("fleet-sync: no sync in 600 s")
    ms = (time.perf_counter() - t0) * 1000
    entries = len(fleet)
    fleet.close()
    print(json.dumps({"ms": ms, "entries": entries}))


def main(argv):
    cmd = argv[1]
    if cmd == "apply":
        apply(argv[2], argv[3])
    elif cmd == "list":
        list_pods(argv[2], argv[3])
    elif cmd == "watch-replay":
        watch_replay(argv[2], argv[3], argv[4], int(argv[5]))
    elif cmd == "fleet-sync":
        fleet_sync(argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
