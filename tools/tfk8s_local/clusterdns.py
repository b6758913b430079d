#!/usr/bin/python3
"""tfk8s cluster DNS feeder: watches Services and Endpoints and writes dnsmasq's hosts file.

dnsmasq (started by `tfk8s-local up --real-nodes` with --hostsdir=HOSTS_DIR) re-reads the file
on change (inotify), so names follow the API within about a second. Records (A):
  <svc>.<ns>.svc.cluster.local                       the ClusterIP, or every ready endpoint
                                                     address of a headless Service
  <hostname>.<svc>.<ns>.svc.cluster.local            endpoint addresses with a hostname (pods
                                                     that set hostname + subdomain=<svc>)
Run: /usr/bin/python3 clusterdns.py --kubeconfig-json <instance>/realnode.json --hosts-dir DIR
"""

import argparse
import logging
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
sys.dont_write_bytecode = True

from kubewatch import Informer, load_api  # noqa: E402

log = logging.getLogger("clusterdns")


def render(services, endpoints, domain):
    lines = set()
    for key, svc in services.items():
        ns, name = key.split("/", 1)
        fq = "%s.%s.svc.%s" % (name, ns, domain)
        ip = svc.get("spec", {}).get("clusterIP")
        headless = ip in (None, "", "None")
        if not headless:
            lines.add("%s %s" % (ip, fq))
        ep = endpoints.get(key)
        for sub in (ep or {}).get("subsets") or []:
            for a in sub.get("addresses") or []:
                if headless:
                    lines.add("%s %s" % (a["ip"], fq))
                if a.get("hostname"):
                    lines.add("%s %s.%s" % (a["ip"], a["hostname"], fq))
    return "".join(l + "\n" for l in sorted(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig-json", required=True)
    ap.add_argument("--hosts-dir", required=True)
    ap.add_argument("--domain", default="cluster.local")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    signal.signal(signal.SIGTERM, lambda s, f: os._exit(0))
    api, _ = load_api(args.kubeconfig_json)
    wake = threading.Event()
    svcs = Informer(api, "/api/v1/services", wake.set)
    eps = Informer(api, "/api/v1/endpoints", wake.set)
    out = os.path.join(args.hosts_dir, "cluster")
    last = None
    while True:
        wake.wait()
        wake.clear()
        if not (svcs.synced.is_set() and eps.synced.is_set()):
            continue
        text = render(svcs.snapshot(), eps.snapshot(), args.domain)
        if text != last:
            tmp = os.path.join(args.hosts_dir, ".cluster.tmp")
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, out)
            log.info("wrote %d names", text.count("\n"))
            last = text


if __name__ == "__main__":
    main()
