#!/bin/sh
j=$(cat /tmp/tfk8s/jupyter-activity.json 2>/dev/null) || j=null
[ -n "$j" ] || j=null
n=0
for d in /proc/[0-9]*; do
  c=$(tr '\000' ' ' < "$d/cmdline" 2>/dev/null) || continue
  case "$c" in "sshd: "*@*) n=$((n + 1)) ;; esac
done
h=$(stat -c %Y "${HOME:-/root}/.local/share/code-server/heartbeat" 2>/dev/null) || h=null
[ -n "$h" ] || h=null
printf '{"jupyter":%s,"ssh_sessions":%d,"code_server_heartbeat":%s,"now":%s}\n' \
  "$j" "$n" "$h" "$(date +%s)"
