# Sourced by scripts/_venv.sh, scripts/test and bench/run: finds a Python and
# starts the local services they need when installed but down.

pick_python() {
  for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.11; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "redrive needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

start_postgres() {
  if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -h 127.0.0.1 -q; then
    if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
      for version in $(ls /etc/postgresql); do
        pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
      done
      for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -q && break; sleep 0.5; done
    fi
  fi
}

start_redis() {
  if command -v redis-cli >/dev/null 2>&1 && ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
    if command -v redis-server >/dev/null 2>&1; then
      mkdir -p /tmp/redrive-redis
      redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
        --dir /tmp/redrive-redis --logfile /tmp/redrive-redis/redis.log
      for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.2; done
    fi
  fi
}

# Debian packages the tests drive from outside Python (faketime for a worker
# whose clock runs ahead). Installed when missing and apt-get can; a test
# whose tool is still missing says so and is skipped, or fails under CI=true.
install_debian_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]} (once)..." >&2
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; } ||
      echo "could not install ${missing[*]}" >&2
  fi
}
