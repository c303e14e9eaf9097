package connector

import (
	"fmt"
	"io"

	"github.com/ehsink/ehsink/config"
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
