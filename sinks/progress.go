package sinks

import "context"

// progressKey is the context key of WithProgress.
type progressKey struct{}

// WithProgress returns a copy of ctx whose sink call reports the progress
// of its destination to fn (see [Progress]). The runner sets it on every
// sink call it bounds with errors.sink_timeout; a sink's tests may set it
// to see what their connections report. fn must be safe for concurrent use
// and cheap: it may be called for every read of a connection.
func WithProgress(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// Progress returns the function a sink calls whenever the destination of
// the call that ctx bounds moves bytes (a connection read an answer, or
// took a request), or nil when nobody listens. The runner's
// errors.sink_timeout measures the silence since the last such report,
// not the call's whole duration: a destination that answers slowly (a
// database in another region, several round trips per commit) is alive,
// one that does not answer for sink_timeout is not. A sink that does not
// report is bounded by sink_timeout from the call's start, as if its
// destination never answered.
func Progress(ctx context.Context) func() {
	fn, _ := ctx.Value(progressKey{}).(func())
	return fn
}
