#!/usr/bin/env bash
# The demo behind `make demo`: a sample folder served by nginx on loopback, synced with
# progress, synced again (nothing to do), then a file cut in half and resumed.
set -euo pipefail
mirror=${1:?usage: demo.sh PATH-TO-MIRROR}
work=$(mktemp -d /tmp/mirror-demo.XXXXXX)
cleanup() {
    [ -s "$work/run/nginx.pid" ] && kill "$(cat "$work/run/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

mkdir -p "$work/site/data" "$work/site/docs"
head -c $((48 * 1024 * 1024)) /dev/urandom > "$work/site/data/big.bin"
head -c $((16 * 1024 * 1024)) /dev/urandom > "$work/site/data/medium.bin"
for i in 1 2 3 4 5 6; do head -c $((i * 300 * 1024)) /dev/urandom > "$work/site/docs/part-$i.dat"; done
echo "hello from the mirror demo" > "$work/site/docs/readme.txt"

# 40 MiB/s per response, so the progress display has something to show on loopback.
scripts/serve.sh "$work/site" "$work/run" 40m
base="http://127.0.0.1:$(cat "$work/run/port")"

{
    echo "version: 1"
    echo "root: ./assets"
    echo "concurrency: 4"
    echo "files:"
    for path in data/big.bin data/medium.bin docs/readme.txt docs/part-{1..6}.dat; do
        echo "  - url: $base/$path"
        echo "    dest: $path"
    done
} > "$work/manifest.yaml"

step "The manifest"
cat "$work/manifest.yaml"

step "mirror plan: nothing is on disk yet"
"$mirror" plan "$work/manifest.yaml"

step "mirror sync: download everything"
"$mirror" sync "$work/manifest.yaml"

step "mirror sync again: nothing to do"
"$mirror" sync "$work/manifest.yaml"

step "Cut data/big.bin to half its size, as an interrupted download would leave it"
truncate -s $((24 * 1024 * 1024)) "$work/assets/data/big.bin"
"$mirror" plan "$work/manifest.yaml"

step "mirror sync: resume from the half"
"$mirror" sync "$work/manifest.yaml"
grep '^GET /data/big.bin' "$work/run/access.log" | tail -n 1 | sed 's/^/nginx logged: /'
echo "(the range starts 64 KiB before the cut: nothing records where the shortened file came from,"
echo " so mirror fetches those bytes again and compares them with the local ones before appending)"

step "Every file is byte-identical to the server's"
(cd "$work/site" && find . -type f | sort | xargs sha256sum) > "$work/site.sums"
(cd "$work/assets" && sha256sum -c --quiet "$work/site.sums") && echo "all $(wc -l < "$work/site.sums") files match"
