#!/usr/bin/python3
"""tfk8s local-path provisioner: host folders as PersistentVolumes for the real nodes.

Watches PersistentVolumeClaims of the StorageClass `tfk8s-local-path` (provisioner
tfk8s.io/local-path). For each pending claim it makes <volumes-dir>/pvc-<uid> and a hostPath
PersistentVolume bound to the claim (claimRef), with node affinity to the real nodes (label
tfk8s.io/real-node=true; all of them run on this machine and see the same folder) and the
claim's access modes (RWO and RWX both work; an RWX claim is really shared by pods on different
real nodes). When a claim is deleted the
PV controller marks the volume Released and leaves it to us (the PV says provisioned-by us):
the folder and the PV are deleted.
Run: /usr/bin/python3 provisioner.py --kubeconfig-json <instance>/realnode.json --volumes-dir DIR
"""

import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
sys.dont_write_bytecode = True

from kubewatch import ApiError, Informer, load_api  # noqa: E402

log = logging.getLogger("provisioner")
ANN_BY = "pv.kubernetes.io/provisioned-by"
REAL_LABEL = "tfk8s.io/real-node"  # realnode.REAL_LABEL: every real node has it


def reconcile(api, cfg, pvcs, pvs, vdir):
    sc, prov = cfg["storage_class"], cfg["provisioner"]
    claimed = {((pv["spec"].get("claimRef") or {}).get("uid")) for pv in pvs.values()}
    for pvc in pvcs.values():
        md, spec = pvc["metadata"], pvc["spec"]
        if spec.get("storageClassName") != sc or spec.get("volumeName") or md.get("deletionTimestamp"):
            continue
        if md["uid"] in claimed or (pvc.get("status") or {}).get("phase", "Pending") != "Pending":
            continue
        name = "pvc-" + md["uid"]
        path = os.path.join(vdir, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o777)
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        pv = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name, "annotations": {ANN_BY: prov},
                           "labels": {"app.kubernetes.io/managed-by": "tfk8s-local"}},
              "spec": {"capacity": {"storage": size},
                       "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                       "storageClassName": sc, "volumeMode": spec.get("volumeMode") or "Filesystem",
                       "persistentVolumeReclaimPolicy": "Delete",
                       "hostPath": {"path": path, "type": "Directory"},
                       # Every real node runs on this machine and sees the folder: the volume
                       # (ReadWriteMany too) is shared by all of them, never by a simulated node.
                       "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                           {"key": REAL_LABEL, "operator": "In", "values": ["true"]}]}]}},
                       "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                    "namespace": md["namespace"], "name": md["name"], "uid": md["uid"],
                                    "resourceVersion": md["resourceVersion"]}}}
        try:
            api.post("/api/v1/persistentvolumes", pv)
            log.info("provisioned %s (%s, %s) for %s/%s", name, size, ",".join(pv["spec"]["accessModes"]),
                     md["namespace"], md["name"])
        except ApiError as e:
            if e.status != 409:
                log.warning("creating %s failed: %s", name, e)
    for pv in pvs.values():
        md = pv["metadata"]
        if (md.get("annotations") or {}).get(ANN_BY) != prov:
            continue
        if (pv.get("status") or {}).get("phase") in ("Released", "Failed") and not md.get("deletionTimestamp"):
            path = (pv["spec"].get("hostPath") or {}).get("path", "")
            if os.path.dirname(path) == vdir.rstrip("/"):
                shutil.rmtree(path, ignore_errors=True)
            try:
                api.delete("/api/v1/persistentvolumes/" + md["name"], ok=(200, 202, 404))
                log.info("deleted released volume %s and %s", md["name"], path)
            except ApiError as e:
                log.warning("deleting %s failed: %s", md["name"], e)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig-json", required=True)
    ap.add_argument("--volumes-dir", required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    signal.signal(signal.SIGTERM, lambda s, f: os._exit(0))
    api, cfg = load_api(args.kubeconfig_json)
    wake = threading.Event()
    pvcs = Informer(api, "/api/v1/persistentvolumeclaims", wake.set)
    pvs = Informer(api, "/api/v1/persistentvolumes", wake.set)
    while True:
        wake.wait(5)  # also a periodic resync
        wake.clear()
        if pvcs.synced.is_set() and pvs.synced.is_set():
            try:
                reconcile(api, cfg, pvcs.snapshot(), pvs.snapshot(), args.volumes_dir)
            except Exception:  # noqa: BLE001
                log.exception("reconcile failed")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
