#!/usr/bin/env bash
# One large file from a server that caps each connection, as CDNs and download mirrors do:
# mirror as one stream (--segment-min off), mirror in segments, and aria2c -x N -s N, through
# linkproxy (a one-way delay of DELAY ms, RATE bytes/s per connection) in front of a loopback
# nginx; then the same file from nginx directly (no cap, no delay), one stream and segments.
#
#   Benchmarks/segment-bench.sh [MIRROR] [SIZE_MIB] [CONNECTIONS] [RATE] [DELAY_MS]
#   defaults: .build/release/mirror 256 8 5000000 20
set -euo pipefail
cd "$(dirname "$0")/.."
mirror=$(realpath "${1:-.build/release/mirror}")
size_mib=${2:-256}
connections=${3:-8}
rate=${4:-5000000}
delay=${5:-20}
work=$(mktemp -d /tmp/mirror-segment-bench.XXXXXX)
nginx_pid=""
proxy_pid=""
cleanup() {
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cc -O2 -o "$work/linkproxy" Benchmarks/linkproxy.c
mkdir -p "$work/site" "$work/run"
head -c $((size_mib << 20)) /dev/urandom >"$work/site/big.bin"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
pid $work/run/nginx.pid; error_log $work/run/error.log;
events { worker_connections 256; }
http {
    types {} default_type application/octet-stream; sendfile on; etag on; access_log off;
    client_body_temp_path $work/run/cb; proxy_temp_path $work/run/p; fastcgi_temp_path $work/run/f;
    uwsgi_temp_path $work/run/u; scgi_temp_path $work/run/s;
    server { listen 127.0.0.1:$port; root $work/site; location / {} }
}
EOF
nginx=$(command -v nginx || echo /usr/sbin/nginx)
"$nginx" -c "$work/nginx.conf" -p "$work/run" &
nginx_pid=$!
"$work/linkproxy" --upstream "127.0.0.1:$port" --delay "$delay" --rate "$rate" --port-file "$work/proxy.port" &
proxy_pid=$!
for _ in $(seq 50); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
proxy=$(cat "$work/proxy.port")

# Seconds for one run of "$@" into a fresh directory.
timed() {
    rm -rf "$work/out" && mkdir -p "$work/out"
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/run.log" 2>&1 || { cat "$work/run.log" >&2; return 1; }
    end=$(date +%s.%N)
    cmp -s "$work/out/big.bin" "$work/site/big.bin" || { echo "segment-bench: wrong bytes from: $*" >&2; return 1; }
    echo "$end - $start" | bc
}

manifest() {
    cat >"$work/m.yaml" <<EOF
version: 1
root: $work/out
state_dir: $work/state-$2
concurrency: $connections
files:
  - url: http://127.0.0.1:$1/big.bin
EOF
}

run_mirror() { # port, label, extra args
    local port=$1 label=$2
    shift 2
    manifest "$port" "$label"
    rm -rf "$work/state-$label"
    timed "$mirror" sync --quiet "$work/m.yaml" "$@"
}

limit=$(echo "scale=3; $size_mib * 1048576 / ($connections * $rate)" | bc)
echo "one ${size_mib} MiB file, $connections connections, each capped at $rate B/s, RTT $((2 * delay)) ms"
echo "link limit (size / (connections x cap)): $limit s"
printf '%-34s %8s\n' run seconds
printf '%-34s %8s\n' "mirror, one stream" "$(run_mirror "$proxy" one --segment-min off)"
printf '%-34s %8s\n' "mirror, segments" "$(run_mirror "$proxy" seg)"
printf '%-34s %8s\n' "aria2c -x$connections -s$connections" "$(timed aria2c -q -x"$connections" -s"$connections" -k1M --file-allocation=falloc \
    --allow-overwrite=true -d "$work/out" -o big.bin "http://127.0.0.1:$proxy/big.bin")"
printf '%-34s %8s\n' "mirror, one stream, uncapped" "$(run_mirror "$port" one-direct --segment-min off)"
printf '%-34s %8s\n' "mirror, segments, uncapped" "$(run_mirror "$port" seg-direct)"
