package testenv_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

// recordingTB records how a harness call ended the test without ending
// this one; Skipf and Fatalf stop the calling goroutine as the real ones do.
type recordingTB struct {
	testing.TB
	how, msg string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.how, r.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.how, r.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestAzuriteMissing: with no Azurite in .tools or on PATH, a test is
// skipped with the install hint, or failed when CI=true.
func TestAzuriteMissing(t *testing.T) {
	t.Chdir(t.TempDir()) // no go.mod above, so no .tools
	t.Setenv("PATH", t.TempDir())
	tests := []struct{ ci, want string }{{"", "skip"}, {"false", "skip"}, {"true", "fatal"}}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			rec := &recordingTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				testenv.NewAzurite(rec)
				rec.how = "returned"
			}()
			<-done
			if rec.how != tt.want || !strings.Contains(rec.msg, "make tools") {
				t.Fatalf("got %s %q, want %s with the make tools hint", rec.how, rec.msg, tt.want)
			}
		})
	}
}
