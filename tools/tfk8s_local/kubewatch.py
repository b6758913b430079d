"""List+watch caches for the real node's small helper processes (clusterdns.py, provisioner.py).

Standard library only; uses the REST client of nodesim.py. Config: the instance's realnode.json
(server, ca, token), written by `tfk8s-local up --real-nodes`.
"""

import json
import logging
import threading
import time

from nodesim import Api, ApiError, qpath  # noqa: F401 - re-exported for the helpers

log = logging.getLogger("kubewatch")


def load_api(path):
    with open(path) as f:
        cfg = json.load(f)
    return Api(cfg["server"], cfg["ca"], cfg["token"]), cfg


class Informer:
    """Keeps {"ns/name": object} of one resource in sync; calls changed() after every change."""

    def __init__(self, api, path, changed):
        self.api = api
        self.path = path
        self.changed = changed
        self.items = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        threading.Thread(target=self._run, name="watch " + path, daemon=True).start()

    @staticmethod
    def key(obj):
        md = obj["metadata"]
        return "%s/%s" % (md.get("namespace", ""), md["name"])

    def snapshot(self):
        with self.lock:
            return dict(self.items)

    def _run(self):
        while True:
            try:
                lst = self.api.get(self.path)
                rv = lst["metadata"]["resourceVersion"]
                with self.lock:
                    self.items = {self.key(o): o for o in lst.get("items", [])}
                self.synced.set()
                self.changed()
                self._watch(rv)
            except Exception as e:  # noqa: BLE001 - relist after any failure
                log.warning("%s: %r; relisting in 1s", self.path, e)
                time.sleep(1)

    def _watch(self, rv):
        while True:
            conn, resp = self.api.watch(qpath(self.path, watch="1", resourceVersion=rv,
                                              allowWatchBookmarks="true", timeoutSeconds="240"), timeout=300)
            try:
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            return  # relist
                        raise ApiError(obj.get("code", 0), json.dumps(obj))
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev["type"] == "BOOKMARK":
                        continue
                    with self.lock:
                        if ev["type"] == "DELETED":
                            self.items.pop(self.key(obj), None)
                        else:
                            self.items[self.key(obj)] = obj
                    self.changed()
            finally:
                conn.close()
