package parquet

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
)

// defaultPath is the path template used when Config.Path is empty: Hive-style
// folders per event hub, partition and enqueued date, and a file name made of
// the partition and the sequence-number range it holds.
const defaultPath = "{eventhub}/partition={partition}/date={enqueued_date}/{partition}-{first_seq:020}-{last_seq:020}.parquet"

// errTemplate is wrapped by every template parse error.
var errTemplate = errors.New("invalid path template")

// Placeholders a template knows. The event hub, connector, consumer group and
// partition are known when a partition is opened; the others depend on the
// file's events.
const (
	phEventHub      = "eventhub"
	phConnector     = "connector"
	phConsumerGroup = "consumer_group"
	phPartition     = "partition"
	phEnqueuedDate  = "enqueued_date"
	phYear          = "year"
	phMonth         = "month"
	phDay           = "day"
	phHour          = "hour"
	phFirstSeq      = "first_seq"
	phLastSeq       = "last_seq"
)

// segment is one piece of a parsed template: literal text, a placeholder
// with an optional zero-padding width ({first_seq:020} has width 20), or a
// value of the event ({$.type}, {@properties.NAME}) when val is set.
type segment struct {
	lit   string
	name  string
	width int
	val   *expr.Template // the value placeholder as a template of itself
	vi    int            // the value's index in nameVars.values
}

// template is a parsed path template. It renders names for new files and
// parses the names of existing ones, which is how a restarted writer finds
// its watermark without any state besides the files themselves.
type template struct {
	raw    string
	segs   []segment
	values int // the number of value placeholders
}

// parseTemplate parses and checks a path template. The name must be
// deterministic from the partition and the sequence range, so {partition},
// {first_seq} and {last_seq} are required, and {last_seq} may appear only in
// the file name: the folder is chosen when the file's first event arrives.
// Values of the event ({$.type}) are not allowed: they are a route's.
func parseTemplate(raw string) (*template, error) {
	t, err := parse(raw, true)
	if err == nil && t.values > 0 {
		return nil, fmt.Errorf("%w %q: values of the event such as {$.type} belong in a route's path", errTemplate, raw)
	}
	return t, err
}

// parseRouteTemplate parses a route's path template: a path template that
// may also hold values of the event ({$.type}, {@properties.NAME}).
func parseRouteTemplate(raw string) (*template, error) { return parse(raw, true) }

