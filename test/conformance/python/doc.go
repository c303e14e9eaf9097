// Package python runs the Python conformance suite in this directory: the
// azure-eventhub 5.11 SDK from Debian's python3-azure package (its
// pure-Python AMQP stack, on /usr/bin/python3) and its Blob checkpoint
// store against the emulator's AMQPS listener and Azurite. The scenarios
// are ordinary `python3 -m unittest` modules (test_*.py); python_test.go
// starts the services and runs each module as a subtest. Install the
// package with `make tools` (test/scripts/install-python.sh).
package python
