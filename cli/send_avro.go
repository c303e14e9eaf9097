package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/secret"
)

// avroFlags are the flags of `ehsink send --avro`.
type avroFlags struct {
	schema, registry, ca, group, subject, user *string
	confluent                                  *bool
}

func newAvroFlags(fs *flag.FlagSet) *avroFlags {
	return &avroFlags{
		schema:    fs.String("avro", "", "encode each line (a JSON record) as Avro with the schema in `FILE`, registered first"),
		confluent: fs.Bool("confluent", false, "with --avro: register in a Confluent-compatible registry and frame the bodies (byte 0, 4-byte id)"),
		registry:  fs.String("registry", "", "with --avro: the schema registry's `URL` (default: the connector's, or https://NAMESPACE)"),
		ca:        fs.String("registry-ca", "", "with --avro: PEM `FILE` of an authority to trust for the registry (the emulator's)"),
		group:     fs.String("schema-group", "", "with --avro: the Azure schema `GROUP` (default: the connector's registry.group)"),
		subject:   fs.String("subject", "", "with --avro --confluent: the `SUBJECT` (default: HUB-value)"),
		user:      fs.String("registry-user", "", "with --avro --confluent: basic-auth `USER` (the password from $EHSINK_REGISTRY_PASSWORD)"),
	}
}

// problem says what is wrong with the Avro flags, or "".
func (a *avroFlags) problem(demo, contentType bool) string {
	set := *a.confluent || *a.registry != "" || *a.ca != "" || *a.group != "" || *a.subject != "" || *a.user != ""
	switch {
	case *a.schema == "" && set:
		return "--confluent, --registry, --registry-ca, --schema-group, --subject and --registry-user go with --avro"
	case *a.schema != "" && demo:
		return "--avro encodes lines; it does not take --demo"
	case *a.schema != "" && contentType:
		return "--avro sets the content type itself; it does not take --content-type"
	case *a.subject != "" && !*a.confluent:
		return "--subject goes with --confluent (Azure schemas are named by --schema-group and the schema's name)"
	}
	return ""
}

// setup registers the schema and makes opts encode each line with it.
func (a *avroFlags) setup(ctx context.Context, ep endpoint, opts *produce.LinesOptions) error {
	text, err := os.ReadFile(*a.schema)
	if err != nil {
		return err
	}
	schema, err := avro.ParseSchema(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", *a.schema, err)
	}
	src := connector.SourceSpec{Connection: ep.conn, Namespace: ep.namespace, Registry: &connector.RegistrySpec{Type: connector.RegistryAzure}}
	if ep.spec != nil && ep.spec.Source.Registry != nil {
		r := *ep.spec.Source.Registry
		src.Registry = &r
	}
	r := src.Registry
	if *a.confluent {
		r.Type = connector.RegistryConfluent
	}
	if *a.user != "" {
		r.Username, r.Password = secret.String(*a.user), secret.String(os.Getenv("EHSINK_REGISTRY_PASSWORD"))
	}
	if *a.group != "" {
		r.Group = *a.group
	}
	var ca []byte
	if *a.ca != "" {
		if ca, err = os.ReadFile(*a.ca); err != nil {
			return err
		}
	}
	client, err := connector.RegistryClient(src, ep.conn, *a.registry, ca)
	if err != nil {
		return err
	}
	encode := func(line []byte) ([]byte, error) { return avro.Encode(schema, line) }
	switch c := client.(type) {
	case *schemaregistry.Confluent:
		subject := *a.subject
		if subject == "" {
			subject = ep.hub + "-value"
		}
		id, err := c.Register(ctx, subject, string(text))
		if err != nil {
			return fmt.Errorf("register in subject %q: %w", subject, err)
		}
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		opts.Encode = func(line []byte) ([]byte, error) {
			b, err := encode(line)
			if err != nil {
				return nil, err
			}
			return append(append([]byte{}, frame...), b...), nil
		}
	case *schemaregistry.Azure:
		if r.Group == "" {
			return errors.New("no schema group: give --schema-group, or registry.group in the connector")
		}
		named, ok := schema.(interface{ FullName() string })
		if !ok {
			return errors.New("the schema must be a named type (a record) to be registered in Azure Schema Registry")
		}
		name := named.FullName()
		id, err := c.Register(ctx, r.Group, name, string(text))
		if err != nil {
			return fmt.Errorf("register %s in group %q: %w", name, r.Group, err)
		}
		opts.ContentType = schemaregistry.AzureContentTypePrefix + id
		opts.Encode = encode
	}
	return nil
}
