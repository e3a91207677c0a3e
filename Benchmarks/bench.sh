#!/usr/bin/env bash
# mirror beside curl, wget2, aria2 and rclone on the same nginx, same data, same run.
#   Benchmarks/bench.sh PATH-TO-MIRROR           (make bench builds it and calls this)
# BENCH_SECTIONS names what runs, in any order: `loopback` (the tools straight on a loopback
# nginx), `links` (the same nginx behind Benchmarks/linkproxy.c, which adds a round-trip time
# and, in (k), a cap per connection), `scale` (a manifest of SCALE_COUNT entries, 10,000,000 by
# default); default all three, e.g. BENCH_SECTIONS=links runs that alone.
# Loopback workloads: (a) one 1 GiB file, (b) 2000 x 16 KiB at 8 at a time, (c) a no-op re-sync
# of (b), (d) resuming (a) from its half, (e) `mirror plan` of a 100,000-entry manifest, (f)
# `mirror plan` of a 1,000,000-entry manifest, (g) a no-op re-sync of 20,000 x 16 KiB (aria2
# only once), (v) `mirror verify` of (f)'s manifest with every file present (synced once first,
# untimed) and its futex calls, (n) (a)'s file pinned and (o) (b)'s files pinned, each placed
# from a blob cache that holds them (seeded with `mirror cache add`) beside mirror downloading
# them and curl. Each command runs RUNS times (default 5; (f) F_RUNS times, default 1: one run
# takes about a minute), tools interleaved; prints per workload each tool's median wall time,
# its peak RSS and mirror's ratio to the best peer, as Markdown, then the per-entry cost of (c)
# beside (g), and how long the whole run took. (c) and (g) also time the same HEAD requests
# made over libcurl's multi interface from C (Benchmarks/multi-head.c), the floor of a no-op;
# (b) also times the same GETs from C with the files made durable as mirror makes them, in
# each way that keeps that promise (Benchmarks/durable-files.c), the reference for mirror as
# shipped.
# mirror runs as shipped (fsync on) and, where writes are made durable ((a), (b), (d), (h)),
# also with --no-fsync, which is what the peers do.
# Links workloads, each tool at 8 requests in flight at most (connections, or HTTP/2 streams),
# LINK_RUNS times (default 3), interleaved: (h) LINK_COUNT (300) new files of 16 KiB at a 40 ms
# round trip; (i) the same files changed on the server (new bytes, a later date), each tool
# re-syncing its own copy; (j) a no-op re-check of them; (k) one LINK_BIG_MIB (256) MiB file
# from a server that caps each connection at 5 MB/s, 40 ms (curl and wget2, one connection
# each, once); (l) that file uncapped at an 80 ms round trip; (m) over HTTPS with HTTP/2 (a
# private CA the bench makes) at 40 ms: the LINK_COUNT new files, and a no-op re-check of the
# 2000 files of (b) (aria2 once there). aria2 at 16 connections in (k) is shown beside, beyond
# the budget of 8 connections; wget2 in (m) runs as it is run (30 streams on each of its 8
# connections) and, beside it, at one stream per connection. Besides the
# time, each row says what nginx logged for that tool: requests by method (and per file),
# connections, body bytes sent and the protocol; each copy is checked against the server's
# files. The section prints the load (uptime) at its start and end, and its duration.
# Scale: (s) a manifest of SCALE_COUNT entries written by Benchmarks/manifest-gen.py (10,000 to
# a directory), every url answered by one empty file on its own nginx: `mirror plan --shard
# 0/16` (a HEAD for each of its entries) and an unsharded `mirror verify` (no file on disk, so
# every entry is missing and the exit status is 1), once each, wall time and peak RSS.
set -euo pipefail
mirror=$(realpath "${1:?usage: bench.sh PATH-TO-MIRROR}")
sections=${BENCH_SECTIONS:-loopback links scale}
for section in $sections; do
    case $section in
        loopback | links | scale) ;;
        *) echo "BENCH_SECTIONS: unknown section '$section' (loopback, links, scale)" >&2; exit 2 ;;
    esac
done
wants() { [[ " $sections " == *" $1 "* ]]; }
runs=${RUNS:-5}
big_mib=${BIG_MIB:-1024}
small_count=${SMALL_COUNT:-2000}
plan_count=${PLAN_COUNT:-100000}
huge_plan_count=${HUGE_PLAN_COUNT:-1000000}
f_runs=${F_RUNS:-1}
noop_count=${NOOP_COUNT:-20000}
link_runs=${LINK_RUNS:-3}
link_big_mib=${LINK_BIG_MIB:-256}
link_count=${LINK_COUNT:-300}
link_cap=5000000 # bytes per second and connection in (k)
scale_count=${SCALE_COUNT:-10000000}
started=$SECONDS
here=$(cd "$(dirname "$0")/.." && pwd)

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v wget2 >/dev/null 2>&1 || missing+=(wget2)
command -v aria2c >/dev/null 2>&1 || missing+=(aria2)
command -v rclone >/dev/null 2>&1 || missing+=(rclone)
[ -x /usr/bin/time ] || missing+=(time)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v openssl >/dev/null 2>&1 || ! wants links || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing from Debian's packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi

