package connector

import (
	"fmt"
	"io"
	"strings"

	"github.com/ehsink/ehsink/internal/config"
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
func (s SinkSpec) MarshalConfig() (any, error) {
	return struct {
		Type   string `yaml:"type"`
		Config any    `yaml:",inline"`
	}{s.Type, s.Config}, nil
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
