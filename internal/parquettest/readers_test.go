package parquettest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recordingTB records how a call ended the test without ending this one;
// Skipf and Fatalf stop the calling goroutine as the real ones do.
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

// TestReadersMissing: without node, a test of the independent readers is
// skipped with the install hint, or failed when CI=true.
func TestReadersMissing(t *testing.T) {
	for _, tt := range []struct{ ci, want string }{{"", "skip"}, {"true", "fatal"}} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			t.Setenv("PATH", t.TempDir()) // no node
			rec := &recordingTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				readers(rec)
				rec.how = "returned"
			}()
			<-done
			if rec.how != tt.want || !strings.Contains(rec.msg, "make tools") {
				t.Fatalf("ended with %s %q, want %s with the install hint", rec.how, rec.msg, tt.want)
			}
		})
	}
}
