package routing

import (
	"errors"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func TestSelect(t *testing.T) {
	compile := func(s string) Cond {
		c, err := CompileCondition(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	withDefault := NewSelector([]Cond{compile(`$.type == 'a'`), compile(`$.type in ['a', 'b']`), nil}, []string{"a", "b", "rest"})
	noDefault := NewSelector([]Cond{compile(`$.type == 'a'`)}, []string{"a"})
	cases := []struct {
		sel     *Selector
		body    string
		want    int
		wantErr error
	}{
		{withDefault, `{"type":"a"}`, 0, nil}, // the first match wins
		{withDefault, `{"type":"b"}`, 1, nil},
		{withDefault, `{"type":"c"}`, 2, nil},
		{withDefault, `{}`, 2, nil},
		{withDefault, `not json`, -1, mapping.ErrInvalidJSON},
		{noDefault, `{"type":"c"}`, -1, ErrNoRoute},
	}
	for _, tc := range cases {
		got, err := tc.sel.Select(&sinks.Event{Body: []byte(tc.body)})
		if got != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("Select(%s) = %d, %v; want %d, %v", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestWhenChecker(t *testing.T) {
	var c WhenChecker
	if err := c.Check(0, "$.type == 'a'"); err != nil {
		t.Fatalf("a valid condition: %v", err)
	}
	if err := c.Check(1, "$.type = 'b'"); err == nil {
		t.Fatal("a condition that does not compile was accepted")
	}
	if err := c.Check(2, ""); err != nil {
		t.Fatalf("the default route: %v", err)
	}
	if err := c.Check(3, "$.type == 'c'"); err == nil || !strings.Contains(err.Error(), "never reached: routes[2]") {
		t.Fatalf("a route after the default: %v, want never reached naming routes[2]", err)
	}
}