work=${BENCH_DIR:-$(mktemp -d /var/tmp/mirror-bench.XXXXXX)}
# Every process the benchmark starts is stopped by its pid: the nginx servers through the pid
# files they write (removed first, so that a kept BENCH_DIR names no older process), each
# linkproxy through the pid kept when it was started.
proxy_pids=()
rm -f "$work/run/nginx.pid" "$work/run-tls/nginx.pid" "$work/run-scale/nginx.pid"
cleanup() {
    for pid in "${proxy_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for server in run run-tls run-scale; do
        [ -s "$work/$server/nginx.pid" ] && kill "$(cat "$work/$server/nginx.pid")" 2>/dev/null || true
    done
    rm -rf "$work/trash"
    [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/site/small" "$work/out" "$work/cfg"

echo "making the data in $work" >&2
if [ "$(ls "$work/site/small" | wc -l)" -ne "$small_count" ]; then
    head -c $((small_count * 16384)) /dev/urandom | split -b 16384 -d -a 5 - "$work/site/small/f"
fi
if wants loopback; then
    mkdir -p "$work/site/noop" "$work/site/many"
    [ -s "$work/site/big.bin" ] || head -c $((big_mib * 1024 * 1024)) /dev/urandom > "$work/site/big.bin"
    if [ "$(ls "$work/site/noop" | wc -l)" -ne "$noop_count" ]; then
        head -c $((noop_count * 16384)) /dev/urandom | split -b 16384 -d -a 6 - "$work/site/noop/g"
    fi
    if [ "$(ls "$work/site/many" | wc -l)" -ne "$plan_count" ]; then
        (cd "$work/site/many" && seq -f "m%06g" 1 "$plan_count" | xargs touch)
    fi
fi
if wants links; then
    mkdir -p "$work/site/link"
    [ "$(stat -c %s "$work/site/link-big.bin" 2>/dev/null || echo 0)" -eq $((link_big_mib * 1024 * 1024)) ] ||
        head -c $((link_big_mib * 1024 * 1024)) /dev/urandom > "$work/site/link-big.bin"
    if [ "$(ls "$work/site/link" | wc -l)" -ne "$link_count" ]; then
        rm -f "$work/site/link/"*
        head -c $((link_count * 16384)) /dev/urandom | split -b 16384 -d -a 5 - "$work/site/link/l"
    fi
fi

# The log names each request's protocol and connection (scripts/serve.sh, LOG_CONNECTIONS).
LOG_CONNECTIONS=on AUTOINDEX=on "$here/scripts/serve.sh" "$work/site" "$work/run"
base="http://127.0.0.1:$(cat "$work/run/port")"
log="$work/run/access.log"

# measure LABEL CMD...: appends "label seconds rss_kib" to $results, or, when the command
# fails, "label-failed status first-line-of-its-errors": a failed run is reported, not timed.
# ALLOW_STATUS=N counts exit status N as a run too (verify of files that are not there: 1).
# The wall time is read to the microsecond (bash's EPOCHREALTIME, no process started) around
# /usr/bin/time, whose own %e counts hundredths: at a 40 ms round trip the rows differ by less.
# It includes the millisecond or so /usr/bin/time itself adds, the same for every tool; the
# peak RSS is /usr/bin/time's.
results="$work/results"
: > "$results"
measure() {
    local label=$1 status=0 started ended; shift
    started=${EPOCHREALTIME/[.,]/}
    /usr/bin/time -f "%M" -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || status=$?
    ended=${EPOCHREALTIME/[.,]/}
    if [ "$status" -eq 0 ] || [ "$status" -eq "${ALLOW_STATUS:-0}" ]; then
        local wall=$((ended - started))
        echo "$label $((wall / 1000000)).$(printf '%06d' $((wall % 1000000))) $(tail -n 1 "$work/time.txt")" >> "$results"
    else
        echo "${label/ /-failed } $status $(grep -v '^Command exited' "$work/stderr.txt" | head -n 1 | cut -c 1-300)" >> "$results"
    fi
}
# Many small files are moved aside, not deleted, until the end: ext4 skips inodes freed in the
# last minutes when it allocates new ones, so deleting 2000 files just before the next tool
# creates 2000 makes that tool pay seconds of inode search (measured: 1-3 s instead of 0.25 s).
# A single large file is simply deleted. The sets moved aside (runs x tools x 32 MiB at the
# defaults, about 1 GiB) are deleted when the benchmark ends. Then what the tool before left
# unwritten (a tool that does not fsync leaves its files to the kernel's writeback) is written
# out, before the clock starts: a tool that syncs its files would otherwise wait for those too.
fresh() {
    if [ "$1" = big ] || [[ $1 == big-* ]]; then
        rm -rf "$work/out/$1"
    elif [ -e "$work/out/$1" ]; then
        mkdir -p "$work/trash"
        mv "$work/out/$1" "$(mktemp -d "$work/trash/$1.XXXXXX")/"
    fi
    mkdir -p "$work/out/$1"
    sync
}
requests_since() { echo $(( $(wc -l < "$log") - $1 )); }
manifest() { # name root concurrency url-list-file [ca-file]
    { echo "version: 1"; echo "root: $2"; echo "concurrency: $3"
      [ -z "${5:-}" ] || printf 'defaults:\n  ca_file: %s\n' "$5"
      echo "files:"; sed "s|^|  - url: |" "$4"; } > "$work/cfg/$1.yaml"
}

if wants loopback; then
    # Inputs for each tool.
    ls "$work/site/small" > "$work/cfg/names"
    sed "s|^|$base/small/|" "$work/cfg/names" > "$work/cfg/urls"
    awk -v b="$base/small/" -v o="$work/out/small/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\""}' "$work/cfg/names" > "$work/cfg/curl"
    awk -v b="$base/small/" -v o="$work/out/small/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\"\ncontinue-at = -"}' "$work/cfg/names" > "$work/cfg/curl-continue"
    awk -v b="$base/small/" '{print b $0 "\n  out=" $0}' "$work/cfg/names" > "$work/cfg/aria2"
    echo "$base/big.bin" > "$work/cfg/big-url"
    manifest big "$work/out/big" 1 "$work/cfg/big-url"
    manifest small "$work/out/small" 8 "$work/cfg/urls"
    seq -f "$base/many/m%06g" 1 "$plan_count" > "$work/cfg/many-urls"
    manifest many "$work/out/many" 16 "$work/cfg/many-urls"
    # (f) needs no more data on the server: its million entries name the same 100,000 (empty)
    # files of (e) ten times over, each time under another dest, so that every entry is planned
    # (a HEAD each) and none collides with another; the manifest itself is about 70 MiB.
    { echo "version: 1"; echo "root: $work/out/huge"; echo "concurrency: 16"; echo "files:"
      seq 0 $((huge_plan_count - 1)) | awk -v b="$base/many/m" -v n="$plan_count" \
          '{printf "  - url: %s%06d\n    dest: f%d/%06d\n", b, ($1 % n) + 1, int($1 / n), ($1 % n) + 1}'
    } > "$work/cfg/huge.yaml"
    # (g): each tool's own copy of the 20,000 files, made once before the timed no-op runs.
    ls "$work/site/noop" > "$work/cfg/noop-names"
    sed "s|^|$base/noop/|" "$work/cfg/noop-names" > "$work/cfg/noop-urls"
    awk -v b="$base/noop/" -v o="$work/out/noop-curl/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\""}' "$work/cfg/noop-names" > "$work/cfg/noop-curl"
    awk -v b="$base/noop/" -v o="$work/out/noop-curl/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\"\ncontinue-at = -"}' "$work/cfg/noop-names" > "$work/cfg/noop-curl-continue"
    awk -v b="$base/noop/" '{print b $0 "\n  out=" $0}' "$work/cfg/noop-names" > "$work/cfg/noop-aria2"
    manifest noop "$work/out/noop-mirror" 8 "$work/cfg/noop-urls"

    echo "(a) one ${big_mib} MiB file" >&2
    for run in $(seq 1 "$runs"); do
        measure "a network-floor" curl -s -o /dev/null "$base/big.bin"
        fresh big; measure "a curl" curl -s -o "$work/out/big/big.bin" "$base/big.bin"
        fresh big; measure "a wget2" wget2 -q -O "$work/out/big/big.bin" "$base/big.bin"
        fresh big; measure "a aria2" aria2c -q --allow-overwrite=true --file-allocation=none -d "$work/out/big" -o big.bin "$base/big.bin"
        fresh big; measure "a rclone" rclone copyurl -q "$base/big.bin" "$work/out/big/big.bin"
        fresh big; measure "a mirror" "$mirror" sync -q "$work/cfg/big.yaml"
        fresh big; measure "a mirror(no-fsync)" "$mirror" sync -q --no-fsync "$work/cfg/big.yaml"
    done

    # (n): the same file pinned, placed from a blob cache that holds it (seeded with
    # `mirror cache add`), beside mirror downloading it and curl. On this file system (ext4) a
    # placement is the kernel's copy; on XFS or Btrfs it would be a reflink.
    { cat "$work/cfg/big.yaml"; echo "    sha256: $(sha256sum "$work/site/big.bin" | cut -c1-64)"; } > "$work/cfg/big-pinned.yaml"
    "$mirror" cache add --cache "$work/cache" "$work/site/big.bin" >/dev/null
    echo "(n) the ${big_mib} MiB file pinned: placed from a blob cache, beside its download" >&2
    for run in $(seq 1 "$runs"); do
        fresh big; measure "n curl" curl -s -o "$work/out/big/big.bin" "$base/big.bin"
        fresh big; measure "n mirror(download)" "$mirror" sync -q "$work/cfg/big-pinned.yaml"
        fresh big; measure "n mirror(cached)" "$mirror" sync -q --cache "$work/cache" "$work/cfg/big-pinned.yaml"
        cmp -s "$work/out/big/big.bin" "$work/site/big.bin" || echo "n mirror(cached): result differs from the server's file" >&2
    done

    echo "(d) resuming it from its half" >&2
    half=$((big_mib * 1024 * 1024 / 2))
    for run in $(seq 1 "$runs"); do
        for tool in curl wget2 aria2 mirror mirror-nofsync; do
            fresh big
            head -c "$half" "$work/site/big.bin" > "$work/out/big/big.bin"
            case $tool in
                curl) measure "d curl" curl -s -C - -o "$work/out/big/big.bin" "$base/big.bin" ;;
                wget2) (cd "$work/out/big" && measure "d wget2" wget2 -q -c -O big.bin "$base/big.bin") ;;
                aria2) measure "d aria2" aria2c -q -c --file-allocation=none -d "$work/out/big" -o big.bin "$base/big.bin" ;;
                mirror)
                    # mirror's own interrupted download: the half is its partial file.
                    mv "$work/out/big/big.bin" "$work/out/big/big.bin.part"
                    before=$(wc -l < "$log")
                    measure "d mirror" "$mirror" sync -q "$work/cfg/big.yaml"
                    sent=$(tail -n "$(requests_since "$before")" "$log" | awk '/^GET/ {for (i = 1; i <= NF; i++) if ($i ~ /^bytes_sent=/) {split($i, kv, "="); s += kv[2]}} END {print s + 0}')
                    echo "d-bytes mirror $sent" >> "$results"
                    ;;
                mirror-nofsync)
                    mv "$work/out/big/big.bin" "$work/out/big/big.bin.part"
                    measure "d mirror(no-fsync)" "$mirror" sync -q --no-fsync "$work/cfg/big.yaml"
                    ;;
            esac
            cmp -s "$work/out/big/big.bin" "$work/site/big.bin" || echo "d $tool: result differs from the server's file" >&2
        done
    done

    # The floor of a no-op: the same HEAD requests over libcurl's multi interface from C, 8 at a
    # time, nothing else (Benchmarks/multi-head.c).
    cc -O2 -o "$work/multi-head" "$here/Benchmarks/multi-head.c" -lcurl
    # The reference for (b) as shipped: the same GETs over libcurl's multi interface from C,
    # each file made durable before its rename and the renames before the group's record, by
    # each of the ways it can be done (Benchmarks/durable-files.c), each also with a short
    # body held in memory and its file made by the committing thread (`held-`, as mirror
    # does); `none` and `held-none` are that program without an fsync.
    cc -O2 -pthread -o "$work/durable-files" "$here/Benchmarks/durable-files.c" -lcurl

    echo "(b) ${small_count} x 16 KiB, 8 at a time, and (c) re-checking them" >&2
    for run in $(seq 1 "$runs"); do
        measure "c libcurl-multi-C" "$work/multi-head" "$work/cfg/urls" 8
        fresh small; measure "b curl" curl -s --parallel --parallel-max 8 -K "$work/cfg/curl"
        measure "c curl" curl -s --parallel --parallel-max 8 -K "$work/cfg/curl-continue"
        fresh small; measure "b wget2" wget2 -q --max-threads=8 -nd -P "$work/out/small" -i "$work/cfg/urls"
        measure "c wget2" wget2 -q -N --max-threads=8 -nd -P "$work/out/small" -i "$work/cfg/urls"
        fresh small; measure "b aria2" aria2c -q -j 8 --file-allocation=none -d "$work/out/small" -i "$work/cfg/aria2"
        measure "c aria2" aria2c -q -j 8 --conditional-get=true --allow-overwrite=true --file-allocation=none -d "$work/out/small" -i "$work/cfg/aria2"
        fresh small; measure "b rclone" rclone copy -q --transfers 8 --http-url "$base/small/" :http: "$work/out/small"
        measure "c rclone" rclone copy -q --transfers 8 --http-url "$base/small/" :http: "$work/out/small"
        for strategy in writeback syncfs fsync none held-writeback held-syncfs held-fsync held-none; do
            fresh small; mkdir -p "$work/out/small"
            measure "b durable-C($strategy)" "$work/durable-files" "$work/cfg/urls" "$work/out/small" 8 "$strategy"
        done
        fresh small; measure "b mirror" "$mirror" sync -q "$work/cfg/small.yaml"
        measure "c mirror" "$mirror" sync -q "$work/cfg/small.yaml"
        fresh small; measure "b mirror(no-fsync)" "$mirror" sync -q --no-fsync "$work/cfg/small.yaml"
    done
    # A fully pinned, unchanged manifest re-checks with no request at all.
    cp "$work/cfg/small.yaml" "$work/cfg/pinned.yaml"
    "$mirror" lock -q "$work/cfg/pinned.yaml"
    for run in $(seq 1 "$runs"); do
        before=$(wc -l < "$log")
        measure "c mirror(pinned)" "$mirror" sync -q "$work/cfg/pinned.yaml"
        echo "c-requests mirror(pinned) $(requests_since "$before")" >> "$results"
    done
    # (o): (b)'s files pinned, placed from a blob cache that holds them (seeded with
    # `mirror cache add`), beside mirror downloading them and curl.
    (cd "$work/site/small" && find . -type f -print0 | xargs -0 "$mirror" cache add --cache "$work/cache" >/dev/null)
    echo "(o) (b)'s ${small_count} files pinned: placed from a blob cache, beside their download" >&2
    for run in $(seq 1 "$runs"); do
        fresh small; measure "o curl" curl -s --parallel --parallel-max 8 -K "$work/cfg/curl"
        fresh small; measure "o mirror(download)" "$mirror" sync -q "$work/cfg/pinned.yaml"
        fresh small
        before=$(wc -l < "$log")
        measure "o mirror(cached)" "$mirror" sync -q --cache "$work/cache" "$work/cfg/pinned.yaml"
        echo "o-requests mirror(cached) $(requests_since "$before")" >> "$results"
    done

    echo "(g) no-op re-sync of ${noop_count} x 16 KiB (downloading each tool's copy first)" >&2
    for tool in curl wget2 aria2 rclone mirror; do fresh "noop-$tool"; done
    {
        curl -s --parallel --parallel-max 8 -K "$work/cfg/noop-curl"
        wget2 -q --max-threads=8 -nd -P "$work/out/noop-wget2" -i "$work/cfg/noop-urls"
        aria2c -q -j 8 --file-allocation=none -d "$work/out/noop-aria2" -i "$work/cfg/noop-aria2"
        rclone copy -q --transfers 8 --http-url "$base/noop/" :http: "$work/out/noop-rclone"
        "$mirror" sync -q --no-fsync "$work/cfg/noop.yaml"
    } >/dev/null 2>&1 || true
    for tool in curl wget2 aria2 rclone mirror; do
        got=$(find "$work/out/noop-$tool" -maxdepth 1 -type f | wc -l)
        [ "$got" -eq "$noop_count" ] || echo "g $tool: $got of $noop_count files before the no-op runs" >&2
    done
    for run in $(seq 1 "$runs"); do
        measure "g libcurl-multi-C" "$work/multi-head" "$work/cfg/noop-urls" 8
        measure "g curl" curl -s --parallel --parallel-max 8 -K "$work/cfg/noop-curl-continue"
        measure "g wget2" wget2 -q -N --max-threads=8 -nd -P "$work/out/noop-wget2" -i "$work/cfg/noop-urls"
        # aria2 takes about 1 ms an entry here, 10-30 times the others: once is enough to place it.
        [ "$run" -gt 1 ] || measure "g aria2" aria2c -q -j 8 --conditional-get=true --allow-overwrite=true --file-allocation=none -d "$work/out/noop-aria2" -i "$work/cfg/noop-aria2"
        measure "g rclone" rclone copy -q --transfers 8 --http-url "$base/noop/" :http: "$work/out/noop-rclone"
        before=$(wc -l < "$log")
        measure "g mirror" "$mirror" sync -q "$work/cfg/noop.yaml"
        echo "g-requests mirror $(requests_since "$before")" >> "$results"
    done

    echo "(e) mirror plan of ${plan_count} entries" >&2
    for run in $(seq 1 "$runs"); do
        measure "e mirror" "$mirror" plan -q "$work/cfg/many.yaml"
    done

    echo "(f) mirror plan of ${huge_plan_count} entries" >&2
    for run in $(seq 1 "$f_runs"); do
        measure "f mirror" "$mirror" plan -q "$work/cfg/huge.yaml"
    done

    # (v): verify of (f)'s manifest with every file present, synced once first (not timed, a
    # few minutes: a million empty files), and the futex calls of one more run (strace -c -f).
    echo "(v) mirror verify of ${huge_plan_count} present files (synced first)" >&2
    fresh huge
    "$mirror" sync -q --no-fsync "$work/cfg/huge.yaml" >/dev/null 2>&1 || echo "v: the sync before the verify failed" >&2
    for run in $(seq 1 "$runs"); do
        measure "v mirror" "$mirror" verify -q "$work/cfg/huge.yaml"
    done
    strace -f -c -e trace=futex -o "$work/v-futex" "$mirror" verify -q "$work/cfg/huge.yaml" >/dev/null 2>&1 || true
    echo "v-calls futex $(awk '$NF == "futex" {n = $4} END {print n + 0}' "$work/v-futex" 2>/dev/null || echo 0)" >> "$results"
