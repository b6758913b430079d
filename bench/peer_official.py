#!/usr/bin/python3
"""Benchmark peer: the official Kubernetes Python client (Debian's python3-kubernetes).

Each subcommand performs one measured operation and prints one JSON line {"ms": ...}.
Client construction (config loading) is outside the measurement, as for every contender.

  peer_official.py create <kubeconfig> <objects.json>   create the objects one by one
  peer_official.py list <kubeconfig> <ns>               list and deserialize every pod
  peer_official.py raw-list <kubeconfig> <ns>           the same bytes, _preload_content=False + json
  peer_official.py watch-replay <kubeconfig> <ns> <rv> <count>  decode a replayed watch
  peer_official.py fleet-list <kubeconfig>              the Fleet's LISTs (every namespace, pages
                                                        of 500), deserialized into models
"""
import json
import sys
import threading
import time


def client(kubeconfig):
    from kubernetes import client as k8s, config
    config.load_kube_config(config_file=kubeconfig)
    return k8s


def create(kubeconfig, path):
    k8s = client(kubeconfig)
    from kubernetes import utils
    api = k8s.ApiClient()
    objects = json.load(open(path))
    k8s.VersionApi(api).get_code()  # connect outside the measurement
    t0 = time.perf_counter()
    for obj in objects:
        utils.create_from_dict(api, obj)
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "objects": len(objects)}))


def list_pods(kubeconfig, ns):
    k8s = client(kubeconfig)
    core = k8s.CoreV1Api()
    k8s.VersionApi().get_code()
    t0 = time.perf_counter()
    pods = core.list_namespaced_pod(ns)
    names = sum(1 for p in pods.items if p.metadata.name)
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "items": names}))


def raw_list(kubeconfig, ns):
    k8s = client(kubeconfig)
    core = k8s.CoreV1Api()
    k8s.VersionApi().get_code()
    t0 = time.perf_counter()
    resp = core.list_namespaced_pod(ns, _preload_content=False)
    data = json.loads(resp.data)
    names = sum(1 for p in data["items"] if p["metadata"]["name"])
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "items": names}))


def watch_replay(kubeconfig, ns, rv, count):
    """Decodes `count` events replayed from resourceVersion `rv` (the same stream for all)."""
    k8s = client(kubeconfig)
    from kubernetes import watch as kwatch
    core = k8s.CoreV1Api()
    k8s.VersionApi().get_code()
    w = kwatch.Watch()
    events = 0
    t0 = time.perf_counter()
    for ev in w.stream(core.list_namespaced_config_map, ns, label_selector="bench=watch",
                       resource_version=rv, timeout_seconds=120):
        if ev["object"].metadata.name:
            events += 1
        if events >= count:
            w.stop()
            break
    seconds = time.perf_counter() - t0
    print(json.dumps({"ms": seconds * 1000, "events": events,
                      "events_per_s": events / seconds if seconds > 0 else 0}))


MANAGED = "app.kubernetes.io/managed-by=tfk8s"


def fleet_list(kubeconfig):
    """The LISTs a tfk8s Fleet makes (kinds, label selectors, every namespace, pages of 500),
    one after the other, each page deserialized into the client's models as its users get them.
    CronJobs from batch/v1 when the server serves it, else batch/v1beta1 (as the Fleet)."""
    k8s = client(kubeconfig)
    api = k8s.ApiClient()
    batch_v1 = k8s.BatchV1Api(api)
    v1_cron = any(r.kind == "CronJob" for r in batch_v1.get_api_resources().resources)
    cron = batch_v1 if v1_cron else k8s.BatchV1beta1Api(api)
    lists = [(k8s.CoreV1Api(api).list_config_map_for_all_namespaces,
              "tfk8s.io/component=root," + MANAGED),
             (k8s.AppsV1Api(api).list_stateful_set_for_all_namespaces, MANAGED),
             (k8s.BatchV1Api(api).list_job_for_all_namespaces, MANAGED),
             (k8s.CoreV1Api(api).list_pod_for_all_namespaces, MANAGED),
             (cron.list_cron_job_for_all_namespaces, MANAGED)]
    items = 0
    t0 = time.perf_counter()
    for fn, selector in lists:
        cont = None
        while True:
            kwargs = {"label_selector": selector, "limit": 500}
            if cont:
                kwargs["_continue"] = cont
            page = fn(**kwargs)
            items += sum(1 for o in page.items if o.metadata.name)
            cont = page.metadata._continue
            if not cont:
                break
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "items": items}))


def main(argv):
    cmd = argv[1]
    if cmd == "create":
        create(argv[2], argv[3])
    elif cmd == "list":
        list_pods(argv[2], argv[3])
    elif cmd == "raw-list":
        raw_list(argv[2], argv[3])
    elif cmd == "watch-replay":
        watch_replay(argv[2], argv[3], argv[4], int(argv[5]))
    elif cmd == "fleet-list":
        fleet_list(argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
