#!/usr/bin/env bash
# Installs kubernetes-validate (PyPI) into a virtual environment of its own, for the test that
# checks examples/kubernetes against the Kubernetes schemas. The package carries the schemas of
# every Kubernetes version it knows, so validating needs no network; installing does.
#
#   scripts/install-kubernetes-validate.sh [DIR]    # default: .build/python-tools
#
# Run by scripts/install-deps.sh (make test); idempotent.
set -euo pipefail

version=1.37.0
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$here/.build/python-tools}
tool=$venv/bin/kubernetes-validate

if [ -x "$tool" ] && [ "$("$tool" --version 2>/dev/null)" = "$version" ]; then
    exit 0
fi
if ! /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "error: python3's venv module is missing; install it with: apt-get install -y python3-venv" >&2
    exit 1
fi
echo "installing kubernetes-validate $version into $venv" >&2
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
