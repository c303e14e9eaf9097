package hub

import (
	"errors"
	"testing"
	"time"
)

func TestParseSelector(t *testing.T) {
	ms := int64(1767323045678)
	tests := []struct {
		expr string
		want StartPosition
	}{
		{"amqp.annotation.x-opt-offset > '@latest'", Latest()},
		{"amqp.annotation.x-opt-offset >= '@latest'", StartPosition{Kind: PositionLatest, Inclusive: true}},
		{"amqp.annotation.x-opt-offset > '-1'", Earliest()},
		{"amqp.annotation.x-opt-offset >= '-1'", Earliest()},
		{"amqp.annotation.x-opt-offset > '0'", AtOffset(0, false)},
		{"amqp.annotation.x-opt-offset >= '12345'", AtOffset(12345, true)},
		{"amqp.annotation.x-opt-offset > '9223372036854775807'", AtOffset(9223372036854775807, false)},
		{"amqp.annotation.x-opt-sequence-number > '-1'", AtSequenceNumber(-1, false)},
		{"amqp.annotation.x-opt-sequence-number >= '-1'", AtSequenceNumber(-1, true)},
		{"amqp.annotation.x-opt-sequence-number > '41'", AtSequenceNumber(41, false)},
		{"amqp.annotation.x-opt-sequence-number >= '0'", AtSequenceNumber(0, true)},
		{"amqp.annotation.x-opt-enqueued-time > '1767323045678'", AtEnqueuedTime(time.UnixMilli(ms).UTC(), false)},
		{"amqp.annotation.x-opt-enqueued-time >= '0'", AtEnqueuedTime(time.UnixMilli(0).UTC(), true)},
		{"amqp.annotation.x-opt-enqueued-time > '-5'", AtEnqueuedTime(time.UnixMilli(-5).UTC(), false)},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := ParseSelector(tt.expr)
			if err != nil {
				t.Fatalf("ParseSelector: %v", err)
			}
			if got.Kind != tt.want.Kind || got.Inclusive != tt.want.Inclusive || got.Offset != tt.want.Offset ||
				got.SequenceNumber != tt.want.SequenceNumber || !got.EnqueuedTime.Equal(tt.want.EnqueuedTime) {
				t.Fatalf("ParseSelector = %+v, want %+v", got, tt.want)
			}
			// String renders an expression that parses back to the same position.
			again, err := ParseSelector(got.String())
			if err != nil || again.Kind != got.Kind || again.Offset != got.Offset || again.SequenceNumber != got.SequenceNumber || !again.EnqueuedTime.Equal(got.EnqueuedTime) {
				t.Fatalf("round trip of %q: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseSelectorMalformed(t *testing.T) {
	for _, expr := range []string{
		"",
		"amqp.annotation.x-opt-offset",
		"amqp.annotation.x-opt-offset > ",
		"amqp.annotation.x-opt-offset > ''",
		"amqp.annotation.x-opt-offset > 5",
		"amqp.annotation.x-opt-offset > '5",
		"amqp.annotation.x-opt-offset > 5'",
		"amqp.annotation.x-opt-offset > '5' ",
		" amqp.annotation.x-opt-offset > '5'",
		"amqp.annotation.x-opt-offset  > '5'",
		"amqp.annotation.x-opt-offset >'5'",
		"amqp.annotation.x-opt-offset = '5'",
		"amqp.annotation.x-opt-offset < '5'",
		"amqp.annotation.x-opt-offset <= '5'",
		"amqp.annotation.x-opt-offset != '5'",
		"amqp.annotation.x-opt-offset > 'abc'",
		"amqp.annotation.x-opt-offset > '5a'",
		"amqp.annotation.x-opt-offset > '+5'",
		"amqp.annotation.x-opt-offset > ' 5'",
		"amqp.annotation.x-opt-offset > '-2'",
		"amqp.annotation.x-opt-offset > '1.5'",
		"amqp.annotation.x-opt-offset > '0x10'",
		"amqp.annotation.x-opt-offset > '9223372036854775808'",
		"amqp.annotation.x-opt-offset > '5''",
		"amqp.annotation.x-opt-offset > 'a'b'",
		"amqp.annotation.x-opt-offset > '@LATEST'",
		"amqp.annotation.x-opt-offset > '-'",
		"amqp.annotation.x-opt-sequence-number > '@latest'",
		"amqp.annotation.x-opt-sequence-number > '-2'",
		"amqp.annotation.x-opt-sequence-number > ''",
		"amqp.annotation.x-opt-enqueued-time > '@latest'",
		"amqp.annotation.x-opt-enqueued-time > '2026-01-01T00:00:00Z'",
		"amqp.annotation.x-opt-partition-key > 'k'",
		"amqp.annotation.x-opt-offset",
		"AMQP.ANNOTATION.X-OPT-OFFSET > '5'",
		"annotation.x-opt-offset > '5'",
		"x-opt-offset > '5'",
		"amqp.annotation.x-opt-offset > '5' AND amqp.annotation.x-opt-offset < '9'",
	} {
		t.Run(expr, func(t *testing.T) {
			sp, err := ParseSelector(expr)
			var he *Error
			if !errors.As(err, &he) || he.Condition != CondArgumentOutOfRange {
				t.Fatalf("ParseSelector = %+v, %v; want *Error %s", sp, err, CondArgumentOutOfRange)
			}
		})
	}
}
