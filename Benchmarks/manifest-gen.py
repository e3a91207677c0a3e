#!/usr/bin/env python3
"""Writes a manifest of COUNT entries (10,000,000 by default) for the scaling benchmarks.

    Benchmarks/manifest-gen.py OUT --url http://127.0.0.1:PORT/f --root ROOT [--count N]
                               [--per-dir N] [--pinned]

Entry i fetches URL + i (seven digits) into dest DDDD/IIIIIII, where DDDD is i // per-dir:
files are spread over directories as a real tree is (10,000 a directory by default), and
every dest is distinct, so the manifest loads without conflicts. --pinned adds `size: 0` and
the SHA-256 of the empty file to every entry, the way `mirror lock` pins a tree of empty
files (the shape of a locked manifest). Lines are short: 10,000,000 entries take about 600
MB unpinned. Written in blocks, not line by line: 10,000,000 entries take about 15 s.
"""
import argparse
import sys

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the manifest to write ('-' for standard output)")
    parser.add_argument("--url", required=True, help="prefix of every url; the entry's number follows")
    parser.add_argument("--root", required=True, help="the manifest's root")
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--per-dir", type=int, default=10_000)
    parser.add_argument("--pinned", action="store_true")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if args.count < 1 or args.per_dir < 1:
        parser.error("--count and --per-dir must be at least 1")

    out = sys.stdout if args.out == "-" else open(args.out, "w")
    out.write(f"version: 1\nroot: {args.root}\nconcurrency: {args.concurrency}\nfiles:\n")
    pin = f"    size: 0\n    sha256: {EMPTY_SHA256}\n" if args.pinned else ""
    block = []
    for i in range(args.count):
        block.append(f"  - url: {args.url}{i:07d}\n    dest: {i // args.per_dir:04d}/{i:07d}\n{pin}")
        if len(block) == 65536:
            out.write("".join(block))
            block.clear()
    out.write("".join(block))
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
