#!/usr/bin/env bash
# install-tools.sh installs the test tools ehsink needs that are not Go
# modules into <repo>/.tools (ignored by git), from npm:
#   - Azurite, the Azure Storage emulator;
#   - the JavaScript Event Hubs SDK, its Blob checkpoint store and the Blob
#     client, which the JavaScript conformance suite (test/conformance/js) drives
#     against the emulator;
#   - the JavaScript Schema Registry client, its Avro serializer and
#     kafkajs' Confluent Schema Registry client, which the conformance suite
#     drives against the emulator's schema registries;
#   - hyparquet (with hyparquet-compressors for zstd) and DuckDB's Node API,
#     independent Parquet readers the Parquet sink's tests run over the
#     files the sink writes (internal/parquettest/check.mjs). hyparquet
#     finds columns by path as Spark and Athena do; DuckDB's
#     parquet_metadata() shows every column chunk's footer.
#   - icebird, an independent Iceberg reader, which the Iceberg sink's tests
#     run over the tables the sink commits (from their metadata.json).
# Every package is pinned. It is idempotent: when every pinned package is
# already installed at its version, nothing is done, so `make tools` is cheap
# to run again.
set -euo pipefail

# Pins. eventhubs-checkpointstore-blob 2.0.0 is the release for event-hubs 6;
# storage-blob 12.28.0 is the newest that supports Node.js 20 (12.29+ asks
# for Node.js 22).
pins=(
	"azurite@3.37.0"
	"@azure/event-hubs@6.0.4"
	"@azure/eventhubs-checkpointstore-blob@2.0.0"
	"@azure/storage-blob@12.28.0"
	"hyparquet@1.33.0"
	"hyparquet-compressors@1.1.2"
	"@duckdb/node-api@1.5.6-r.1"
	"@azure/schema-registry@1.3.0"
	"@azure/schema-registry-avro@1.1.0"
	"@kafkajs/confluent-schema-registry@4.1.0"
	"icebird@0.3.1"
)

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools="$repo_root/.tools"

installed_version() {
	# Reads the version npm recorded in the installed package, without node
	# (grep is enough for one "version" key and keeps the script dependency-free).
	local pkg="$tools/node_modules/$1/package.json"
	[[ -f "$pkg" ]] || return 0
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg" | head -n1
}

# missing prints the pins not installed at their version.
missing() {
	local pin name version
	for pin in "${pins[@]}"; do
		name=${pin%@*}
		version=${pin##*@}
		if [[ "$(installed_version "$name")" != "$version" ]]; then
			echo "$pin"
		fi
	done
}

todo=$(missing)
if [[ -z "$todo" && -x "$tools/node_modules/.bin/azurite" ]]; then
	echo "install-tools: ${pins[*]} already in $tools"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-tools: npm not found; install Node.js 20+ (it provides npm) and run make tools again" >&2
	exit 1
fi

mkdir -p "$tools"
echo "install-tools: installing ${pins[*]} into $tools"
npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "${pins[@]}"

todo=$(missing)
if [[ -n "$todo" ]]; then
	echo "install-tools: after npm install, still not at the pinned version: $todo" >&2
	exit 1
fi
echo "install-tools: ready in $tools: ${pins[*]}"