// parse parses a template; user templates (user is true) may not use the
// folder and file names this sink reserves for itself.
func parse(raw string, user bool) (*template, error) {
	t := &template{raw: raw}
	rest := raw
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.segs = append(t.segs, segment{lit: rest})
			break
		}
		if i > 0 {
			t.segs = append(t.segs, segment{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%w %q: unclosed {", errTemplate, raw)
		}
		ph := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		if strings.HasPrefix(ph, "$") || strings.HasPrefix(ph, "@") {
			v, err := expr.CompileTemplate("{" + ph + "}")
			if err != nil {
				return nil, fmt.Errorf("%w %q: {%s}: %w", errTemplate, raw, ph, err)
			}
			t.segs = append(t.segs, segment{name: ph, val: v, vi: t.values})
			t.values++
			continue
		}
		name, spec, hasSpec := strings.Cut(ph, ":")
		seg := segment{name: name}
		switch name {
		case phEventHub, phConnector, phConsumerGroup, phPartition, phEnqueuedDate, phYear, phMonth, phDay, phHour:
			if hasSpec {
				return nil, fmt.Errorf("%w %q: {%s} takes no format", errTemplate, raw, name)
			}
		case phFirstSeq, phLastSeq:
			if hasSpec {
				w, err := strconv.Atoi(spec)
				if err != nil || !strings.HasPrefix(spec, "0") || w < 1 || w > 20 {
					return nil, fmt.Errorf("%w %q: {%s:%s}: format must be 0N, N from 1 to 20", errTemplate, raw, name, spec)
				}
				seg.width = w
			}
		default:
			return nil, fmt.Errorf("%w %q: unknown placeholder {%s}", errTemplate, raw, name)
		}
		t.segs = append(t.segs, seg)
	}
	if strings.HasPrefix(raw, "/") || strings.HasSuffix(raw, "/") || strings.Contains(raw, "//") {
		return nil, fmt.Errorf("%w %q: must be a relative file path", errTemplate, raw)
	}
	for _, part := range strings.Split(t.sample(), "/") {
		if part == "." || part == ".." {
			return nil, fmt.Errorf("%w %q: . and .. are not allowed", errTemplate, raw)
		}
		if user && (strings.HasPrefix(part, "_") || strings.HasPrefix(part, ".")) {
			// Readers (Spark, Hive, DuckDB globbing) skip such names, and
			// this sink keeps its dead letters and temporary files there.
			return nil, fmt.Errorf("%w %q: folder or file names may not start with _ or a dot", errTemplate, raw)
		}
	}
	for _, need := range []string{phPartition, phFirstSeq, phLastSeq} {
		if !t.has(need) {
			return nil, fmt.Errorf("%w %q: {%s} is required so that names are deterministic per partition and sequence range", errTemplate, raw, need)
		}
	}
	if strings.Contains(path.Dir(raw), "{"+phLastSeq) {
		return nil, fmt.Errorf("%w %q: {last_seq} may appear only in the file name", errTemplate, raw)
	}
	return t, nil
}

func (t *template) has(name string) bool {
	for _, s := range t.segs {
		if s.name == name {
			return true
		}
	}
	return false
}

// sample is the template with each value placeholder replaced by a
// letter, for the checks of its folder and file names.
func (t *template) sample() string {
	var b strings.Builder
	for _, s := range t.segs {
		switch {
		case s.val != nil:
			b.WriteString("v")
		case s.name == "":
			b.WriteString(s.lit)
		default:
			b.WriteString("{" + s.name + "}")
		}
	}
	return b.String()
}

// renderValues returns the values of t's value placeholders for e, each
// checked to be a folder or file name part that readers see.
func (t *template) renderValues(e *sinks.Event) ([]string, error) {
	if t.values == 0 {
		return nil, nil
	}
	out := make([]string, t.values)
	for _, s := range t.segs {
		if s.val == nil {
			continue
		}
		b, err := s.val.Append(nil, e)
		if err != nil {
			return nil, err
		}
		if err := checkPathValue(string(b)); err != nil {
			return nil, fmt.Errorf("{%s} is %q: %w", s.name, b, err)
		}
		out[s.vi] = string(b)
	}
	return out, nil
}

// maxPathValue is the longest value of the event a path takes.
const maxPathValue = 128

// checkPathValue checks a value of the event for a path: letters, digits,
// and - _ . = (not first: _ and . hide a name from readers), at most 128
// bytes. An event cannot make a path climb out of its folder or hide.
func checkPathValue(v string) error {
	switch {
	case v == "":
		return errors.New("empty")
	case len(v) > maxPathValue:
		return fmt.Errorf("longer than %d bytes", maxPathValue)
	case v[0] == '.' || v[0] == '_':
		return errors.New("starts with . or _, which readers skip")
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '=') {
			return errors.New("want letters, digits and - _ . = only")
		}
	}
	return nil
}

// nameVars are the values a template is rendered with.
type nameVars struct {
	eventHub, connector, consumerGroup, partition string
	// anyPartition makes a matcher take the files of every partition
	// (partition is then unused), for the dead-letter commands.
	anyPartition bool
	// values are the values of the event for a route's value placeholders.
	values []string
	// enqueued is the enqueued time of the file's first event.
	enqueued          time.Time
	firstSeq, lastSeq int64
}

func (t *template) render(v nameVars) string {
	var b strings.Builder
	u := v.enqueued.UTC()
	for _, s := range t.segs {
		if s.val != nil {
			b.WriteString(v.values[s.vi])
			continue
		}
		switch s.name {
		case "":
			b.WriteString(s.lit)
		case phEventHub:
			b.WriteString(v.eventHub)
		case phConnector:
			b.WriteString(v.connector)
		case phConsumerGroup:
			b.WriteString(v.consumerGroup)
		case phPartition:
			b.WriteString(v.partition)
		case phEnqueuedDate:
			b.WriteString(u.Format(time.DateOnly))
		case phYear:
			fmt.Fprintf(&b, "%04d", u.Year())
		case phMonth:
			fmt.Fprintf(&b, "%02d", int(u.Month()))
		case phDay:
			fmt.Fprintf(&b, "%02d", u.Day())
		case phHour:
			fmt.Fprintf(&b, "%02d", u.Hour())
		case phFirstSeq:
			fmt.Fprintf(&b, "%0*d", s.width, v.firstSeq)
		case phLastSeq:
			fmt.Fprintf(&b, "%0*d", s.width, v.lastSeq)
		}
	}
	return b.String()
}

