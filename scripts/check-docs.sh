#!/usr/bin/env bash
# Checks the user documentation against the built binary:
#   - both man pages format without groff warnings;
#   - every subcommand `mirror --help` lists has an entry under COMMANDS in mirror(1) and is
#     named in the README;
#   - every option each subcommand's --help lists appears in mirror(1);
#   - every exit status `mirror --help` lists appears in mirror(1) and the README;
#   - every manifest key the loader accepts (Sources/MirrorCore/Manifest/ManifestSection.swift)
#     is described in mirror-manifest(5) and used in examples/manifest.yaml;
#   - no paragraph of mirror(1)'s BUGS calls an option, a manifest key or a feature missing,
#     unimplemented or untested when mirror has it;
#   - the README's first screen (60 lines) has the two set-up commands, a manifest, plan and sync
#     on it and a contents list; the list links every ## heading, and every link finds one;
#   - nothing in the repository's documents or sources points at a DESIGN.md other than
#     docs/DESIGN.md, which must exist.
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
    grep -qE "^\.BI \"$command \" (manifest|file \.\.\.|subcommand \.\.\.)\$" man/mirror.1 || fail "mirror.1 has no COMMANDS entry for $command"
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

# BUGS: a paragraph that says something is missing must not name what mirror implements.
# Features without an option name of their own are matched by the words that describe them.
all_options=$(for command in "" $commands; do "$mirror" $command --help; done | grep -oE -- '--[a-z][a-z-]*' | sort -u)
declare -A feature_words=(
    ["bandwidth"]="--rate-limit" ["rate limit"]="--rate-limit" ["HTTP/2"]="--http2-tested"
    ["shard"]="--shard" ["metrics"]="--metrics-file" ["prune"]="--prune" ["JSON"]="--json"
)
bugs=$(sed -n '/^\.SH BUGS/,/^\.SH /p' <<<"$man_text" | sed '1d;$d')
missing_words='not (yet )?(implemented|supported|tested)|unsupported|unimplemented|is missing|only HTTP/1'
while IFS= read -r -d $'\x1e' paragraph; do
    grep -qiE "$missing_words" <<<"$paragraph" || continue
    flat=$(tr '\n' ' ' <<<"$paragraph")
    for option in $(grep -oE -- '--[a-z][a-z-]*' <<<"$flat" | sort -u); do
        grep -qxF -- "$option" <<<"$all_options" && fail "mirror.1 BUGS calls $option missing or untested, but mirror has it: $flat"
    done
    for key in $keys; do
        grep -qE "(^|[^a-z_])$key([^a-z_]|\$)" <<<"$flat" && fail "mirror.1 BUGS calls the manifest key $key missing or untested, but the loader accepts it: $flat"
    done
    for words in "${!feature_words[@]}"; do
        option=${feature_words[$words]}
        # HTTP/2 has no option: it is implemented once a test suite runs transfers over it.
        if [ "$option" = --http2-tested ]; then
            grep -qiF "$words" <<<"$flat" && ls Tests/MirrorCoreTests/Integration/HTTP2Tests.swift >/dev/null 2>&1 &&
                fail "mirror.1 BUGS calls HTTP/2 missing or untested, but Tests/MirrorCoreTests/Integration/HTTP2Tests.swift tests it: $flat"
            continue
        fi
        grep -qiF "$words" <<<"$flat" && grep -qxF -- "$option" <<<"$all_options" &&
            fail "mirror.1 BUGS calls the $words missing or untested, but mirror has $option: $flat"
    done
done < <(awk 'BEGIN { RS = "\\.PP\n" } { printf "%s\x1e", $0 }' <<<"$bugs")

# The README's first screen: the quick start and the contents.
first_screen=$(head -n 60 README.md)
for needed in 'make demo' 'make test' 'version: 1' 'mirror plan' 'mirror sync' '## Contents'; do
    grep -qF -- "$needed" <<<"$first_screen" || fail "README.md: the first 60 lines lack '$needed'"
done
slug() { tr 'A-Z' 'a-z' <<<"$1" | sed -E 's/[^a-z0-9 -]//g; s/ /-/g'; }
anchors=$(grep -E '^#{1,6} ' README.md | sed -E 's/^#+ //' | while IFS= read -r heading; do slug "$heading"; done)
contents=$(sed -n '/^## Contents$/,/^## /p' README.md)
for link in $(grep -oE '\]\(#[^)]+\)' README.md | sed -E 's/^\]\(#//; s/\)$//' | sort -u); do
    grep -qxF -- "$link" <<<"$anchors" || fail "README.md links to #$link, which no heading makes"
done
while IFS= read -r heading; do
    case $heading in Contents|"Quick start") continue ;; esac
    grep -qF -- "(#$(slug "$heading"))" <<<"$contents" || fail "README.md: the contents list lacks the section '$heading'"
done < <(grep -E '^## ' README.md | sed -E 's/^## //')

# The project's design document is its own: docs/DESIGN.md.
[ -f docs/DESIGN.md ] || fail "docs/DESIGN.md is missing"
elsewhere=$(grep -rnE '(^|[^/a-zA-Z])DESIGN\.md' README.md docs man Sources examples scripts Tests Benchmarks Makefile 2>/dev/null |
    grep -vE 'docs/DESIGN\.md|^docs/DESIGN\.md:|^scripts/check-docs\.sh:' || true)
[ -z "$elsewhere" ] || fail "these lines cite a DESIGN.md other than docs/DESIGN.md:"$'\n'"$elsewhere"

[ "$failed" -eq 0 ] && echo "check-docs: ok"
exit "$failed"
