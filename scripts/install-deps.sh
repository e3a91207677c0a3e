#!/usr/bin/env bash
# Installs the Debian packages one use of mirror needs, if any is missing; nothing when all are
# there (so a user without root can run it once the packages are in).
#   scripts/install-deps.sh build   the libraries mirror builds against (make build, release, install)
#   scripts/install-deps.sh demo    those and nginx (make demo)
#   scripts/install-deps.sh test    everything the tests run against, and kubernetes-validate
#                                   from PyPI (make test)
set -euo pipefail

profile=${1:-}
build=(
    libcurl4-openssl-dev   # libcurl (CCurl)
    libyaml-dev            # libyaml (CYAML)
    libssl-dev             # libcrypto, SHA-256 (CCrypto)
    libsqlite3-dev         # state store
    libmimalloc-dev        # mimalloc, the command's allocator (CMimalloc)
    pkg-config             # SwiftPM finds the libraries through it
)
demo=(
    nginx-light            # the loopback server of the demo and the tests
)
test=(
    apache2                # a second real server: weak ETags, AddEncoding
    lighttpd               # a third real server: Range/If-Range
    vsftpd                 # FTP, explicit FTPS (AUTH TLS) and implicit FTPS
    curl                   # the tests' reference client
    strace                 # the tests count the CLI's writes to standard output
    gcc                    # cc: the tests build the link emulator, Benchmarks/linkproxy.c
    groff-base             # make test checks that the man pages format cleanly
    openssl                # the tests make their own CA and TLS certificates
    tinyproxy-bin          # the forward proxy of the proxy tests
    dnsmasq-base           # the resolver the tests run inside their own network namespace
    xfsprogs               # mkfs.xfs: the cache tests make an XFS image with reflinks and loop-mount it
    iproute2               # ip: the tests' network namespaces bring their loopback up and down
    util-linux             # unshare, nsenter: the tests' network namespaces
    make                   # the install tests run `make install`
    man-db                 # man: the install tests render the installed man pages
    systemd                # systemd-analyze verify: the examples/systemd units
    zsh                    # the install tests check the generated zsh completions
    fish                   # and the fish ones
    prometheus-node-exporter  # reads sync --metrics-file through its textfile collector in the tests
    slurm-wlm              # slurmctld, slurmd, sbatch: the tests' one-node cluster runs sharded syncs
    munge                  # Slurm's authentication; the tests run their own munged with their own key
    python3-venv           # the virtual environment of kubernetes-validate (PyPI), below
)
case $profile in
    build) packages=("${build[@]}") ;;
    demo) packages=("${build[@]}" "${demo[@]}") ;;
    test) packages=("${build[@]}" "${demo[@]}" "${test[@]}") ;;
    *) echo "usage: $0 build|demo|test" >&2; exit 2 ;;
esac
# From PyPI, for the tests only, as the user running this script once the packages are in:
# kubernetes-validate checks examples/kubernetes against the Kubernetes schemas.
python_tools() {
    if [ "$profile" = test ]; then "$(dirname "$0")/install-kubernetes-validate.sh"; fi
}

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then python_tools; exit 0; fi

echo "installing: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "error: missing packages ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt run (a second checkout's `make test`) may hold the lock: wait for it.
wait_for_lock=(-o DPkg::Lock::Timeout=600)
"${sudo[@]}" apt-get "${wait_for_lock[@]}" update -qq
# Installed for the tests to start on their own loopback ports, never as services: a
# policy-rc.d that says "no" keeps maintainer scripts (prometheus-node-exporter's, on a host that
# runs systemd, would listen on :9100) from starting daemons, for this install only.
policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# mirror install-deps: no daemon starts during this install\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    own_policy=true
fi
remove_policy() { if $own_policy; then "${sudo[@]}" rm -f "$policy"; fi; }
trap remove_policy EXIT
"${sudo[@]}" apt-get "${wait_for_lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
python_tools