fi

if wants links; then
    links_started=$SECONDS
    echo "links section, load at its start (1, 5, 15 min):$(uptime | sed "s/.*load average://")" > "$work/links-notes"
    echo "links: a 40 ms round trip, a 5 MB/s cap, an 80 ms round trip, HTTPS with HTTP/2" >&2
    cc -O2 -o "$work/linkproxy" "$here/Benchmarks/linkproxy.c"
    # A private CA and a certificate for 127.0.0.1 that it signed: every tool is given the CA.
    tls="$work/tls"
    mkdir -p "$tls"
    quietly() { "$@" 2>>"$tls/openssl.log" || { cat "$tls/openssl.log" >&2; exit 1; }; }
    quietly openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=mirror bench CA" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$tls/ca.key" -out "$tls/ca.pem"
    quietly openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$tls/server.key" -out "$tls/server.csr"
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' > "$tls/server.ext"
    quietly openssl x509 -req -days 2 -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -extfile "$tls/server.ext" -out "$tls/server.pem"
    ca="$tls/ca.pem"
    TLS_CERT="$tls/server.pem" TLS_KEY="$tls/server.key" LOG_CONNECTIONS=on AUTOINDEX=on \
        "$here/scripts/serve.sh" "$work/site" "$work/run-tls"
    tls_log="$work/run-tls/access.log"

    # start_proxy NAME UPSTREAM-PORT DELAY-MS [RATE]: a linkproxy in front of that port; its own
    # port is written to $work/run/NAME.port, its pid kept for the exit.
    start_proxy() {
        rm -f "$work/run/$1.port"
        "$work/linkproxy" --upstream "127.0.0.1:$2" --delay "$3" ${4:+--rate "$4"} --port-file "$work/run/$1.port" &
        proxy_pids+=("$!")
        for _ in $(seq 1 100); do
            [ -s "$work/run/$1.port" ] && return 0
            sleep 0.05
        done
        echo "linkproxy $1 did not start" >&2
        exit 1
    }
    start_proxy rtt40 "$(cat "$work/run/port")" 20
    start_proxy capped "$(cat "$work/run/port")" 20 "$link_cap"
    start_proxy rtt80 "$(cat "$work/run/port")" 40
    start_proxy tls40 "$(cat "$work/run-tls/port")" 20
    at40="http://127.0.0.1:$(cat "$work/run/rtt40.port")"
    capped="http://127.0.0.1:$(cat "$work/run/capped.port")"
    at80="http://127.0.0.1:$(cat "$work/run/rtt80.port")"
    tls40="https://127.0.0.1:$(cat "$work/run/tls40.port")"

    # lmeasure LABEL SERVER-LOG CMD...: measure, then append what the server logged meanwhile as
    # "W-log TOOL requests connections connections-with-a-body body-bytes protocols methods".
    lmeasure() {
        local label=$1 server_log=$2 before; shift 2
        before=$(wc -l < "$server_log")
        measure "$label" "$@"
        tail -n "+$((before + 1))" "$server_log" | awk -v label="${label/ /-log }" '
            { requests++; method[$1]++; size = 0
              for (i = 2; i <= NF; i++) {
                  split($i, kv, "=")
                  if (kv[1] == "bytes_sent") size = kv[2]
                  else if (kv[1] == "connection") id = kv[2]
                  else if (kv[1] == "protocol") protocol[kv[2]] = 1
              }
              bytes += size; connection[id] = 1; if (size > 0) carrying[id] = 1 }
            END { n = 0; for (c in connection) n++
                  m = 0; for (c in carrying) m++
                  p = ""; for (k in protocol) p = p (p == "" ? "" : ",") k
                  s = ""; for (k in method) s = s (s == "" ? "" : ",") method[k] "x" k
                  print label, requests + 0, n, m, bytes + 0, (p == "" ? "-" : p), (s == "" ? "-" : s) }' >> "$results"
    }
    # check_copies W TOOL DIR SUMS: the files of DIR that are not the server's (SUMS, an md5sum
    # list) are counted as "W-wrong TOOL N": a run that left a stale or a missing copy.
    check_copies() {
        local bad
        bad=$(cd "$3" && md5sum -c --quiet "$4" 2>/dev/null | wc -l) || true
        if [ "$bad" -gt 0 ]; then
            echo "$1-wrong $2 $bad" >> "$results"
            echo "($1) $2: $bad files are not the server's" >&2
        fi
    }
    curl_list() { # URL-PREFIX OUTPUT-DIR NAMES [LINE]: one curl operation for every name
        awk -v b="$1" -v o="$2" -v extra="${4:-}" \
            '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\""; if (extra != "") print extra}' "$3"
    }
    # One operation per file, so that each has its own time condition: its copy's date (kept
    # from the server's Last-Modified by remote-time).
    curl_newer() { # URL-PREFIX OUTPUT-DIR NAMES
        awk -v b="$1" -v o="$2" '{if (NR > 1) print "next"
            print "url = \"" b $0 "\"\noutput = \"" o $0 "\"\ntime-cond = \"" o $0 "\"\nremote-time\nsilent"}' "$3"
    }
    aria2_list() { awk -v b="$1" '{print b $0 "\n  out=" $0}' "$2"; }

    # (h), (j), (i): each tool's own copy in out/link-TOOL.
    ls "$work/site/link" > "$work/cfg/link-names"
    sed "s|^|$at40/link/|" "$work/cfg/link-names" > "$work/cfg/link-urls"
    { echo "remote-time"; curl_list "$at40/link/" "$work/out/link-curl/" "$work/cfg/link-names"; } > "$work/cfg/link-curl"
    curl_list "$at40/link/" "$work/out/link-curl/" "$work/cfg/link-names" "continue-at = -" > "$work/cfg/link-curl-continue"
    curl_newer "$at40/link/" "$work/out/link-curl/" "$work/cfg/link-names" > "$work/cfg/link-curl-newer"
    aria2_list "$at40/link/" "$work/cfg/link-names" > "$work/cfg/link-aria2"
    manifest link "$work/out/link-mirror" 8 "$work/cfg/link-urls"
    manifest link-nofsync "$work/out/link-nofsync" 8 "$work/cfg/link-urls"
    sums="$work/cfg/link.md5"
    echo "(h) $link_count x 16 KiB at RTT 40 ms, (j) re-checking them, (i) re-syncing them changed" >&2
    for run in $(seq 1 "$link_runs"); do
        (cd "$work/site/link" && md5sum -- *) > "$sums"
        fresh link-curl; lmeasure "h curl" "$log" curl -s --parallel --parallel-max 8 -K "$work/cfg/link-curl"
        fresh link-wget2; lmeasure "h wget2" "$log" wget2 -q --max-threads=8 -nd -P "$work/out/link-wget2" -i "$work/cfg/link-urls"
        fresh link-aria2; lmeasure "h aria2" "$log" aria2c -q -j 8 --file-allocation=none -d "$work/out/link-aria2" -i "$work/cfg/link-aria2"
        fresh link-rclone; lmeasure "h rclone" "$log" rclone copy -q --transfers 8 --http-url "$at40/link/" :http: "$work/out/link-rclone"
        fresh link-mirror; lmeasure "h mirror" "$log" "$mirror" sync -q "$work/cfg/link.yaml"
        fresh link-nofsync; lmeasure "h mirror(no-fsync)" "$log" "$mirror" sync -q --no-fsync "$work/cfg/link-nofsync.yaml"
        for tool in curl wget2 aria2 rclone mirror nofsync; do
            check_copies h "$tool" "$work/out/link-$tool" "$sums"
        done
        # (j): the flags of (c).
        lmeasure "j curl" "$log" curl -s --parallel --parallel-max 8 -K "$work/cfg/link-curl-continue"
        lmeasure "j wget2" "$log" wget2 -q -N --max-threads=8 -nd -P "$work/out/link-wget2" -i "$work/cfg/link-urls"
        lmeasure "j aria2" "$log" aria2c -q -j 8 --conditional-get=true --allow-overwrite=true --file-allocation=none -d "$work/out/link-aria2" -i "$work/cfg/link-aria2"
        lmeasure "j rclone" "$log" rclone copy -q --transfers 8 --http-url "$at40/link/" :http: "$work/out/link-rclone"
        lmeasure "j mirror" "$log" "$mirror" sync -q "$work/cfg/link.yaml"
        # The change: the same names and sizes, new bytes, a later date. Last-Modified counts
        # whole seconds: 2 s after the last copy was made, the new date is later than any date
        # a tool gave its copy (the server's old one, or the time it wrote the copy).
        sleep 2
        head -c $((link_count * 16384)) /dev/urandom | split -b 16384 -d -a 5 - "$work/site/link/l"
        touch -d "@$(date +%s)" "$work/site/link/"*
        (cd "$work/site/link" && md5sum -- *) > "$sums"
        lmeasure "i curl" "$log" curl -s --parallel --parallel-max 8 -K "$work/cfg/link-curl-newer"
        lmeasure "i wget2" "$log" wget2 -q -N --max-threads=8 -nd -P "$work/out/link-wget2" -i "$work/cfg/link-urls"
        lmeasure "i aria2" "$log" aria2c -q -j 8 --conditional-get=true --allow-overwrite=true --file-allocation=none -d "$work/out/link-aria2" -i "$work/cfg/link-aria2"
        lmeasure "i rclone" "$log" rclone copy -q --transfers 8 --http-url "$at40/link/" :http: "$work/out/link-rclone"
        lmeasure "i mirror" "$log" "$mirror" sync -q "$work/cfg/link.yaml"
        for tool in curl wget2 aria2 rclone mirror; do
            check_copies i "$tool" "$work/out/link-$tool" "$sums"
        done
    done

    # (k) and (l): one large file. aria2 and rclone split it into 8 ranges (aria2 also into 16,
    # beyond the budget of 8, to show the cap); -k 1M lets aria2 split a small LINK_BIG_MIB too.
    (cd "$work/site" && md5sum link-big.bin) > "$work/cfg/link-big.md5"
    big_copy="$work/out/big-link/link-big.bin"
    big_run() { # W URL-BASE TOOL
        fresh big-link
        case $3 in
            curl) lmeasure "$1 curl" "$log" curl -s -o "$big_copy" "$2/link-big.bin" ;;
            wget2) lmeasure "$1 wget2" "$log" wget2 -q -O "$big_copy" "$2/link-big.bin" ;;
            aria2) lmeasure "$1 aria2" "$log" aria2c -q -x 8 -s 8 -k 1M --file-allocation=none -d "$work/out/big-link" -o link-big.bin "$2/link-big.bin" ;;
            aria2-x16) lmeasure "$1 aria2(x16)" "$log" aria2c -q -x 16 -s 16 -k 1M --file-allocation=none -d "$work/out/big-link" -o link-big.bin "$2/link-big.bin" ;;
            rclone) lmeasure "$1 rclone" "$log" rclone copyto -q --multi-thread-streams 8 --multi-thread-cutoff 1M --http-url "$2/" :http:link-big.bin "$big_copy" ;;
            mirror) lmeasure "$1 mirror" "$log" "$mirror" sync -q "$work/cfg/big-$1.yaml" ;;
        esac
        check_copies "$1" "$3" "$work/out/big-link" "$work/cfg/link-big.md5"
    }
    echo "$capped/link-big.bin" > "$work/cfg/big-k-url"
    manifest big-k "$work/out/big-link" 8 "$work/cfg/big-k-url"
    echo "$at80/link-big.bin" > "$work/cfg/big-l-url"
    manifest big-l "$work/out/big-link" 8 "$work/cfg/big-l-url"
    echo "(k) one $link_big_mib MiB file, $link_cap bytes/s per connection, RTT 40 ms" >&2
    for run in $(seq 1 "$link_runs"); do
        # One connection at the cap takes size / cap (about 54 s at the defaults): once is enough.
        [ "$run" -gt 1 ] || big_run k "$capped" curl
        [ "$run" -gt 1 ] || big_run k "$capped" wget2
        for tool in aria2 aria2-x16 rclone mirror; do big_run k "$capped" "$tool"; done
    done
    echo "(l) one $link_big_mib MiB file, RTT 80 ms" >&2
    for run in $(seq 1 "$link_runs"); do
        for tool in curl wget2 aria2 rclone mirror; do big_run l "$at80" "$tool"; done
    done

    # (m): HTTPS with HTTP/2, the files of (h) new, then a no-op re-check of the files of (b),
    # each tool's copy made first, untimed. wget2 sends up to 30 requests at once on each HTTP/2
    # connection (--http2-request-window, its default) over its 8 connections: that is how it is
    # run, and it is a peer like the others (the budget is connections, as `concurrency` counts
    # them). At a window of one it is shown beside: 8 requests in flight, as HTTP/1.1 would be.
    echo "(m) HTTPS with HTTP/2 at RTT 40 ms: $link_count new files, a re-check of $small_count" >&2
    sed "s|^|$tls40/link/|" "$work/cfg/link-names" > "$work/cfg/tls-urls"
    curl_list "$tls40/link/" "$work/out/tls-curl/" "$work/cfg/link-names" > "$work/cfg/tls-curl"
    aria2_list "$tls40/link/" "$work/cfg/link-names" > "$work/cfg/tls-aria2"
    manifest tls "$work/out/tls-mirror" 8 "$work/cfg/tls-urls" "$ca"
    ls "$work/site/small" > "$work/cfg/tls-noop-names"
    (cd "$work/site/small" && md5sum -- *) > "$work/cfg/small.md5"
    sed "s|^|$tls40/small/|" "$work/cfg/tls-noop-names" > "$work/cfg/tls-noop-urls"
    curl_list "$tls40/small/" "$work/out/tls-noop-curl/" "$work/cfg/tls-noop-names" > "$work/cfg/tls-noop-curl"
    curl_list "$tls40/small/" "$work/out/tls-noop-curl/" "$work/cfg/tls-noop-names" "continue-at = -" > "$work/cfg/tls-noop-curl-continue"
    aria2_list "$tls40/small/" "$work/cfg/tls-noop-names" > "$work/cfg/tls-noop-aria2"
    manifest tls-noop "$work/out/tls-noop-mirror" 8 "$work/cfg/tls-noop-urls" "$ca"
    wget2_tls=(wget2 -q --ca-certificate="$ca" --max-threads=8 --http2-request-window=1 -nd)
    wget2_tls_30=(wget2 -q --ca-certificate="$ca" --max-threads=8 -nd)
    for tool in curl wget2 wget2-30 aria2 rclone mirror; do fresh "tls-noop-$tool"; done
    {
        curl -s --cacert "$ca" --parallel --parallel-max 8 -K "$work/cfg/tls-noop-curl"
        "${wget2_tls[@]}" -P "$work/out/tls-noop-wget2" -i "$work/cfg/tls-noop-urls"
        "${wget2_tls_30[@]}" -P "$work/out/tls-noop-wget2-30" -i "$work/cfg/tls-noop-urls"
        aria2c -q --ca-certificate="$ca" -j 8 --file-allocation=none -d "$work/out/tls-noop-aria2" -i "$work/cfg/tls-noop-aria2"
        rclone copy -q --ca-cert "$ca" --transfers 8 --http-url "$tls40/small/" :http: "$work/out/tls-noop-rclone"
        "$mirror" sync -q --no-fsync "$work/cfg/tls-noop.yaml"
    } >/dev/null 2>&1 || true
    for tool in curl wget2 wget2-30 aria2 rclone mirror; do
        check_copies mn-before "$tool" "$work/out/tls-noop-$tool" "$work/cfg/small.md5"
    done
    for run in $(seq 1 "$link_runs"); do
        fresh tls-curl; lmeasure "m curl" "$tls_log" curl -s --cacert "$ca" --parallel --parallel-max 8 -K "$work/cfg/tls-curl"
        fresh tls-wget2; lmeasure "m wget2" "$tls_log" "${wget2_tls[@]}" -P "$work/out/tls-wget2" -i "$work/cfg/tls-urls"
        fresh tls-wget2-30; lmeasure "m wget2(30-streams)" "$tls_log" "${wget2_tls_30[@]}" -P "$work/out/tls-wget2-30" -i "$work/cfg/tls-urls"
        fresh tls-aria2; lmeasure "m aria2" "$tls_log" aria2c -q --ca-certificate="$ca" -j 8 --file-allocation=none -d "$work/out/tls-aria2" -i "$work/cfg/tls-aria2"
        fresh tls-rclone; lmeasure "m rclone" "$tls_log" rclone copy -q --ca-cert "$ca" --transfers 8 --http-url "$tls40/link/" :http: "$work/out/tls-rclone"
        fresh tls-mirror; lmeasure "m mirror" "$tls_log" "$mirror" sync -q "$work/cfg/tls.yaml"
        for tool in curl wget2 wget2-30 aria2 rclone mirror; do
            check_copies m "$tool" "$work/out/tls-$tool" "$sums"
        done
        lmeasure "mn curl" "$tls_log" curl -s --cacert "$ca" --parallel --parallel-max 8 -K "$work/cfg/tls-noop-curl-continue"
        lmeasure "mn wget2" "$tls_log" "${wget2_tls[@]}" -N -P "$work/out/tls-noop-wget2" -i "$work/cfg/tls-noop-urls"
        lmeasure "mn wget2(30-streams)" "$tls_log" "${wget2_tls_30[@]}" -N -P "$work/out/tls-noop-wget2-30" -i "$work/cfg/tls-noop-urls"
        # aria2 fetches every file again here (its copy's date is the time it wrote it, never
        # the server's Last-Modified, and nginx answers 304 only to an exact match), over
        # HTTP/1.1: about 45 s a run, 4 times the others. Once is enough to place it.
        [ "$run" -gt 1 ] || lmeasure "mn aria2" "$tls_log" aria2c -q --ca-certificate="$ca" -j 8 --conditional-get=true --allow-overwrite=true --file-allocation=none -d "$work/out/tls-noop-aria2" -i "$work/cfg/tls-noop-aria2"
        lmeasure "mn rclone" "$tls_log" rclone copy -q --ca-cert "$ca" --transfers 8 --http-url "$tls40/small/" :http: "$work/out/tls-noop-rclone"
        lmeasure "mn mirror" "$tls_log" "$mirror" sync -q "$work/cfg/tls-noop.yaml"
    done
    echo "links section, load at its end (1, 5, 15 min):$(uptime | sed "s/.*load average://")" >> "$work/links-notes"
    echo "links section: $((SECONDS - links_started)) s" >> "$work/links-notes"
