package conntest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/sinks"
)

// avroEvent turns the body of an event of a connector that reads Avro
// (source.format: avro) into what the connector's decoder hands on: the
// body (a YAML value, as JSON) is encoded as Avro with the event's
// avro_schema, then decoded as the running connector decodes it (resolved
// into its registry.reader_schema when it has one). dir is the test
// file's directory, which a relative schema path starts from.
func avroEvent(spec *connector.Spec, dir string, e *Event, ev *sinks.Event) error {
	avroConnector := spec.Source.Format == connector.FormatAvro
	switch {
	case e.AvroSchema == "" && avroConnector:
		return errors.New("avro_schema: required: the connector reads Avro (source.format: avro); give the schema the event is written with (a .avsc file or the schema's JSON) and its record as body")
	case e.AvroSchema == "":
		return nil
	case !avroConnector:
		return errors.New("avro_schema: the connector reads JSON (source.format is not avro)")
	}
	writer, err := schemaOf(dir, e.AvroSchema)
	if err != nil {
		return fmt.Errorf("avro_schema: %w", err)
	}
	var reader hamba.Schema
	if r := spec.Source.Registry; r != nil && r.ReaderSchema != "" {
		if reader, err = schemaOf("", r.ReaderSchema); err != nil {
			return fmt.Errorf("the connector's reader_schema: %w", err)
		}
	}
	prog, err := avro.Compile(writer, reader)
	if err != nil {
		return fmt.Errorf("avro_schema: %w", err)
	}
	body, err := avro.Encode(writer, ev.Body)
	if err != nil {
		return fmt.Errorf("body: does not fit avro_schema: %w", err)
	}
	if ev.Body, err = prog.AppendJSON(nil, body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

// schemaOf reads a schema written inline (it starts with { or ") or in a
// file.
func schemaOf(dir, ref string) (hamba.Schema, error) {
	text := strings.TrimSpace(ref)
	if !strings.HasPrefix(text, "{") && !strings.HasPrefix(text, `"`) {
		name := text
		if !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		text = string(b)
	}
	return avro.ParseSchema(text)
}
