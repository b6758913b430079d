#!/usr/bin/env bash
# Runs shellcheck on every shell script of the project, failing on any finding (any severity):
#   - the scripts tfk8s embeds and runs in pods (src/workloads/scripts/*.sh, see
#     cmake/embed_text.cmake), as POSIX sh: pods run them with the image's /bin/sh (dash,
#     busybox ash), so no bash-ism may slip in;
#   - the project's own scripts (tools/*.sh, tools/**/*.sh, tests/**/*.sh, .ci/run), in the
#     dialect of their "#!" line.
# A finding that is intended is disabled where it occurs, for that line only, with its reason
# (a "shellcheck disable=SCnnnn" directive comment followed by "# why").
# Usage: tools/lint/shell.sh (run by tools/lint.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v shellcheck >/dev/null; then
  echo "lint/shell: shellcheck is not installed (tools/install-deps.sh installs it)" >&2
  exit 1
fi

shopt -s nullglob globstar
embedded=(src/workloads/scripts/*.sh)
own=(tools/*.sh tools/**/*.sh tests/**/*.sh .ci/run)
# tools/*.sh and tools/**/*.sh overlap: each file once.
mapfile -t own < <(printf '%s\n' "${own[@]}" | sort -u)
if [ ${#embedded[@]} -eq 0 ]; then
  echo "lint/shell: no script in src/workloads/scripts" >&2
  exit 1
fi

status=0
# --norc: the findings do not depend on a ~/.shellcheckrc.
shellcheck --norc --shell=sh --severity=style "${embedded[@]}" || status=1
shellcheck --norc --severity=style "${own[@]}" || status=1
if [ $status -eq 0 ]; then
  echo "lint/shell: clean (${#embedded[@]} embedded scripts as POSIX sh, ${#own[@]} others)"
fi
exit $status
