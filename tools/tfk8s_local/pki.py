"""PKI for the local cluster, made with the `openssl` command line tool."""

import os
import secrets
import subprocess
import tempfile

DAYS = "3650"

# name -> (subject, extendedKeyUsage, subjectAltName or None)
LEAFS = {
    "apiserver": ("/CN=kube-apiserver", "serverAuth",
                  "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                  "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"),
    "admin": ("/O=system:masters/CN=admin-cert", "clientAuth", None),
    "apiserver-kubelet-client": ("/O=system:masters/CN=kube-apiserver-kubelet-client", "clientAuth", None),
    "kubelet": ("/CN=tfk8s-sim-kubelet", "serverAuth", "IP:127.0.0.1,DNS:localhost"),
}
# Signed by the front-proxy CA (the apiserver's requestheader authentication, as kubeadm does).
FRONT_PROXY_CLIENT = ("/CN=front-proxy-client", "clientAuth", None)

# Everything `up` needs below <dir>/pki; if one is missing the whole set is made again.
REQUIRED = ["ca.crt", "ca.key", "other-ca.crt", "other-ca.key", "sa.key", "sa.pub",
            "other-client.crt", "other-client.key", "front-proxy-ca.crt", "front-proxy-ca.key",
            "front-proxy-client.crt", "front-proxy-client.key"] + \
           [n + s for n in LEAFS for s in (".crt", ".key")]


class PkiError(Exception):
    pass


def _run(args, cwd):
    p = subprocess.run(["openssl"] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise PkiError("openssl %s failed: %s" % (" ".join(args[:2]), p.stderr.strip()[-800:]))


def _ca(pki, name, cn):
    _run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", DAYS,
          "-keyout", name + ".key", "-out", name + ".crt", "-subj", "/CN=" + cn,
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign,cRLSign",
          "-addext", "subjectKeyIdentifier=hash"], pki)


def _leaf(pki, name, subj, eku, san, ca="ca"):
    _run(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", name + ".key",
          "-out", name + ".csr", "-subj", subj], pki)
    ext = ["basicConstraints=critical,CA:FALSE",
           "keyUsage=critical,digitalSignature,keyEncipherment",
           "extendedKeyUsage=" + eku,
           "authorityKeyIdentifier=keyid"]
    if san:
        ext.append("subjectAltName=" + san)
    with tempfile.NamedTemporaryFile("w", dir=pki, suffix=".ext", delete=False) as f:
        f.write("\n".join(ext) + "\n")
        extfile = f.name
    try:
        _run(["x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
              "-set_serial", "0x" + secrets.token_hex(16), "-days", DAYS, "-sha256",
              "-extfile", extfile, "-out", name + ".crt"], pki)
    finally:
        os.unlink(extfile)
        try:
            os.unlink(os.path.join(pki, name + ".csr"))
        except FileNotFoundError:
            pass


def complete(pki):
    return all(os.path.isfile(os.path.join(pki, f)) for f in REQUIRED)


def ensure(pki, progress):
    """Creates what is missing of the PKI under `pki` (a new CA re-signs every leaf).

    Returns the set of things made anew: "ca", "sa", "other-ca", "front-proxy-ca", "leafs"."""
    made = set()
    if complete(pki):
        return made
    progress("making PKI in %s (openssl) ..." % pki)
    os.makedirs(pki, exist_ok=True)
    os.chmod(pki, 0o700)

    def have(*names):
        return all(os.path.isfile(os.path.join(pki, n)) for n in names)

    new_ca = False
    if not have("ca.crt", "ca.key"):
        _ca(pki, "ca", "tfk8s-local-ca")
        new_ca = True
        made.add("ca")
    for name, (subj, eku, san) in LEAFS.items():
        if new_ca or not have(name + ".crt", name + ".key"):
            _leaf(pki, name, subj, eku, san)
            made.add("leafs")
    # A second, unrelated CA (wrong-CA tests) and a client cert it signed (rejected by the server).
    new_other = False
    if not have("other-ca.crt", "other-ca.key"):
        _ca(pki, "other-ca", "tfk8s-other-ca")
        new_other = True
    if new_other or not have("other-client.crt", "other-client.key"):
        _leaf(pki, "other-client", "/O=system:masters/CN=other-client", "clientAuth", None, ca="other-ca")
    new_fp = False
    if not have("front-proxy-ca.crt", "front-proxy-ca.key"):
        _ca(pki, "front-proxy-ca", "tfk8s-front-proxy-ca")
        new_fp = True
    if new_fp or not have("front-proxy-client.crt", "front-proxy-client.key"):
        _leaf(pki, "front-proxy-client", *FRONT_PROXY_CLIENT, ca="front-proxy-ca")
    # Service-account token signing key pair.
    if not have("sa.key", "sa.pub"):
        _run(["genrsa", "-traditional", "-out", "sa.key", "2048"], pki)
        _run(["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"], pki)
        made.add("sa")
    for f in os.listdir(pki):
        if f.endswith(".srl"):
            os.unlink(os.path.join(pki, f))
        elif f.endswith(".key"):
            os.chmod(os.path.join(pki, f), 0o600)
    made.add("pki")
    return made
