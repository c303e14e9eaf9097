#!/usr/bin/env bash
# install-tools.sh installs the test tools ehsink needs that are not Go
# modules into <repo>/.tools (ignored by git). Today that is Azurite, the Azure
# Storage emulator, from npm. It is idempotent: a tool already installed at
# the pinned version is left alone, so `make tools` is cheap to run again.
set -euo pipefail

azurite_version=3.37.0

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$repo_root/.tools"
azurite_bin="$tools/node_modules/.bin/azurite"
azurite_pkg="$tools/node_modules/azurite/package.json"

installed_version() {
	# Reads the version npm recorded in the installed package, without node
	# (grep is enough for one "version" key and keeps the script dependency-free).
	[[ -x "$azurite_bin" && -f "$azurite_pkg" ]] || return 0
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$azurite_pkg" | head -n1
}

if [[ "$(installed_version)" == "$azurite_version" ]]; then
	echo "install-tools: azurite $azurite_version already in $tools"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-tools: npm not found; install Node.js 18+ (it provides npm) and run make tools again" >&2
	exit 1
fi

mkdir -p "$tools"
echo "install-tools: installing azurite@$azurite_version into $tools"
npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "azurite@$azurite_version"

got=$(installed_version)
if [[ "$got" != "$azurite_version" ]]; then
	echo "install-tools: expected azurite $azurite_version in $tools, found '${got:-nothing}'" >&2
	exit 1
fi
echo "install-tools: azurite $got ready: $azurite_bin"