fi

if wants scale; then
    section_started=$SECONDS
    echo "(s) a manifest of ${scale_count} entries: plan --shard 0/16, verify" >&2
    mkdir -p "$work/site-scale" "$work/out/scale"
    : > "$work/site-scale/blob"
    ANY_PATH=blob "$here/scripts/serve.sh" "$work/site-scale" "$work/run-scale"
    python3 "$here/Benchmarks/manifest-gen.py" "$work/cfg/scale.yaml" --count "$scale_count" \
        --url "http://127.0.0.1:$(cat "$work/run-scale/port")/f" --root "$work/out/scale"
    echo "s-bytes manifest $(stat -c %s "$work/cfg/scale.yaml")" >> "$results"
    before=$(wc -l < "$work/run-scale/access.log")
    measure "s16 mirror" "$mirror" plan -q --shard 0/16 "$work/cfg/scale.yaml"
    echo "s16-requests mirror $(( $(wc -l < "$work/run-scale/access.log") - before ))" >> "$results"
    ALLOW_STATUS=1 measure "sv mirror" "$mirror" verify -q "$work/cfg/scale.yaml"
    kill "$(cat "$work/run-scale/nginx.pid")" 2>/dev/null || true
    rm -f "$work/cfg/scale.yaml" "$work/run-scale/access.log"
    echo "scale: $((SECONDS - section_started)) s" >&2
