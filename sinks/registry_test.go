package sinks_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/sinks"
)

type nopDriver struct{}

func (nopDriver) NewConfig() any { return new(struct{}) }
func (nopDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return nil, nil
}

func TestRegistry(t *testing.T) {
	var r sinks.Registry
	r.Register("b", nopDriver{})
	r.Register("a", nopDriver{})
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names() = %v", got)
	}
	if _, err := r.Lookup("a"); err != nil {
		t.Fatal(err)
	}
	_, err := r.Lookup("c")
	if err == nil || !strings.Contains(err.Error(), `unknown sink "c"`) || !strings.Contains(err.Error(), "[a b]") {
		t.Fatalf("Lookup(c) = %v, want unknown sink naming the known ones", err)
	}
}

// TestRegistryNil: a nil *Registry reads what sinks.Register filled, and is
// never written through.
func TestRegistryNil(t *testing.T) {
	sinks.Register("registry-test", nopDriver{})
	var global *sinks.Registry
	if _, err := global.Lookup("registry-test"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(global.Names(), "registry-test") {
		t.Fatalf("Names() = %v", global.Names())
	}
	var own sinks.Registry
	if _, err := own.Lookup("registry-test"); err == nil {
		t.Fatal("a registry of its own sees the process-wide one")
	}
	mustPanic(t, "Register on nil", func() { global.Register("x", nopDriver{}) })
}

func TestRegisterMisuse(t *testing.T) {
	var r sinks.Registry
	r.Register("a", nopDriver{})
	mustPanic(t, "duplicate", func() { r.Register("a", nopDriver{}) })
	mustPanic(t, "empty name", func() { r.Register("", nopDriver{}) })
	mustPanic(t, "nil driver", func() { r.Register("n", nil) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
