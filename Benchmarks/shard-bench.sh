#!/usr/bin/env bash
# Sharding measured on this machine, for docs/SCALING.md (not run by make test).
#   Benchmarks/shard-bench.sh PATH-TO-MIRROR
# (A) throughput: FILES files of SIZE_KIB KiB from one loopback nginx (scripts/serve.sh, one
#     worker), synced into one root by one unsharded process (-j 16), then by 16 shard processes
#     at once (--shard K/16, -j 1 each: the same 16 requests in flight), then by 16 shards with
#     -j 4 each (64 in flight); ROUNDS times (default 3), interleaved. Each into a fresh root. Prints wall time, files/s, MiB/s, the CPU
#     time of all processes together, the largest peak RSS of one process, and the requests
#     nginx logged per file.
# (B) memory: `mirror verify` (offline: no request) of manifests of 100,000 and 1,000,000
#     entries (COUNTS="100000 1000000"), unsharded and as shard 0/16, and `mirror plan --shard 0/16` of the 1,000,000
#     (a HEAD for each of its ~62,500 entries), with each one's peak RSS; then the bytes per
#     entry those give.
set -euo pipefail
mirror=$(realpath "${1:?usage: shard-bench.sh PATH-TO-MIRROR}")
files=${FILES:-4096}
size_kib=${SIZE_KIB:-64}
shards=${SHARDS:-16}
read -r small_count large_count <<<"${COUNTS:-100000 1000000}"
here=$(cd "$(dirname "$0")/.." && pwd)
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install -y time" >&2; exit 1; }

work=${BENCH_DIR:-$(mktemp -d /var/tmp/mirror-shard-bench.XXXXXX)}
cleanup() {
    [ -s "$work/run/nginx.pid" ] && kill "$(cat "$work/run/nginx.pid")" 2>/dev/null || true
    [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/site/data" "$work/cfg"
if [ "$(ls "$work/site/data" | wc -l)" -ne "$files" ]; then
    head -c $((files * size_kib * 1024)) /dev/urandom | split -b $((size_kib * 1024)) -d -a 7 - "$work/site/data/f"
fi
"$here/scripts/serve.sh" "$work/site" "$work/run" >/dev/null
base="http://127.0.0.1:$(cat "$work/run/port")"
log="$work/run/access.log"

manifest() { # file root count url-prefix dest-prefix
    python3 - "$@" <<'PY'
import sys
path, root, count, url, dest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
with open(path, "w") as out:
    out.write(f"version: 1\nroot: {root}\nconcurrency: 16\nfiles:\n")
    for i in range(count):
        # Short lines, as Benchmarks/manifest-gen.py writes them.
        out.write(f"  - url: {url}{i:07d}\n    dest: {dest}{i // 10000:03d}/{i:07d}\n")
PY
}
manifest "$work/cfg/a.yaml" "$work/out" "$files" "$base/data/f" ""

# run LABEL N J: N processes at once (shards K/N, or one unsharded when N is 1), -j J each,
# into a fresh root; prints one Markdown row.
run() {
    local label=$1 n=$2 j=$3 pids=() started ended
    rm -rf "$work/out"; : > "$log"; sync
    started=$(date +%s.%N)
    for k in $(seq 0 $((n - 1))); do
        local shard=(); [ "$n" -gt 1 ] && shard=(--shard "$k/$n")
        /usr/bin/time -f "%U %S %M" -o "$work/time.$k" "$mirror" sync "$work/cfg/a.yaml" -j "$j" --quiet "${shard[@]}" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    ended=$(date +%s.%N)
    python3 - "$label" "$n" "$j" "$started" "$ended" "$files" "$size_kib" "$log" "$work" <<'PY'
import sys, collections
label, n, j, started, ended, files, size_kib, log, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), sys.argv[8], sys.argv[9]
wall = ended - started
cpu, rss = 0.0, 0
for k in range(n):
    user, system, peak = open(f"{work}/time.{k}").read().splitlines()[-1].split()
    cpu += float(user) + float(system); rss = max(rss, int(peak))
methods = collections.Counter(line.split()[0] for line in open(log))
gets = collections.Counter(line.split()[1] for line in open(log) if line.startswith("GET"))
once = all(count == 1 for count in gets.values()) and len(gets) == files
print(f"| {label} | {n} | {n * j} | {wall:.2f} | {files / wall:.0f} | {files * size_kib / 1024 / wall:.0f} | {cpu:.2f} | {rss / 1024:.0f} | "
      f"{methods['HEAD'] / files:.2f} HEAD + {methods['GET'] / files:.2f} GET{'' if once else ' (NOT each once)'} |")
PY
}

echo "## (A) $files files of $size_kib KiB, one nginx worker, $(nproc) cores"
echo
echo "| run | processes | in flight | wall (s) | files/s | MiB/s | CPU, all processes (s) | peak RSS of one (MiB) | requests per file |"
echo "|---|---|---|---|---|---|---|---|---|"
# Interleaved, ROUNDS times: the machine may be shared, and the spread shows it.
for round in $(seq 1 "${ROUNDS:-3}"); do
    run "unsharded, -j 16" 1 16
    run "$shards shards, -j 1 each" "$shards" 1
    run "$shards shards, -j 4 each" "$shards" 4
done

echo
echo "## (B) memory"
echo
echo "| command | entries in manifest | entries worked on | peak RSS (MiB) | wall (s) |"
echo "|---|---|---|---|---|"
measure() { # label entries-total entries-worked cmd...
    local label=$1 total=$2 worked=$3; shift 3
    /usr/bin/time -f "%M %e" -o "$work/mem.txt" "$@" >/dev/null 2>&1 || true
    read -r kib seconds < <(tail -1 "$work/mem.txt")
    echo "| $label | $total | $worked | $((kib / 1024)) | $seconds |"
    echo "$total $worked $kib" >> "$work/mem.points"
}
: > "$work/mem.points"
for count in "$small_count" "$large_count"; do
    manifest "$work/cfg/m$count.yaml" "$work/empty" "$count" "$base/f" ""
    measure "verify (unsharded)" "$count" "$count" "$mirror" verify "$work/cfg/m$count.yaml" --quiet
    measure "verify --shard 0/$shards" "$count" "$((count / shards))" "$mirror" verify "$work/cfg/m$count.yaml" --quiet --shard "0/$shards"
done
measure "plan --shard 0/$shards" "$large_count" $((large_count / shards)) "$mirror" plan "$work/cfg/m$large_count.yaml" --quiet --shard "0/$shards"
python3 - "$work/mem.points" <<'PY'
import sys
points = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
(t1, w1, r1), (t1s, w1s, r1s), (t2, w2, r2), (t2s, w2s, r2s) = points[:4]
per_entry = (r2 - r1) * 1024 / (t2 - t1)
per_entry_sharded = (r2s - r1s) * 1024 / (t2s - t1s)
print(f"\nverify, unsharded: {per_entry:.0f} B per added entry; as one shard: {per_entry_sharded:.0f} B per added manifest entry")
print(f"extrapolated to 10,000,000 entries: unsharded {(r2 * 1024 + per_entry * (10_000_000 - t2)) / 2**30:.1f} GiB, "
      f"one shard {(r2s * 1024 + per_entry_sharded * (10_000_000 - t2s)) / 2**30:.1f} GiB")
PY
