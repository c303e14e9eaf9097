// Package e2e_test holds the process-level tests of ehsink: real `ehsink`
// binaries, built once in TestMain, run against the in-process emulator.
package e2e_test
