package mapping

import "testing"

// Shorthands for the tests.
var (
	String    = Type{Kind: KindString}
	Int32     = Type{Kind: KindInt32}
	Int64     = Type{Kind: KindInt64}
	Double    = Type{Kind: KindDouble}
	Boolean   = Type{Kind: KindBoolean}
	Timestamp = Type{Kind: KindTimestamp}
	JSON      = Type{Kind: KindJSON}
	UUID      = Type{Kind: KindUUID}
	Bytes     = Type{Kind: KindBytes}
)

func TestParseType(t *testing.T) {
	tests := []struct {
		in   string
		want Type
	}{
		{"string", String},
		{"TEXT", String},
		{"character  varying", String},
		{"int32", Int32},
		{"integer", Int32},
		{"bigint", Int64},
		{"int64", Int64},
		{"double precision", Double},
		{"float8", Double},
		{"numeric", Type{Kind: KindDecimal}},
		{"numeric(12)", DecimalType(12, 0)},
		{"numeric(12,2)", DecimalType(12, 2)},
		{"decimal( 38 , 9 )", DecimalType(38, 9)},
		{"boolean", Boolean},
		{"bool", Boolean},
		{"timestamptz", Timestamp},
		{"timestamp(ms)", Type{Kind: KindTimestamp, Unit: Millis}},
		{"timestamp with time zone", Timestamp},
		{"jsonb", JSON},
		{"json", JSON},
		{"uuid", UUID},
		{"bytea", Bytes},
		{"bytes", Bytes},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseType(tt.in)
			if err != nil {
				t.Fatalf("ParseType(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseType(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			again, err := ParseType(got.String())
			if err != nil || again != got {
				t.Fatalf("round trip of %q via %q = %+v, %v", tt.in, got.String(), again, err)
			}
		})
	}
}

func TestParseTypeErrors(t *testing.T) {
	for _, in := range []string{"", "varchar2", "numeric(0,0)", "numeric(5,6)", "numeric(a)", "numeric(", "numeric()", "int(4)", "timestamp(ns)", "numeric(1001)"} {
		if got, err := ParseType(in); err == nil {
			t.Errorf("ParseType(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseSource(t *testing.T) {
	tests := []struct {
		in       string
		kind     SourceKind
		path     []Step
		str      string
		typ      Type
		nullable bool
	}{
		{"$", SourceJSON, nil, "$", JSON, false},
		{"$.a", SourceJSON, []Step{{Key: "a", Index: -1}}, "$.a", String, true},
		{"$.a.b[0]", SourceJSON, []Step{{Key: "a", Index: -1}, {Key: "b", Index: -1}, {Index: 0}}, "$.a.b[0]", String, true},
		{"$['a b'].c", SourceJSON, []Step{{Key: "a b", Index: -1}, {Key: "c", Index: -1}}, `$["a b"].c`, String, true},
		{"$[2]", SourceJSON, []Step{{Index: 2}}, "$[2]", String, true},
		{`$['we\'ird']`, SourceJSON, []Step{{Key: "we'ird", Index: -1}}, `$["we'ird"]`, String, true},
		{`$["a\"b"]`, SourceJSON, []Step{{Key: `a"b`, Index: -1}}, `$["a\"b"]`, String, true},
		{"@partition", SourcePartition, nil, "@partition", String, false},
		{"@sequence_number", SourceSequenceNumber, nil, "@sequence_number", Int64, false},
		{"@offset", SourceOffset, nil, "@offset", String, false},
		{"@enqueued_time", SourceEnqueuedTime, nil, "@enqueued_time", Timestamp, false},
		{"@partition_key", SourcePartitionKey, nil, "@partition_key", String, true},
		{"@content_type", SourceContentType, nil, "@content_type", String, true},
		{"@properties.tenant", SourceProperty, nil, "@properties.tenant", String, true},
		{"@body", SourceBody, nil, "@body", JSON, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseSource(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if s.Kind != tt.kind || len(s.Path) != len(tt.path) {
				t.Fatalf("got %+v", s)
			}
			for i := range tt.path {
				if s.Path[i] != tt.path[i] {
					t.Fatalf("step %d = %+v, want %+v", i, s.Path[i], tt.path[i])
				}
			}
			if s.String() != tt.str {
				t.Errorf("String() = %q, want %q", s.String(), tt.str)
			}
			if s.DefaultType() != tt.typ || s.DefaultNullable() != tt.nullable {
				t.Errorf("defaults = %v, %v; want %v, %v", s.DefaultType(), s.DefaultNullable(), tt.typ, tt.nullable)
			}
		})
	}
	for _, bad := range []string{"", "a.b", "$..a", "$.a[", "$.a[-1]", "$.a[x]", "$['a", "@seq", "@properties.", "$a"} {
		if s, err := ParseSource(bad); err == nil {
			t.Errorf("ParseSource(%q) = %+v, want an error", bad, s)
		}
	}
}