// matcher recognises the committed files of one partition.
type matcher struct {
	// prefix is the folder under which all files of the partition live;
	// listing it recursively finds them all.
	prefix string
	re     *regexp.Regexp
}

// match returns the sequence range encoded in name, if name is a file of the
// matcher's partition.
func (m *matcher) match(name string) (first, last int64, ok bool) {
	sm := m.re.FindStringSubmatch(name)
	if sm == nil {
		return 0, 0, false
	}
	var err1, err2 error
	first, err1 = strconv.ParseInt(sm[m.re.SubexpIndex("first")], 10, 64)
	last, err2 = strconv.ParseInt(sm[m.re.SubexpIndex("last")], 10, 64)
	if err1 != nil || err2 != nil || last < first {
		return 0, 0, false
	}
	return first, last, true
}

// partition returns the partition encoded in name, when m was built for
// any partition and name matches.
func (m *matcher) partition(name string) (string, bool) {
	i := m.re.SubexpIndex("partition")
	sm := m.re.FindStringSubmatch(name)
	if i < 0 || sm == nil {
		return "", false
	}
	return sm[i], true
}

// matcher builds the matcher of the files of one partition: the values known
// at Open are literal, the others match any value of their form.
func (t *template) matcher(v nameVars) *matcher {
	var re strings.Builder
	var prefix strings.Builder
	open := true // still in the part known at Open
	re.WriteString("^")
	seenFirst, seenLast, seenPartition := false, false, false
	for _, s := range t.segs {
		var lit string
		known := true
		if s.val != nil {
			open = false
			re.WriteString(`[^/]+`)
			continue
		}
		switch s.name {
		case "":
			lit = s.lit
		case phEventHub:
			lit = v.eventHub
		case phConnector:
			lit = v.connector
		case phConsumerGroup:
			lit = v.consumerGroup
		case phPartition:
			lit, known = v.partition, !v.anyPartition
		default:
			known = false
		}
		if known {
			re.WriteString(regexp.QuoteMeta(lit))
			if open {
				prefix.WriteString(lit)
			}
			continue
		}
		open = false
		switch s.name {
		case phEnqueuedDate:
			re.WriteString(`\d{4}-\d{2}-\d{2}`)
		case phYear:
			re.WriteString(`\d{4}`)
		case phMonth, phDay, phHour:
			re.WriteString(`\d{2}`)
		case phPartition:
			if seenPartition {
				re.WriteString(`[^/]+`)
			} else {
				re.WriteString(`(?P<partition>[^/]+)`)
				seenPartition = true
			}
		case phFirstSeq, phLastSeq:
			// A repeated placeholder must repeat its value; Go's regexp has
			// no back-references, so later occurrences only match digits.
			group := "first"
			seen := &seenFirst
			if s.name == phLastSeq {
				group, seen = "last", &seenLast
			}
			if *seen {
				re.WriteString(`\d+`)
			} else {
				fmt.Fprintf(&re, `(?P<%s>\d+)`, group)
				*seen = true
			}
		}
	}
	re.WriteString("$")
	p := prefix.String()
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[:i+1]
	} else {
		p = ""
	}
	return &matcher{prefix: p, re: regexp.MustCompile(re.String())}
}

// deadLetterTemplate is the template of the dead-letter files that go with
// the data files of t: a _dead_letters folder next to the data, JSON lines.
func (t *template) deadLetterTemplate() *template {
	dir, base := path.Split(t.raw)
	base = strings.TrimSuffix(base, ".parquet") + ".jsonl"
	dt, err := parse(dir+deadLetterDir+"/"+base, false)
	if err != nil {
		panic("parquet: dead-letter template of a valid template: " + err.Error())
	}
	return dt
}

// deadLetterDir is the folder, next to the data files, holding dead letters.
const deadLetterDir = "_dead_letters"
