#!/usr/bin/env bash
# mirror beside curl, wget2, aria2 and rclone on the same loopback nginx, same data, same run.
#   Benchmarks/bench.sh PATH-TO-MIRROR           (make bench builds it and calls this)
# Workloads: (a) one 1 GiB file, (b) 2000 x 16 KiB at 8 at a time, (c) a no-op re-sync of (b),
# (d) resuming (a) from its half, (e) `mirror plan` of a 100,000-entry manifest, (f) `mirror plan`
# of a 1,000,000-entry manifest, (g) a no-op re-sync of 20,000 x 16 KiB (aria2 only once).
# Each command runs RUNS times (default 5; (f) F_RUNS times, default 1: one run takes about a
# minute), tools interleaved; prints per workload each tool's median wall time, its peak RSS and
# mirror's ratio to the best peer, as Markdown, then the per-entry cost of (c) beside (g), and
# how long the whole run took. (c) and (g) also time the same HEAD requests made over libcurl's
# multi interface from C (Benchmarks/multi-head.c), the floor of a no-op. mirror runs as shipped (fsync on) and, where writes are made
# durable ((a), (b), (d)), also with --no-fsync, which is what the peers do.
set -euo pipefail
mirror=$(realpath "${1:?usage: bench.sh PATH-TO-MIRROR}")
runs=${RUNS:-5}
big_mib=${BIG_MIB:-1024}
small_count=${SMALL_COUNT:-2000}
plan_count=${PLAN_COUNT:-100000}
huge_plan_count=${HUGE_PLAN_COUNT:-1000000}
f_runs=${F_RUNS:-1}
noop_count=${NOOP_COUNT:-20000}
started=$SECONDS
here=$(cd "$(dirname "$0")/.." && pwd)

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v wget2 >/dev/null 2>&1 || missing+=(wget2)
command -v aria2c >/dev/null 2>&1 || missing+=(aria2)
command -v rclone >/dev/null 2>&1 || missing+=(rclone)
[ -x /usr/bin/time ] || missing+=(time)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing from Debian's packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi

