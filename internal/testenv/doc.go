// Package testenv starts the external services ehsink's tests use, as real
// processes on free loopback ports: Azurite, the Azure Storage emulator, for
// Blob checkpoints and Blob output ([Azurite], [NewAzurite]), and a
// throwaway PostgreSQL server ([Postgres], [NewPostgres]).
//
// Each service has a shared instance per test binary, stopped from TestMain
// after m.Run, and a private one per test for tests that stop it or need it
// empty. A server outlives no test binary, even one that never stops it:
// Azurite is killed with the binary (Pdeathsig), and each PostgreSQL server
// has a reaper process that stops it once the binary is gone. A service that is not installed skips the test with the command
// that installs it, except when CI=true, where it fails the test: in CI a
// missing service must never pass silently.
package testenv
