#!/usr/bin/env bash
# Checks the user documentation against the built binary:
#   - both man pages format without groff warnings;
#   - every subcommand `mirror --help` lists has an entry under COMMANDS in mirror(1) and is
#     named in the README;
#   - every option each subcommand's --help lists appears in mirror(1);
#   - every exit status `mirror --help` lists appears in mirror(1) and the README;
#   - every manifest key the loader accepts (Sources/MirrorCore/Manifest/ManifestSection.swift)
#     is described in mirror-manifest(5) and used in examples/manifest.yaml.
#   scripts/check-docs.sh [PATH-TO-MIRROR]      (default: .build/debug/mirror)
set -euo pipefail
cd "$(dirname "$0")/.."
mirror=${1:-.build/debug/mirror}
[ -x "$mirror" ] || { echo "no binary at $mirror; run swift build first" >&2; exit 1; }
failed=0
fail() { echo "check-docs: $*" >&2; failed=1; }

for page in man/mirror.1 man/mirror-manifest.5; do
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || fail "$page: groff failed"
    [ -z "$warnings" ] || fail "$page: groff warnings:"$'\n'"$warnings"
done

commands=$("$mirror" --help | sed -n '/^SUBCOMMANDS:/,/^$/p' | grep -oE '^  [a-z]+' | tr -d ' ')
[ -n "$commands" ] || fail "mirror --help lists no subcommands"
for command in $commands; do
    grep -qE "^\.BI \"$command \" (manifest|file \.\.\.)\$" man/mirror.1 || fail "mirror.1 has no COMMANDS entry for $command"
    grep -qF "\`mirror $command" README.md || fail "README.md does not mention mirror $command"
done

# Options as the man page spells them: "-" is written "\-" in roff. Each option must be
# described, and be in that command's SYNOPSIS line (from ".B mirror CMD" to ".br"), in its
# long form or, when it has one, its short form.
man_text=$(sed 's/\\-/-/g' man/mirror.1)
for command in $commands; do
    synopsis=$(sed -n "/^\.B mirror $command\$/,/^\.br\$/p" <<<"$man_text")
    [ -n "$synopsis" ] || fail "mirror.1 has no SYNOPSIS line for $command"
    help=$("$mirror" "$command" --help | sed -n '/^OPTIONS:/,$p')
    for option in $(grep -oE -- '--[a-z][a-z-]*' <<<"$help" | sort -u); do
        grep -qF -- "$option" <<<"$man_text" || fail "mirror.1 does not mention $command's $option"
        case $option in --help|--version) continue ;; esac
        short=$(grep -oE -- "^ +-[a-z], $option\b" <<<"$help" | grep -oE -- '-[a-z],' | tr -d ,) || true
        grep -qE -- "(^|[^a-z-])($option|${short:-$option})([^a-z-]|\$)" <<<"$synopsis" ||
            fail "mirror.1 SYNOPSIS of $command lacks $option"
    done
done

for code in $("$mirror" --help | sed -n '/^EXIT STATUS/,/^USAGE/p' | grep -oE '^ +[0-9]+' | tr -d ' '); do
    grep -qE "^\.B $code\$|\\b$code\\b" man/mirror.1 || fail "mirror.1 does not list exit status $code"
    grep -qE "^\| $code " README.md || grep -qE "^\| [0-9 /]*\b$code\b" README.md || fail "README.md does not list exit status $code"
done

keys=$(grep -oE '"[a-z_0-9]+"' Sources/MirrorCore/Manifest/ManifestSection.swift | tr -d '"' | sort -u)
[ -n "$keys" ] || fail "no manifest keys found in ManifestSection.swift"
for key in $keys; do
    grep -qE "^\.(B|BR|TP) .*\b$key\b" man/mirror-manifest.5 || fail "mirror-manifest.5 does not describe the key $key"
    grep -qE "^ *(- )?$key:" examples/manifest.yaml || fail "examples/manifest.yaml does not use the key $key"
done

[ "$failed" -eq 0 ] && echo "check-docs: ok"
exit "$failed"
