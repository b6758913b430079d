#!/bin/sh
# tfk8s dev instance: start every enabled tool (each must be in the image).
set -u
cred="$TFK8S_CREDENTIALS_DIR"
unset PASSWORD
trap 'trap - TERM INT; kill -TERM 0 2>/dev/null; exit 0' TERM INT
have() { command -v "$1" >/dev/null 2>&1; }
# How this image starts Jupyter (JupyterLab first, then Notebook), or nothing.
jupyter_cmd() {
  if have jupyter && jupyter lab --version >/dev/null 2>&1; then echo "jupyter lab"
  elif have jupyter-lab; then echo "jupyter-lab"
  elif have jupyter && jupyter notebook --version >/dev/null 2>&1; then echo "jupyter notebook"
  elif have jupyter-notebook; then echo "jupyter-notebook"
  elif have python3 && python3 -c "import jupyterlab" >/dev/null 2>&1; then echo "python3 -m jupyterlab"
  elif have python3 && python3 -c "import notebook" >/dev/null 2>&1; then echo "python3 -m notebook"
  fi
}
sshd_bin="$(command -v sshd || echo /usr/sbin/sshd)"
absent=""
missing() { absent="$absent${absent:+, }$1 ($2)"; }
jupyter=""
if [ -n "${TFK8S_JUPYTER_PORT:-}" ]; then
  jupyter="$(jupyter_cmd)"
  [ -n "$jupyter" ] || missing jupyter "looked for jupyter lab, jupyter-lab, jupyter notebook, jupyter-notebook, python3 -m jupyterlab, python3 -m notebook"
fi
[ -z "${TFK8S_SSH_PORT:-}" ] || [ -x "$sshd_bin" ] || missing ssh "no sshd"
[ -z "${TFK8S_CODE_SERVER_PORT:-}" ] || have code-server || missing code-server "no code-server"
[ -z "${TFK8S_TENSORBOARD_PORT:-}" ] || have tensorboard || missing tensorboard "no tensorboard"
if [ -n "$absent" ]; then
  msg="tfk8s: enabled but not in the image: $absent; disable them in the spec's tools or use an image that has them"
  echo "$msg" >&2
  echo "$msg" > /dev/termination-log 2>/dev/null
  exit 1
fi
state="$TFK8S_HOME/.tfk8s"
mkdir -p "$state" 2>/dev/null || state=/tmp/tfk8s
mkdir -p "$state" /tmp/tfk8s
started=0
if [ -n "${TFK8S_SSH_PORT:-}" ]; then
  if [ -x "$sshd_bin" ]; then
    # SSH sessions start with a clean environment: give them the API server's address (no
    # secret) and the time zone through pam_env, so kubectl and tfk8s.Client() find in-cluster
    # config there too and clocks read as in the container.
    if [ -n "${KUBERNETES_SERVICE_HOST:-}${TZ:-}" ]; then
      { grep -v -E '^(KUBERNETES_SERVICE_|TZ=)' /etc/environment 2>/dev/null
        env | grep -E '^(KUBERNETES_SERVICE_|TZ=)'; } > /tmp/tfk8s/environment &&
        cat /tmp/tfk8s/environment > /etc/environment 2>/dev/null
    fi
    login=prohibit-password
    if [ "$TFK8S_SSH_PASSWORD_LOGIN" = yes ]; then
      printf 'root:%s\n' "$(cat "$cred/ssh-password-hash")" | chpasswd -e && login=yes
    fi
    keys=/etc/ssh/tfk8s_authorized_keys
    mkdir -p /etc/ssh /run/sshd "$state/ssh" && chmod 700 "$state/ssh"
    if [ -s "$cred/authorized_keys" ]; then cat "$cred/authorized_keys" > "$keys"; else : > "$keys"; fi
    chmod 600 "$keys"
    for t in ed25519 rsa; do
      [ -f "$state/ssh/ssh_host_${t}_key" ] || ssh-keygen -q -t "$t" -N '' -f "$state/ssh/ssh_host_${t}_key"
    done
    "$sshd_bin" -D -e -p "$TFK8S_SSH_PORT" -h "$state/ssh/ssh_host_ed25519_key" \
      -h "$state/ssh/ssh_host_rsa_key" -o PermitRootLogin="$login" \
      -o PasswordAuthentication="$TFK8S_SSH_PASSWORD_LOGIN" \
      -o "AuthorizedKeysFile=.ssh/authorized_keys $keys" &
    started=$((started + 1))
  fi
