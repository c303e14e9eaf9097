// Package dedupe collapses repeated keys inside a batch, for sinks that
// upsert: only the newest value of a key matters, and some destinations
// refuse to touch one row twice in one statement. (Dropping what a sink
// already holds is [github.com/ehsink/ehsink/sinks.After], part of the sink contract.)
package dedupe
