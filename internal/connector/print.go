package connector

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/sinks/table"
)

// Print writes the effective configuration, c with its defaults filled in,
// as YAML that [Load] reads back. Every secret is written as *** (including
// secrets in sink configs, as long as the sink types them [secret.String]).
func (c *Config) Print(w io.Writer) error {
	b, err := config.Marshal(c.withDefaults())
	if err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// MarshalConfig writes the `sink:` block as a user writes it: the type,
// then the keys of the sink's own config.
// With columns: auto, the block says so (and flatten) in place of the
// columns derived from it, which PrintDerived shows.
func (s SinkSpec) MarshalConfig() (any, error) {
	v := struct {
		Type   string `yaml:"type"`
		Config any    `yaml:",inline"`
	}{s.Type, s.Config}
	if s.Auto == nil {
		return v, nil
	}
	b, err := config.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Content) == 0 {
		return nil, fmt.Errorf("sink: columns: auto: %w", err)
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "columns" {
			continue
		}
		m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Value: "auto"}
		if s.Auto.Flatten {
			m.Content = slices.Insert(m.Content, i+2, &yaml.Node{Kind: yaml.ScalarNode, Value: "flatten"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
		}
		break
	}
	return m, nil
}

// MarshalConfig writes the source with `connection: emulator` in clear: it
// names the in-process emulator and is no secret, unlike the connection
// strings the field otherwise holds, which are written as ***.
func (s SourceSpec) MarshalConfig() (any, error) {
	type plain SourceSpec // the same fields, without this method
	if s.Connection.Reveal() != EmulatorConnection {
		return plain(s), nil
	}
	return struct {
		Connection string `yaml:"connection"`
		plain      `yaml:",inline"`
	}{EmulatorConnection, plain(s)}, nil
}

// PrintDerived writes, as YAML comments, the columns each `columns: auto`
// sink has: derived from its reader schema at load, or said to be derived
// at start from the registry's newest schema of its subject.
func (c *Config) PrintDerived(w io.Writer) error {
	var b strings.Builder
	for _, spec := range c.Connectors {
		a := spec.Sink.Auto
		if a == nil {
			continue
		}
		r := spec.Source.Registry
		if r == nil || r.ReaderSchema == "" {
			subject := ""
			if r != nil {
				subject = r.Subject
			}
			fmt.Fprintf(&b, "\n# connector %s: columns: auto is derived at start from the newest schema of %s in the registry\n", spec.Name, subject)
			continue
		}
		fmt.Fprintf(&b, "\n# connector %s: columns: auto derives from %s:\n", spec.Name, r.ReaderSchema)
		for _, line := range DerivedColumns(spec) {
			b.WriteString("#   " + line + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DerivedColumns lists the columns of a `columns: auto` sink, one line
// each, as a list-form mapping writes them: derived from the reader
// schema at load, or by [Spec.WithDerivedColumns]. It is nil for a sink
// with no table shape.
func DerivedColumns(spec Spec) []string {
	sh, ok := spec.Sink.Config.(table.Shaper)
	if spec.Sink.Auto == nil || !ok {
		return nil
	}
	shape, err := sh.TableShape()
	if err != nil || len(shape.Routes) == 0 {
		return nil
	}
	var out []string
	for _, c := range shape.Routes[0].Columns {
		out = append(out, fmt.Sprintf("- {name: %s, from: %q, type: %s, nullable: %t}", c.Name, c.From.String(), c.Type, c.Nullable))
	}
	return out
}

// ddlSource is implemented by sink configs whose sink prepares its
// destination with SQL when it starts (the PostgreSQL sink): DDL returns
// those statements, in order, each ending with a semicolon, and "--"
// comments for what the sink expects without creating it. It is called on
// a valid config and reaches no service.
type ddlSource interface {
	DDL() []string
}

// PrintDDL writes, as YAML comments, the DDL each connector's sink would
// run at start, for the connectors whose sink says (see ddlSource). It
// writes nothing when no sink does.
func (c *Config) PrintDDL(w io.Writer) error {
	var b strings.Builder
	for _, spec := range c.Connectors {
		d, ok := spec.Sink.Config.(ddlSource)
		if !ok {
			continue
		}
		if a, r := spec.Sink.Auto, spec.Source.Registry; a != nil && (r == nil || r.ReaderSchema == "") {
			// Its table follows columns the registry gives at start.
			fmt.Fprintf(&b, "\n# connector %s: the %s sink's statements depend on the columns derived at start\n", spec.Name, spec.Sink.Type)
			continue
		}
		fmt.Fprintf(&b, "\n# connector %s: the %s sink runs at start\n", spec.Name, spec.Sink.Type)
		for _, stmt := range d.DDL() {
			for _, line := range strings.Split(stmt, "\n") {
				b.WriteString("#   " + strings.ReplaceAll(line, "\t", "  ") + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
