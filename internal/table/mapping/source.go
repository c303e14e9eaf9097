package mapping

import (
	"fmt"
	"strconv"
	"strings"
)

// SourceKind says where a column's value comes from.
type SourceKind uint8

// The sources. The zero SourceKind is invalid.
const (
	SourceInvalid        SourceKind = iota
	SourceJSON                      // a JSON path into the body ($.a.b[0])
	SourcePartition                 // @partition
	SourceSequenceNumber            // @sequence_number
	SourceOffset                    // @offset
	SourceEnqueuedTime              // @enqueued_time
	SourcePartitionKey              // @partition_key
	SourceContentType               // @content_type
	SourceProperty                  // @properties.NAME
	SourceBody                      // @body, the whole body
	SourceIndex                     // @index, the position of an exploded element
)

// metaSource returns the metadata source named name (@properties.NAME is
// parsed apart).
func metaSource(name string) (SourceKind, bool) {
	switch name {
	case "@partition":
		return SourcePartition, true
	case "@sequence_number":
		return SourceSequenceNumber, true
	case "@offset":
		return SourceOffset, true
	case "@enqueued_time":
		return SourceEnqueuedTime, true
	case "@partition_key":
		return SourcePartitionKey, true
	case "@content_type":
		return SourceContentType, true
	case "@body":
		return SourceBody, true
	case "@index":
		return SourceIndex, true
	}
	return SourceInvalid, false
}

// Step is one step of a JSON path: an object key or an array index.
type Step struct {
	// Key is the object key, when Index is negative.
	Key string
	// Index is the array index, or -1 for a key step.
	Index int
}

// Source is where a column's value comes from. Build one with ParseSource.
type Source struct {
	// Kind is the kind of source.
	Kind SourceKind
	// Path is the JSON path of a SourceJSON source, without the leading $;
	// empty means the whole body.
	Path []Step
	// Property is the property name of a SourceProperty source.
	Property string
}

// ParseSource parses a source: a JSON path starting with $ or a metadata
// name starting with @ (see the package documentation).
func ParseSource(s string) (Source, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "$"):
		path, err := parsePath(s)
		if err != nil {
			return Source{}, err
		}
		return Source{Kind: SourceJSON, Path: path}, nil
	case strings.HasPrefix(s, "@properties."):
		name := s[len("@properties."):]
		if name == "" {
			return Source{}, fmt.Errorf("source %q: empty property name", s)
		}
		return Source{Kind: SourceProperty, Property: name}, nil
	case strings.HasPrefix(s, "@"):
		if k, ok := metaSource(s); ok {
			return Source{Kind: k}, nil
		}
		return Source{}, fmt.Errorf("unknown metadata source %q (want @partition, @sequence_number, @offset, @enqueued_time, @partition_key, @content_type, @properties.NAME, @body or @index)", s)
	case s == "":
		return Source{}, fmt.Errorf("empty source (want a JSON path such as $.id or metadata such as @sequence_number)")
	default:
		return Source{}, fmt.Errorf("source %q: want a JSON path starting with $ (such as $.%s) or metadata starting with @", s, s)
	}
}

// QuotedKey reads the quoted key of a path that starts at s[start] (a ' or
// a "), as strings are written in conditions: a backslash escapes the
// quote and the backslash, and is kept before any other character. It
// returns the key and the offset just past the closing quote; ok is false
// when the key is not terminated.
func QuotedKey(s string, start int) (key string, end int, ok bool) {
	q := s[start]
	var b strings.Builder
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == q:
			return b.String(), i + 1, true
		case c == '\\' && i+1 < len(s) && (s[i+1] == q || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", len(s), false
}

// parsePath parses $, $.a.b, $.a[0], $['a b'], $["a"], $['we\'ird'].
func parsePath(s string) ([]Step, error) {
	var steps []Step
	i := 1 // past $
	for i < len(s) {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("path %q: empty key at offset %d", s, i)
			}
			steps = append(steps, Step{Key: s[i+1 : j], Index: -1})
			i = j
		case '[':
			if i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"') {
				key, end, ok := QuotedKey(s, i+1)
				if !ok || end >= len(s) || s[end] != ']' {
					return nil, fmt.Errorf("path %q: unterminated quoted key at offset %d", s, i)
				}
				steps = append(steps, Step{Key: key, Index: -1})
				i = end + 1
				continue
			}
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: missing ] at offset %d", s, i)
			}
			n, err := strconv.Atoi(s[i+1 : i+end])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("path %q: array index %q is not a non-negative integer", s, s[i+1:i+end])
			}
			steps = append(steps, Step{Index: n})
			i += end + 1
		default:
			return nil, fmt.Errorf("path %q: unexpected %q at offset %d (want . or [)", s, s[i], i)
		}
	}
	return steps, nil
}

// String returns the source as written in a mapping.
func (s Source) String() string {
	switch s.Kind {
	case SourceJSON:
		var b strings.Builder
		b.WriteByte('$')
		for _, st := range s.Path {
			switch {
			case st.Index >= 0:
				b.WriteString("[" + strconv.Itoa(st.Index) + "]")
			case strings.ContainsAny(st.Key, ".[]'\" ") || st.Key == "":
				b.WriteString("[" + strconv.Quote(st.Key) + "]")
			default:
				b.WriteString("." + st.Key)
			}
		}
		return b.String()
	case SourceProperty:
		return "@properties." + s.Property
	}
	for _, name := range []string{"@partition", "@sequence_number", "@offset", "@enqueued_time", "@partition_key", "@content_type", "@body", "@index"} {
		if k, _ := metaSource(name); k == s.Kind {
			return name
		}
	}
	return "invalid"
}

// DefaultType is the type a column from s has when the mapping names none.
func (s Source) DefaultType() Type {
	switch s.Kind {
	case SourceSequenceNumber, SourceIndex:
		return Type{Kind: KindInt64}
	case SourceEnqueuedTime:
		return Type{Kind: KindTimestamp}
	case SourceBody:
		return Type{Kind: KindJSON}
	case SourceJSON:
		if len(s.Path) == 0 {
			return Type{Kind: KindJSON}
		}
	}
	return Type{Kind: KindString}
}

// DefaultNullable reports whether a column from s is nullable when the
// mapping does not say: metadata every event has is not.
func (s Source) DefaultNullable() bool {
	switch s.Kind {
	case SourcePartition, SourceSequenceNumber, SourceOffset, SourceEnqueuedTime, SourceBody, SourceIndex:
		return false
	case SourceJSON:
		return len(s.Path) != 0
	}
	return true
}

// MarshalText writes the source as it is written in a config
// ($.customer.id, @enqueued_time), so printed configs read back.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