fi

python3 - "$results" "$small_count" "$noop_count" "$plan_count" "$huge_plan_count" "$((SECONDS - started))" \
    "$link_count" "$((link_big_mib * 1024 * 1024))" "$link_cap" "$work/links-notes" "$scale_count" <<'PY'
import os, statistics, sys
small_count, noop_count, plan_count, huge_plan_count, elapsed, link_count, link_big, link_cap = map(int, sys.argv[2:10])
notes = sys.argv[10]
scale_count = int(sys.argv[11])
rows = {}
extra = {}
failed = {}
logged = {}
wrong = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if parts[0].endswith("-failed"):
        work, tool, status = parts[0][:-len("-failed")], parts[1], parts[2]
        failed.setdefault((work, tool), []).append(f"exit {status}: {' '.join(parts[3:])}")
        continue
    if parts[0].endswith("-bytes") or parts[0].endswith("-requests") or parts[0].endswith("-calls"):
        extra.setdefault((parts[0], parts[1]), []).append(int(parts[2]))
        continue
    if parts[0].endswith("-log"):
        logged.setdefault((parts[0][:-len("-log")], parts[1]), []).append(
            (int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]), parts[6], parts[7]))
        continue
    if parts[0].endswith("-wrong"):
        wrong.setdefault((parts[0][:-len("-wrong")], parts[1]), []).append(int(parts[2]))
        continue
    if len(parts) < 4:
        continue
    work, tool, seconds, rss = parts[0], parts[1], float(parts[2]), int(parts[3])
    rows.setdefault(work, {}).setdefault(tool, []).append((seconds, rss))
