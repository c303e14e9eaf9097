// Package routing is what the table-shaped sinks share to send each event
// of one connector to one of several destinations (PostgreSQL tables,
// Parquet path prefixes): a list of routes, each with an optional
// condition, tried in order, the first whose condition holds taking the
// event ([Selector]). A destination may also be a template of package
// expr whose placeholders take values of the event, such as
// `events_{$.type}`; each sink says what a rendered name may hold.
//
// A route without a condition is the default: it takes every event that no
// earlier route took, so routes after it are never reached. An event that
// no route takes is an error of that event ([ErrNoRoute]), which the sinks
// report so that it is dead-lettered with that reason: never dropped, never
// written to a guessed destination.
//
// Conditions are the expression language of package expr.
package routing
