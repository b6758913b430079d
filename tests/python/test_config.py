"""Configuration loading, editing and redaction (no cluster needed, except the last tests)."""

from __future__ import annotations

import copy
import datetime
import os
from pathlib import Path

import pytest

import tfk8s

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: token
clusters:
- name: c
  cluster:
    server: https://alice:pw-SECRET@k8s.example.com:6443
    insecure-skip-tls-verify: true
users:
- name: token-user
  user:
    token: static-token-SECRET
- name: basic
  user:
    username: alice
    password: basic-password-SECRET
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: get-token
      args: ["--secret-arg=arg-SECRET"]
      env:
      - name: PLUGIN_VAR
        value: env-value-SECRET
contexts:
- name: token
  context: {cluster: c, user: token-user, namespace: ml-team}
- name: basic
  context: {cluster: c, user: basic}
- name: exec
  context: {cluster: c, user: exec}
"""


def test_load_from_string_and_fields() -> None:
    config = tfk8s.load_kubeconfig_from_string(KUBECONFIG)
    assert config.context == "token"
    assert config.default_namespace == "ml-team"
    assert config.token == "static-token-SECRET"  # plain data: readable on purpose
    assert config.insecure_skip_tls_verify
    assert isinstance(config.request_timeout, datetime.timedelta)
    other = tfk8s.load_kubeconfig_from_string(KUBECONFIG, context="basic", namespace="x")
    assert other.username == "alice" and other.default_namespace == "x"


@pytest.mark.parametrize("context", ["token", "basic", "exec"])
def test_repr_never_shows_secrets(context: str) -> None:
    config = tfk8s.load_kubeconfig_from_string(KUBECONFIG, context=context)
    for text in [repr(config), str(config), config.to_string(), repr(config.exec)]:
        assert "SECRET" not in text, text
    assert "REDACTED" in repr(config)
    client = tfk8s.Client(config=config)
    assert "SECRET" not in repr(client)
    assert "k8s.example.com" in repr(client)


def test_editing_nested_policies_in_place() -> None:
    config = tfk8s.ClientConfig()
    config.server = "https://127.0.0.1:1"
    config.rate_limit.qps = 40
    config.rate_limit.burst = 80
    config.retry.max_attempts = 2
    config.retry.initial_backoff = 0.5  # seconds
    config.request_timeout = datetime.timedelta(seconds=5)
    config.connect_timeout = 3  # plain numbers are seconds
    config.token_file_refresh = 90.0
    assert config.connect_timeout == datetime.timedelta(seconds=3)
    assert config.token_file_refresh == datetime.timedelta(seconds=90)
    with pytest.raises(ValueError):
        config.connect_timeout = -1
    assert config.rate_limit.qps == 40 and config.rate_limit.burst == 80
    assert config.retry.max_attempts == 2
    assert config.retry.initial_backoff == datetime.timedelta(milliseconds=500)
    assert config.request_timeout == datetime.timedelta(seconds=5)
    clone = copy.deepcopy(config)
    clone.rate_limit.qps = 1
    assert config.rate_limit.qps == 40
    assert "RateLimit(qps=40.0, burst=80)" == repr(config.rate_limit)
    assert "max_attempts=2" in repr(config.retry)
    config.validate()


def test_retry_policy_decisions() -> None:
    policy = tfk8s.RetryPolicy()
    attempt = tfk8s.RetryPolicy.Attempt()
    attempt.http_code = 429
    attempt.retry_after_seconds = 2
    assert policy.decide(attempt, 0.5) == datetime.timedelta(seconds=2)
    attempt.http_code = 500
    attempt.idempotent = False
    # With Retry-After the server asks for the request again: any verb is resent.
    assert policy.decide(attempt, 0.5) == datetime.timedelta(seconds=2)
    attempt.retry_after_seconds = None
    assert policy.decide(attempt, 0.5) is None  # without it, not even a read
    attempt.idempotent = True
    assert policy.decide(attempt, 0.5) is None
    attempt.http_code = 0  # no response: a read is resent, a write never
    assert policy.decide(attempt, 0.5) == policy.initial_backoff
    attempt.idempotent = False
    assert policy.decide(attempt, 0.5) is None
    attempt.number = policy.max_attempts
    attempt.idempotent = True
    assert policy.decide(attempt, 0.5) is None


def test_exec_config() -> None:
    config = tfk8s.load_kubeconfig_from_string(KUBECONFIG, context="exec")
    assert config.exec is not None
    assert config.exec.command == "get-token"
    assert config.exec.args == ["--secret-arg=arg-SECRET"]
    assert config.exec.env == [("PLUGIN_VAR", "env-value-SECRET")]
    made = tfk8s.ExecConfig()
    made.command = "x"
    made.args = ["--token=t-SECRET"]
    assert "SECRET" not in repr(made)


def test_config_errors_name_the_source() -> None:
    with pytest.raises(tfk8s.ConfigError) as info:
        tfk8s.load_kubeconfig("/does/not/exist.yaml")
    assert "/does/not/exist.yaml" in str(info.value)
    assert info.value.source
    with pytest.raises(tfk8s.ConfigError) as info:
        tfk8s.load_kubeconfig_from_string(KUBECONFIG, context="nope")
    assert "nope" in str(info.value)
    bad = tfk8s.ClientConfig()
    bad.server = "not a url"
    with pytest.raises(tfk8s.ConfigError):
        bad.validate()
    with pytest.raises(tfk8s.ConfigError):
        tfk8s.Client(config=bad)
    with pytest.raises(TypeError):
        tfk8s.Client("/some/kubeconfig", config=tfk8s.ClientConfig())


def test_in_cluster_config(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token-SECRET")
    (tmp_path / "namespace").write_text("team-a")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(tfk8s.ConfigError) as info:  # no CA yet: the error names the file
        tfk8s.load_in_cluster_config(service_account_dir=str(tmp_path), env=env)
    assert "ca.crt" in str(info.value)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    config = tfk8s.load_in_cluster_config(service_account_dir=str(tmp_path), env=env)
    assert config.server == "https://10.0.0.1:443"
    assert config.default_namespace == "team-a"
    assert config.token_file == str(tmp_path / "token")
    assert "SECRET" not in repr(config)
    with pytest.raises(tfk8s.ConfigError):
        tfk8s.load_in_cluster_config(service_account_dir=str(tmp_path), env={})


def test_default_config_follows_kubeconfig_env(cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", cluster.kubeconfig)
    config = tfk8s.load_default_config()
    assert config.context == "tfk8s-local"
    client = tfk8s.Client()
    assert client.namespace == "default"
    assert client.get("v1", "Namespace", "default")["metadata"]["name"] == "default"
    assert tfk8s.Client(namespace="kube-system").namespace == "kube-system"


def test_explicit_kubeconfig_and_context(cluster) -> None:
    client = tfk8s.Client(kubeconfig=Path(cluster.kubeconfig), context="tfk8s-local-cert")
    assert client.config.context == "tfk8s-local-cert"
    assert client.server_version()["gitVersion"].startswith("v1.")
    assert "BEGIN" not in repr(client.config).split("client-certificate:")[1].split("\n")[0]
    assert os.fspath(cluster.kubeconfig) in client.config.source
