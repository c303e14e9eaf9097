package deadletters

import "context"

// revisionKey is the context key of the configuration revision.
type revisionKey struct{}

// WithRevision returns ctx carrying rev, the configuration revision of the
// connector whose dead letters are stored under ctx (the hash of its
// spec). The runner sets it on the context of a writer's DeadLetter call:
// the sinks' public contract has no field for it, and a sink that does not
// look for it loses nothing else.
func WithRevision(ctx context.Context, rev string) context.Context {
	if rev == "" {
		return ctx
	}
	return context.WithValue(ctx, revisionKey{}, rev)
}

// Revision returns the configuration revision ctx carries, or "".
func Revision(ctx context.Context) string {
	rev, _ := ctx.Value(revisionKey{}).(string)
	return rev
}
