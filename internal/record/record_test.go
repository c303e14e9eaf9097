package record

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

func TestAppendDeadLetter(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		body     []byte
		props    map[string]any
		wantBody string
		wantEnc  string
	}{
		{"json body kept as JSON", []byte(`{"a":1}`), nil, `{"a":1}`, ""},
		{"text body as base64", []byte("not json"), nil, `"bm90IGpzb24="`, "base64"},
		{"empty body as base64", nil, nil, `""`, "base64"},
		{"unencodable properties keep the letter", []byte(`1`), map[string]any{"f": func() {}}, `1`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sinks.DeadLetter{Event: sinks.Event{Partition: "3", SequenceNumber: 9, Offset: "90", Body: tt.body, Properties: tt.props}, Reason: "bad amount", FailedAt: at}
			line := AppendDeadLetter([]byte("prev\n"), &d, "0123456789ab")
			text, ok := strings.CutPrefix(string(line), "prev\n")
			if !ok || !strings.HasSuffix(text, "\n") || strings.Count(text, "\n") != 1 {
				t.Fatalf("AppendDeadLetter = %q, want one line appended", line)
			}
			var r DeadLetter
			if err := json.Unmarshal([]byte(text), &r); err != nil {
				t.Fatal(err)
			}
			if string(r.Body) != tt.wantBody || r.BodyEncoding != tt.wantEnc || r.Reason != "bad amount" ||
				r.SequenceNumber != 9 || r.Partition != "3" || !r.FailedAt.Equal(at) || r.Revision != "0123456789ab" {
				t.Fatalf("record = %+v (body %s)", r, r.Body)
			}
			if tt.props != nil && r.Properties["unencodable"] == nil {
				t.Fatalf("properties = %v, want their printed form", r.Properties)
			}
		})
	}
}
