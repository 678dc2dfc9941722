#!/usr/bin/env bash
# The programs and kernel features the tests use beside the workspace's own binaries: Debian's
# Prometheus, node_exporter, nginx and Chromium, curl, taskset; a cgroup CPU controller, network
# namespaces and tc's netem/tbf qdiscs. Installs what is missing (as root, with apt-get, waiting
# for another package manager's lock rather than failing on it) and writes the key of each thing
# it could not provide, one a line, to the file named by $1 (default: target/test-unavailable).
# scripts/test.sh passes those keys to the tests as LOADGEN_TEST_UNAVAILABLE: a test whose need
# is among them is reported as skipped, with its reason; any other test whose need is missing
# fails. Run it alone to see what this machine has.
set -uo pipefail
cd "$(dirname "$0")/.."

out=${1:-target/test-unavailable}
mkdir -p "$(dirname "$out")"
: >"$out"

# key, the command that must exist afterwards, the Debian package that provides it
PACKAGES=(
  "prometheus prometheus prometheus"
  "node_exporter prometheus-node-exporter prometheus-node-exporter"
  "nginx nginx nginx-light"
  "chromium chromium chromium"
  "curl curl curl"
  "taskset taskset util-linux"
)

has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

missing=()
for entry in "${PACKAGES[@]}"; do
  read -r key command package <<<"$entry"
  has "$command" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]} (apt-get)"
    # Wait up to 10 minutes for another apt or dpkg to finish instead of failing on its lock.
    apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
    apt_get update -qq >/dev/null || echo "apt-get update failed"
    apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
      || echo "apt-get install ${missing[*]} failed"
    # Debian starts node_exporter and nginx as services; the tests start their own.
    if command -v systemctl >/dev/null 2>&1; then
      systemctl disable --now prometheus prometheus-node-exporter nginx >/dev/null 2>&1 || true
    fi
  else
    echo "${missing[*]} missing, and installing needs apt-get as root"
  fi
fi
for entry in "${PACKAGES[@]}"; do
  read -r key command package <<<"$entry"
  if has "$command"; then
    echo "found $command"
  else
    echo "UNAVAILABLE $key: $command could not be installed (Debian package $package)"
    echo "$key" >>"$out"
  fi
done

# The course reports' figures beside the checkout (test_reference_tables.py compares the copies).
if [ -d ../shared/reference ]; then
  echo "found ../shared/reference"
else
  echo "UNAVAILABLE shared: ../shared/reference is not beside this checkout"
  echo shared >>"$out"
fi

# Kernel features, tried for real: a cgroup with a CPU quota, a network namespace, a qdisc.
if [ "$(id -u)" != 0 ]; then
  for key in cgroup netns tbf; do
    echo "UNAVAILABLE $key: needs root"
    echo "$key" >>"$out"
  done
else
  cpu_mount=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ {print $2; exit}' /proc/mounts)
  [ -z "$cpu_mount" ] && [ -f /sys/fs/cgroup/cgroup.controllers ] \
    && grep -qw cpu /sys/fs/cgroup/cgroup.controllers && cpu_mount=/sys/fs/cgroup
  probe="$cpu_mount/loadgen-tools-probe-$$"
  if [ -n "$cpu_mount" ] && mkdir "$probe" 2>/dev/null; then
    rmdir "$probe"
    echo "found a cgroup CPU controller at $cpu_mount"
  else
    echo "UNAVAILABLE cgroup: no writable cgroup CPU controller"
    echo cgroup >>"$out"
  fi
  ns="loadgen-tools-probe-$$"
  if ip netns add "$ns" 2>/dev/null; then
    echo "found network namespaces"
    ip netns exec "$ns" ip link set lo up 2>/dev/null || true
    if ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
      echo "found tc netem"
    elif ip netns exec "$ns" tc qdisc add dev lo root tbf rate 1mbit burst 32kbit latency 50ms \
      2>/dev/null; then
      echo "found tc tbf (no netem in this kernel: the tests shape links with tbf)"
    else
      echo "UNAVAILABLE tbf: tc can add neither a netem nor a tbf qdisc"
      echo tbf >>"$out"
    fi
    ip netns del "$ns"
  else
    echo "UNAVAILABLE netns: ip netns add failed"
    printf 'netns\ntbf\n' >>"$out"
  fi
fi
exit 0
