#!/usr/bin/env bash
# install-python.sh installs the Python Event Hubs SDK the conformance suite
# in test/conformance/python drives: Debian's python3-azure package, which holds
# azure-eventhub 5.11 (its pure-Python AMQP stack) and
# azure-eventhub-checkpointstoreblob 1.2 with azure-storage-blob, for the
# system interpreter /usr/bin/python3 (not a pyenv or venv python). It is
# idempotent: when /usr/bin/python3 already imports both packages it does
# nothing, and it runs apt-get update only when apt does not know the package.
set -euo pipefail

python=/usr/bin/python3
check='import azure.eventhub, azure.eventhub.extensions.checkpointstoreblob'

if [[ -x "$python" ]] && "$python" -c "$check" >/dev/null 2>&1; then
	echo "install-python: azure-eventhub $("$python" -c 'import azure.eventhub as e; print(e.__version__)') already installed for $python"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-python: apt-get not found; install Debian's python3-azure (azure-eventhub 5.11 and azure-eventhub-checkpointstoreblob) by hand" >&2
	exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
	sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show python3-azure >/dev/null 2>&1; then
	"${sudo[@]}" apt-get update -q
fi
"${sudo[@]}" apt-get install -y -q --no-install-recommends python3 python3-azure

if ! "$python" -c "$check"; then
	echo "install-python: python3-azure installed but $python cannot import azure.eventhub and its blob checkpoint store" >&2
	exit 1
fi
echo "install-python: installed azure-eventhub $("$python" -c 'import azure.eventhub as e; print(e.__version__)') for $python"