titles = {"a": "(a) one large file", "b": "(b) many small files, 8 at a time", "c": "(c) no-op re-sync of (b)",
          "d": "(d) resume (a) from its half", "e": f"(e) mirror plan of {plan_count:,} entries",
          "f": f"(f) mirror plan of {huge_plan_count:,} entries", "g": f"(g) no-op re-sync of {noop_count:,} files",
          "v": f"(v) mirror verify of {huge_plan_count:,} present files (issue 20's target: 10 s)",
          "s16": f"(s) mirror plan --shard 0/16 of a {scale_count:,}-entry manifest (issue 20's target: peak under 512 MiB)",
          "sv": f"(s) mirror verify, unsharded, of the {scale_count:,}-entry manifest, no file on disk (issue 20's target: peak under 2 GiB)",
          "h": f"(h) {link_count} new files of 16 KiB, RTT 40 ms, 8 at a time",
          "i": f"(i) the {link_count} files changed on the server, re-synced, RTT 40 ms",
          "j": f"(j) no-op re-check of the {link_count} files, RTT 40 ms",
          "k": f"(k) one {link_big / 2**20:.0f} MiB file, {link_cap / 1e6:g} MB/s per connection, RTT 40 ms",
          "l": f"(l) one {link_big / 2**20:.0f} MiB file, uncapped, RTT 80 ms",
          "m": f"(m) HTTPS + HTTP/2, RTT 40 ms: {link_count} new files",
          "mn": f"(m) HTTPS + HTTP/2, RTT 40 ms: no-op re-check of {small_count:,} files",
          "n": "(n) the large file of (a), pinned: placed from a blob cache beside its download",
          "o": f"(o) (b)'s {small_count:,} files, pinned: placed from a blob cache beside their download"}
