// Package testenv starts the external services ehsink's tests use, as real
// processes on free loopback ports: today Azurite, the Azure Storage
// emulator, for Blob checkpoints and Blob output.
//
// A service that is not installed skips the test with the command that
// installs it, except when CI=true, where it fails the test: in CI a missing
// service must never pass silently.
package testenv
