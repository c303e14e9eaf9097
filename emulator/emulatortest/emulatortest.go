// Package emulatortest starts in-process emulators for the tests of other
// packages.
//
// A test whose emulator closed a connection on a protocol error fails: a
// real client sees that close as a dropped connection (every link of the
// client dies and reconnects), so it is an emulator bug until a test says
// it is what it tests, with [ExpectProtocolErrors].
package emulatortest

import (
	"context"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator"
)

// shutdownTimeout bounds the emulator's shutdown at cleanup.
const shutdownTimeout = 30 * time.Second

type options struct{ expectProtocolErrors bool }

// Option configures [Start].
type Option func(*options)

// ExpectProtocolErrors marks a test that sends illegal frames on purpose.
func ExpectProtocolErrors() Option { return func(o *options) { o.expectProtocolErrors = true } }

// Start starts an emulator with cfg (on a free loopback port unless
// cfg.Addr says otherwise) and shuts it down when the test ends. The test
// fails if the emulator closed a connection on a protocol error, unless
// opts include [ExpectProtocolErrors].
func Start(t testing.TB, cfg emulator.Config, opts ...Option) *emulator.Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("emulator shutdown: %v", err)
		}
		if n, errs := srv.ProtocolErrors(); n > 0 && !o.expectProtocolErrors {
			t.Errorf("the emulator closed %d connection(s) on protocol errors: %q", n, errs)
		}
	})
	return srv
}
