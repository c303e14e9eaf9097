// Package deadletters holds what ehsink keeps with a dead letter beyond
// the sinks' public contract: the configuration revision the runner hands
// a sink with the letters it stores.
package deadletters