files = {"h": link_count, "i": link_count, "j": link_count, "m": link_count, "mn": small_count}
for work in ["a", "b", "c", "d", "n", "o", "e", "f", "g", "v", "s16", "sv"]:
    if work not in rows:
        continue
    tools = rows[work]
    medians = {t: statistics.median(s for s, _ in v) for t, v in tools.items()}
    peaks = {t: max(r for _, r in v) for t, v in tools.items()}
    floors = ("network-floor", "libcurl-multi-C")
    peers = [t for t in medians if not t.startswith("mirror") and t not in floors and not t.startswith("durable-C")]
    best = min(peers, key=medians.get) if peers else None
    print(f"\n### {titles[work]}\n")
    print("| tool | median wall (s) | peak RSS (MiB) | ÷ best peer |")
    print("|---|---:|---:|---:|")
    for t in sorted(medians, key=medians.get):
        ratio = f"{medians[t] / medians[best]:.3f}" if best and medians[best] > 0 else "–"
        print(f"| {t} | {medians[t]:.3f} | {peaks[t] / 1024:.1f} | {ratio} |")
    if best:
        print(f"\nbest peer: {best}; runs per tool: {len(tools[best])}")
    durable = [t for t in medians if t.startswith("durable-C(") and t not in ("durable-C(none)", "durable-C(held-none)")]
    if durable and "mirror" in medians:
        reference = min(durable, key=medians.get)
        print(f"\nmirror as shipped ÷ the durable C reference ({reference}, the fastest way it keeps the promise): "
              f"{medians['mirror'] / medians[reference]:.3f}")