work=${BENCH_DIR:-$(mktemp -d /var/tmp/mirror-bench.XXXXXX)}
cleanup() {
    [ -s "$work/run/nginx.pid" ] && kill "$(cat "$work/run/nginx.pid")" 2>/dev/null || true
    rm -rf "$work/trash"
    [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/site/small" "$work/site/noop" "$work/site/many" "$work/out" "$work/cfg"

echo "making the data in $work" >&2
[ -s "$work/site/big.bin" ] || head -c $((big_mib * 1024 * 1024)) /dev/urandom > "$work/site/big.bin"
if [ "$(ls "$work/site/small" | wc -l)" -ne "$small_count" ]; then
    head -c $((small_count * 16384)) /dev/urandom | split -b 16384 -d -a 5 - "$work/site/small/f"
fi
if [ "$(ls "$work/site/noop" | wc -l)" -ne "$noop_count" ]; then
    head -c $((noop_count * 16384)) /dev/urandom | split -b 16384 -d -a 6 - "$work/site/noop/g"
fi
if [ "$(ls "$work/site/many" | wc -l)" -ne "$plan_count" ]; then
    (cd "$work/site/many" && seq -f "m%06g" 1 "$plan_count" | xargs touch)
fi

AUTOINDEX=on "$here/scripts/serve.sh" "$work/site" "$work/run"
base="http://127.0.0.1:$(cat "$work/run/port")"
log="$work/run/access.log"

# Inputs for each tool.
ls "$work/site/small" > "$work/cfg/names"
sed "s|^|$base/small/|" "$work/cfg/names" > "$work/cfg/urls"
awk -v b="$base/small/" -v o="$work/out/small/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\""}' "$work/cfg/names" > "$work/cfg/curl"
awk -v b="$base/small/" -v o="$work/out/small/" '{print "url = \"" b $0 "\"\noutput = \"" o $0 "\"\ncontinue-at = -"}' "$work/cfg/names" > "$work/cfg/curl-continue"
awk -v b="$base/small/" '{print b $0 "\n  out=" $0}' "$work/cfg/names" > "$work/cfg/aria2"
manifest() { # name root concurrency url-list-file [dest-prefix]
    { echo "version: 1"; echo "root: $2"; echo "concurrency: $3"; echo "files:"
      sed "s|^|  - url: |" "$4"; } > "$work/cfg/$1.yaml"
}
echo "$base/big.bin" > "$work/cfg/big-url"
manifest big "$work/out/big" 1 "$work/cfg/big-url"
manifest small "$work/out/small" 8 "$work/cfg/urls"
seq -f "$base/many/m%06g" 1 "$plan_count" > "$work/cfg/many-urls"
manifest many "$work/out/many" 16 "$work/cfg/many-urls"
# (f) needs no more data on the server: its million entries name the same 100,000 (empty) files
# of (e) ten times over, each time under another dest, so that every entry is planned (a HEAD
# each) and none collides with another; the manifest itself is about 70 MiB.
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

# measure LABEL CMD...: appends "label seconds rss_kib" to $results, or, when the command
# fails, "label-failed status first-line-of-its-errors": a failed run is reported, not timed.
results="$work/results"
: > "$results"
measure() {
    local label=$1 status=0; shift
    /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || status=$?
    if [ "$status" -eq 0 ]; then
        echo "$label $(tail -n 1 "$work/time.txt")" >> "$results"
    else
        echo "${label/ /-failed } $status $(grep -v '^Command exited' "$work/stderr.txt" | head -n 1 | cut -c 1-300)" >> "$results"
    fi
}
# Many small files are moved aside, not deleted, until the end: ext4 skips inodes freed in the
# last minutes when it allocates new ones, so deleting 2000 files just before the next tool
# creates 2000 makes that tool pay seconds of inode search (measured: 1-3 s instead of 0.25 s).
# A single large file is simply deleted. The sets moved aside (runs x tools x 32 MiB at the
# defaults, about 1 GiB) are deleted when the benchmark ends.
fresh() {
    if [ "$1" = big ]; then
        rm -rf "$work/out/$1"
    elif [ -e "$work/out/$1" ]; then
        mkdir -p "$work/trash"
        mv "$work/out/$1" "$(mktemp -d "$work/trash/$1.XXXXXX")/"
    fi
    mkdir -p "$work/out/$1"
}
requests_since() { echo $(( $(wc -l < "$log") - $1 )); }

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

python3 - "$results" "$small_count" "$noop_count" "$plan_count" "$huge_plan_count" "$((SECONDS - started))" <<'PY'
import statistics, sys
small_count, noop_count, plan_count, huge_plan_count, elapsed = map(int, sys.argv[2:7])
rows = {}
extra = {}
failed = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if parts[0].endswith("-failed"):
        work, tool, status = parts[0][:-len("-failed")], parts[1], parts[2]
        failed.setdefault((work, tool), []).append(f"exit {status}: {' '.join(parts[3:])}")
        continue
    if parts[0].endswith("-bytes") or parts[0].endswith("-requests"):
        extra.setdefault((parts[0], parts[1]), []).append(int(parts[2]))
        continue
    if len(parts) < 4:
        continue
    work, tool, seconds, rss = parts[0], parts[1], float(parts[2]), int(parts[3])
    rows.setdefault(work, {}).setdefault(tool, []).append((seconds, rss))
titles = {"a": "(a) one large file", "b": "(b) many small files, 8 at a time", "c": "(c) no-op re-sync of (b)",
          "d": "(d) resume (a) from its half", "e": f"(e) mirror plan of {plan_count:,} entries",
          "f": f"(f) mirror plan of {huge_plan_count:,} entries", "g": f"(g) no-op re-sync of {noop_count:,} files"}
for work in "abcdefg":
    if work not in rows:
        continue
    tools = rows[work]
    medians = {t: statistics.median(s for s, _ in v) for t, v in tools.items()}
    peaks = {t: max(r for _, r in v) for t, v in tools.items()}
    floors = ("network-floor", "libcurl-multi-C")
    peers = [t for t in medians if not t.startswith("mirror") and t not in floors]
    best = min(peers, key=medians.get) if peers else None
    print(f"\n### {titles[work]}\n")
    print("| tool | median wall (s) | peak RSS (MiB) | ÷ best peer |")
    print("|---|---:|---:|---:|")
    for t in sorted(medians, key=medians.get):
        ratio = f"{medians[t] / medians[best]:.2f}" if best and medians[best] > 0 else "–"
        print(f"| {t} | {medians[t]:.3f} | {peaks[t] / 1024:.1f} | {ratio} |")
    if best:
        print(f"\nbest peer: {best}; runs per tool: {len(tools[best])}")
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
print(f"\nwhole benchmark: {elapsed} s ({elapsed // 60} min {elapsed % 60} s)")
PY
