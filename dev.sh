#!/usr/bin/env bash
# The whole set-up and the two Quick-start entry points (see README.md):
#   ./dev.sh main          set up if needed, then run the main job
#   ./dev.sh test [ARGS]   set up if needed, then run the test suite (pytest ARGS)
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)
# Java is for the Spark engine's tests only: `./dev.sh main` (the demo) runs without it
if [ "${1:-main}" = test ]; then
  command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "dev.sh: installing ${need_apt[*]} (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=.venv/.gbinlog-installed
# Reinstall when the declared dependencies or the compiled kernels' sources changed.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
   || [ -n "$(find . -path ./.venv -prune -o \( -name '*.c' -o -name '*.pyx' \) -newer "$stamp" -print -quit)" ]; then
  .venv/bin/pip install -q -e ".[test]"
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:/usr/sbin:$PATH"

cmd=${1:-main}
shift || true
case "$cmd" in
  main) exec gbinlog demo "$@" ;;
  test) exec python -m pytest -q "$@" ;;
  *) echo "usage: ./dev.sh main | ./dev.sh test [pytest args]" >&2; exit 2 ;;
esac
