"""The kubeconfig's contexts and users, and the limited user's RBAC."""

import os

import pytest

ADMIN_CONTEXTS = ["tfk8s-local", "tfk8s-local-cert", "tfk8s-local-exec", "tfk8s-local-tokenfile"]


@pytest.mark.parametrize("context", ADMIN_CONTEXTS)
def test_admin_contexts_get_namespaces(cluster, context, tmp_path):
    counter = tmp_path / "exec-count"
    r = cluster.kubectl("--context", context, "get", "ns", "default", "-o", "name",
                        env={"TFK8S_EXEC_COUNT_FILE": str(counter)})
    assert r.stdout.strip() == "namespace/default"
    if context == "tfk8s-local-exec":
        assert counter.exists() and len(counter.read_text().splitlines()) >= 1
    else:
        assert not counter.exists()


def test_kubeconfig_uses_relative_paths(cluster):
    text = open(cluster.kubeconfig).read()
    assert "certificate-authority: pki/ca.crt" in text
    assert "client-certificate: pki/admin.crt" in text and "client-key: pki/admin.key" in text
    assert "tokenFile: tokens/admin.token" in text
    assert "current-context: tfk8s-local" in text
    assert "interactiveMode: Never" in text and "client.authentication.k8s.io/v1beta1" in text
    for ctx in ADMIN_CONTEXTS + ["tfk8s-local-limited"]:
        assert "- name: %s\n" % ctx in text


def test_limited_user(cluster):
    ctx = "tfk8s-local-limited"
    r = cluster.kubectl("--context", ctx, "-n", "default", "get", "pods")
    assert r.returncode == 0
    r = cluster.kubectl("--context", ctx, "-n", "default", "create", "configmap", "limited-x", check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    r = cluster.kubectl("--context", ctx, "get", "--raw", "/api/v1/namespaces/default/configmaps", check=False)
    assert r.returncode != 0 and ("403" in r.stderr or "forbidden" in r.stderr.lower()), r.stderr
    r = cluster.kubectl("--context", ctx, "get", "ns", check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower()


def test_wrong_ca_is_rejected(cluster):
    other = os.path.join(cluster.dir, "pki", "other-ca.crt")
    assert os.path.exists(other)
    r = cluster.kubectl("--certificate-authority", other, "get", "ns", check=False, timeout=30)
    assert r.returncode != 0
    assert "certificate" in r.stderr.lower() or "x509" in r.stderr.lower(), r.stderr


def test_cluster_json(cluster):
    info = cluster.info
    for key in ("server", "ca", "admin_token", "limited_token", "etcd_url", "pids", "kubelet_port", "nodes"):
        assert key in info, key
    assert info["server"].startswith("https://127.0.0.1:")
    assert set(info["pids"]) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "nodesim"}