def count(value):
    return f"{value:g}" if value == int(value) else f"{value:.1f}"

# The links: beside the time, what nginx logged for the tool's runs (medians; the protocols and
# the requests by method of its last run). "connections" counts those that carried a request,
# "with a body" those that carried a response body; the limit of (k) is the size over that
# many connections at the cap.
for work in ("h", "i", "j", "k", "l", "m", "mn"):
    if work not in rows and not any(w == work for w, _ in failed):
        continue
    tools = rows.get(work, {})
    medians = {t: statistics.median(s for s, _ in v) for t, v in tools.items()}
    peaks = {t: max(r for _, r in v) for t, v in tools.items()}
    # aria2 at 16 connections is beyond the budget of 8 connections: shown, never the best peer.
    peers = [t for t in medians if not t.startswith("mirror") and t != "aria2(x16)"]
    best = min(peers, key=medians.get) if peers else None
    print(f"\n### {titles[work]}\n")
    per_file = work in files
    head = "| tool | runs | median wall (s) | peak RSS (MiB) | ÷ best peer | requests |"
    rule = "|---|---:|---:|---:|---:|---|"
    if per_file:
        head += " per file |"; rule += "---:|"
    head += " connections | with a body | MiB sent | protocol |"; rule += "---:|---:|---:|---|"
    if work == "k":
        head += " limit at its connections (s) |"; rule += "---:|"
    print(head)
    print(rule)
    for t in sorted(medians, key=medians.get):
        ratio = f"{medians[t] / medians[best]:.3f}" if best and medians[best] > 0 else "–"
        logs = logged.get((work, t), [])
        if logs:
            requests = statistics.median(l[0] for l in logs)
            connections = statistics.median(l[1] for l in logs)
            carrying = statistics.median(l[2] for l in logs)
            sent = statistics.median(l[3] for l in logs) / 2**20
            protocol = logs[-1][4]
            methods = "none" if logs[-1][5] == "-" else " + ".join(
                f"{n} {m}" for n, m in (x.split("x", 1) for x in sorted(logs[-1][5].split(","))))
            cells = f" {count(requests)} ({methods}) |"
            if per_file:
                cells += f" {requests / files[work]:.2f} |"
            cells += f" {count(connections)} | {count(carrying)} | {sent:.1f} | {protocol} |"
            if work == "k":
                cells += f" {link_big / (max(carrying, 1) * link_cap):.1f} |"
        else:
            cells = " – |" * (5 + per_file + (work == "k"))
        print(f"| {t} | {len(tools[t])} | {medians[t]:.3f} | {peaks[t] / 1024:.1f} | {ratio} |{cells}")
    if best:
        print(f"\nbest peer: {best}")
    if work == "k":
        print(f"\nthe link's limit for {link_big:,} bytes at {link_cap:,} bytes/s per connection: "
              + ", ".join(f"{n} connection{'s' if n > 1 else ''} {link_big / (n * link_cap):.1f} s" for n in (1, 8, 16)))
    if work == "i" and "mirror" in tools and logged.get(("i", "mirror")):
        mirror_requests = statistics.median(l[0] for l in logged[("i", "mirror")])
        print(f"\nmirror's requests per changed file: {mirror_requests / link_count:.2f}")
for (work, tool), counts in sorted(wrong.items()):
    print(f"\nWRONG ({work}) {tool}: after {len(counts)} run(s), {max(counts)} file(s) not the server's")

for (key, tool), values in sorted(extra.items()):
    print(f"\n{key} {tool}: {values}")
for (work, tool), errors in sorted(failed.items()):
    print(f"\nFAILED ({work}) {tool}, {len(errors)} run(s), not timed: {errors[0]}")

def median(work, tool):
    runs = rows.get(work, {}).get(tool)
    return statistics.median(s for s, _ in runs) if runs else None

# Flat per-entry cost: (g) has ten times the entries of (c); the same tool should take about
# the same time per entry in both.
if "c" in rows and "g" in rows:
    print(f"\n### no-op cost per entry: (c) {small_count:,} beside (g) {noop_count:,} files\n")
    print("| tool | (c) µs/entry | (g) µs/entry | (g) ÷ (c) |")
    print("|---|---:|---:|---:|")
    for tool in sorted(set(rows["c"]) & set(rows["g"]), key=lambda t: median("g", t)):
        c = median("c", tool) / small_count * 1e6
        g = median("g", tool) / noop_count * 1e6
        print(f"| {tool} | {c:.1f} | {g:.1f} | {g / c:.2f} |")
# Memory per entry of the plan: what (f) holds beyond (e), per extra entry.
if "e" in rows and "f" in rows and "mirror" in rows["f"]:
    e_rss = max(r for _, r in rows["e"]["mirror"]) * 1024
    f_rss = max(r for _, r in rows["f"]["mirror"]) * 1024
    print(f"\nplan memory: {e_rss / plan_count:.0f} B/entry at {plan_count:,} entries, "
          f"{f_rss / huge_plan_count:.0f} B/entry at {huge_plan_count:,}; "
          f"{(f_rss - e_rss) / (huge_plan_count - plan_count):.0f} B per added entry")
    print(f"plan time: {median('e', 'mirror') / plan_count * 1e6:.1f} µs/entry at {plan_count:,}, "
          f"{median('f', 'mirror') / huge_plan_count * 1e6:.1f} µs/entry at {huge_plan_count:,}")
if os.path.exists(notes):
    print()
    for line in open(notes):
        print(line.rstrip())
print(f"\nwhole benchmark: {elapsed} s ({elapsed // 60} min {elapsed % 60} s)")
PY
