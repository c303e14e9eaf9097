package routing

import (
	"errors"
	"testing"

	"github.com/ehsink/ehsink/mapping"
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
