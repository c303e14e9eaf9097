package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestNeverPrinted(t *testing.T) {
	const value = "Endpoint=sb://x/;SharedAccessKey=hunter2"
	s := String(value)
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("connecting", "connection", s)
	j, err := json.Marshal(struct{ C String }{s})
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{
		"%v": fmt.Sprintf("%v", s),
		//lint:ignore S1025 what fmt prints for %s is the point
		"%s":         fmt.Sprintf("%s", s),
		"%#v":        fmt.Sprintf("%#v", s),
		"struct %+v": fmt.Sprintf("%+v", struct{ C String }{s}),
		"slog":       logs.String(), "json": string(j),
	}
	for how, out := range outs {
		if strings.Contains(out, "hunter2") || !strings.Contains(out, Redacted) {
			t.Errorf("%s printed %q", how, out)
		}
	}
	if s.Reveal() != value {
		t.Errorf("Reveal = %q", s.Reveal())
	}
	if String("").String() != "" {
		t.Error("an empty secret should print empty, so a missing value shows as missing")
	}
}
