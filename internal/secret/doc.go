// Package secret holds the string type ehsink uses for connection strings,
// keys and passwords, so that they print as *** in logs, errors and
// `ehsink validate --print`.
package secret
