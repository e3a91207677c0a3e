#!/usr/bin/env bash
# Checks the user documentation against the built binary:
#   - both man pages format without groff warnings;
#   - every option `mirror plan --help` and `mirror sync --help` list appears in mirror(1),
#     and every exit status `mirror --help` lists appears in mirror(1) and the README.
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

# Options as the man page spells them: "-" is written "\-" in roff.
man_text=$(sed 's/\\-/-/g' man/mirror.1)
for command in plan sync; do
    for option in $("$mirror" "$command" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        grep -qF -- "$option" <<<"$man_text" || fail "mirror.1 does not mention $command's $option"
    done
done

for code in $("$mirror" --help | sed -n '/^EXIT STATUS/,/^USAGE/p' | grep -oE '^ +[0-9]+' | tr -d ' '); do
    grep -qE "^\.B $code\$|\\b$code\\b" man/mirror.1 || fail "mirror.1 does not list exit status $code"
    grep -qE "^\| $code " README.md || grep -qE "^\| [0-9 /]*\b$code\b" README.md || fail "README.md does not list exit status $code"
done

[ "$failed" -eq 0 ] && echo "check-docs: ok"
exit "$failed"