fi
if [ -n "${TFK8S_JUPYTER_PORT:-}" ]; then
  if [ -n "$jupyter" ]; then
    cat > /tmp/tfk8s/jupyter_config.py <<'PY'
import os
def credential(name):
    try:
        with open(os.path.join(os.environ['TFK8S_CREDENTIALS_DIR'], name)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ''
hashed = credential('jupyter-hashed-password')
if hashed.startswith('argon2:'):
    try:
        import argon2  # noqa: F401 - Jupyter verifies argon2 hashes with argon2-cffi
    except ImportError:
        print('tfk8s: no argon2-cffi in this Jupyter: using the salted SHA-512 hash', flush=True)
        hashed = credential('jupyter-hashed-password-sha512')
if not hashed:
    raise SystemExit('tfk8s: no Jupyter password hash; refusing to start without authentication')
for app in (c.ServerApp, c.NotebookApp):
    app.ip = '0.0.0.0'
    app.port = int(os.environ['TFK8S_JUPYTER_PORT'])
    app.open_browser = False
    app.allow_root = True
    app.token = ''
    app.password = hashed
    app.password_required = True
c.ServerApp.root_dir = os.environ['TFK8S_HOME']
c.NotebookApp.notebook_dir = os.environ['TFK8S_HOME']
c.IdentityProvider.token = ''
c.PasswordIdentityProvider.hashed_password = hashed
c.PasswordIdentityProvider.password_required = True
import sys
sys.path.insert(0, '/tmp/tfk8s')
c.NotebookApp.nbserver_extensions.update({'tfk8s_activity': True})
c.ServerApp.jpserver_extensions.update({'tfk8s_activity': True})
PY
    # Jupyter's own last activity (what its /api/status tells, without needing a login) for
    # the idle culler (DevInstance::Activity()), refreshed every 10 s.
    cat > /tmp/tfk8s/tfk8s_activity.py <<'PY'
import datetime, json, os
PATH = '/tmp/tfk8s/jupyter-activity.json'
def _iso(t):
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.astimezone(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
def _write(app):
    try:
        web = app.web_app
        kernels = web.settings['kernel_manager'].list_kernels()
        data = {'last_activity': _iso(web.last_activity()), 'kernels': len(kernels),
                'connections': sum(int(k.get('connections', 0)) for k in kernels)}
        with open(PATH + '.tmp', 'w') as f:
            json.dump(data, f)
        os.replace(PATH + '.tmp', PATH)
    except Exception as e:
        app.log.warning('tfk8s: cannot write %s: %s', PATH, e)
def _start(app):
    from tornado.ioloop import PeriodicCallback
    _write(app)
    PeriodicCallback(lambda: _write(app), 10000).start()
load_jupyter_server_extension = _start
_load_jupyter_server_extension = _start
def _jupyter_server_extension_points():
    return [{'module': 'tfk8s_activity'}]
PY
    echo "tfk8s: starting Jupyter with: $jupyter" >&2
    $jupyter --config=/tmp/tfk8s/jupyter_config.py &
    started=$((started + 1))
  fi
fi
if [ -n "${TFK8S_CODE_SERVER_PORT:-}" ]; then
  if have code-server; then
    # code-server verifies the argon2 hash (Jupyter's, without its "argon2:" prefix); the
    # plaintext never reaches the pod. The config file is root-only all the same.
    umask 077
    { printf 'bind-addr: 0.0.0.0:%s\nauth: password\nhashed-password: "' "$TFK8S_CODE_SERVER_PORT"
      sed 's/^argon2://' "$cred/jupyter-hashed-password" | tr -d '\n'
      printf '"\n'; } > /tmp/tfk8s/code-server.yaml
    umask 022
    code-server --config /tmp/tfk8s/code-server.yaml "$TFK8S_HOME" &
    started=$((started + 1))
  fi
fi
if [ -n "${TFK8S_TENSORBOARD_PORT:-}" ]; then
  if have tensorboard; then
    mkdir -p "$TFK8S_TENSORBOARD_LOGDIR"
    tensorboard --logdir "$TFK8S_TENSORBOARD_LOGDIR" --host 0.0.0.0 \
      --port "$TFK8S_TENSORBOARD_PORT" &
    started=$((started + 1))
  fi
fi
if [ "$started" -eq 0 ]; then
  echo "tfk8s: no tool is enabled: nothing to start" | tee /dev/termination-log >&2
  exit 1
fi
wait
