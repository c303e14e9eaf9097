package connector

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
)

// The body formats of `source.format`.
const (
	FormatJSON = "json"
	FormatAvro = "avro"
)

// The registry types of `source.registry.type`.
const (
	RegistryAzure     = "azure"
	RegistryConfluent = "confluent"
)

// registryScope is the Entra ID scope of Azure Schema Registry (the Event
// Hubs namespace's).
const registryScope = "https://eventhubs.azure.net/.default"

// RegistrySpec is the schema registry of a connector whose events are
// Avro (`source.format: avro`).
type RegistrySpec struct {
	// Type is azure (the namespace's Azure Schema Registry: the schema id
	// is in the event's content type, avro/binary+ID) or confluent (a
	// Confluent-compatible registry: the body starts with byte 0 and the
	// 4-byte id). Required.
	Type string `yaml:"type"`
	// Group is the Azure schema group the producers register their
	// schemas in (`ehsink send --avro` registers there). Decoding needs
	// only the id each event carries.
	Group string `yaml:"group"`
	// URL is the registry's address. If empty: with `connection:
	// emulator`, the built-in emulator's registry (either type); else with
	// azure the source's namespace (https://NAMESPACE); confluent requires
	// it.
	URL string `yaml:"url"`
	// Username and Password are the basic-auth credentials of a confluent
	// registry (write them as ${VAR}). An azure registry uses the
	// source's credentials: the connection string's key (a SAS token) or,
	// with namespace, Entra ID.
	Username secret.String `yaml:"username"`
	// Password: see Username.
	Password secret.String `yaml:"password"`
	// CAFile is a PEM file of the certificate authorities to trust
	// besides the system's (a registry with its own certificate). The
	// built-in emulator's is trusted without it.
	CAFile string `yaml:"ca_file"`
	// ReaderSchema, if set, is a file holding an Avro schema every event
	// is resolved into (Avro schema resolution: fields the writer lacks
	// take the reader's default): the mapping then sees one shape
	// whatever version wrote the event. If empty, each event is read
	// with the schema it was written with.
	ReaderSchema string `yaml:"reader_schema"`
	// Subject names the schema `columns: auto` derives a sink's columns
	// from, without a reader_schema: its newest version in group (azure),
	// or the subject's latest (confluent, such as HUB-value).
	Subject string `yaml:"subject"`
	// CacheSize bounds the schemas kept in memory. If zero, 1000.
	CacheSize int `yaml:"cache_size"`
}

// validateFormat checks source.format and source.registry.
func (s *SourceSpec) validateFormat(path string, p *problems) {
	switch s.Format {
	case "", FormatJSON:
		if s.Registry != nil {
			p.add(path+".registry", "used only with format: avro")
		}
		return
	case FormatAvro:
	default:
		p.add(path+".format", "%q: want json or avro", s.Format)
		return
	}
	r := s.Registry
	if r == nil {
		p.add(path+".registry", "required with format: avro (type: azure or confluent)")
		return
	}
	path += ".registry"
	switch r.Type {
	case RegistryAzure:
		if r.Username != "" || r.Password != "" {
			p.add(path+".username", "an azure registry uses the source's credentials; username and password are for confluent")
		}
	case RegistryConfluent:
		if r.URL == "" && s.Connection.Reveal() != EmulatorConnection {
			p.add(path+".url", "required with type confluent (http(s)://HOST:PORT)")
		}
		if (r.Username == "") != (r.Password == "") {
			p.add(path+".password", "username and password go together")
		}
	case "":
		p.add(path+".type", "required: azure or confluent")
	default:
		p.add(path+".type", "%q: want azure or confluent", r.Type)
	}
	if r.URL != "" {
		if u, err := url.Parse(r.URL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			p.add(path+".url", "%q: want http(s)://HOST[:PORT]", r.URL)
		}
	}
	if r.CAFile != "" {
		if b, err := os.ReadFile(r.CAFile); err != nil {
			p.add(path+".ca_file", "%v", err)
		} else if _, err := schemaregistry.HTTPClient(b); err != nil {
			p.add(path+".ca_file", "%s: %v", r.CAFile, err)
		}
	}
	if r.ReaderSchema != "" {
		if _, err := readSchemaFile(r.ReaderSchema); err != nil {
			p.add(path+".reader_schema", "%v", err)
		}
	}
	if r.CacheSize < 0 {
		p.add(path+".cache_size", "must not be negative, got %d", r.CacheSize)
	}
}

func readSchemaFile(name string) (hamba.Schema, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	s, err := avro.ParseSchema(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// registryEmulator is implemented by an in-process emulator that serves
// a schema registry: its address and the certificate to trust.
type registryEmulator interface {
	SchemaRegistryAddr() string
	CertificatePEM() []byte
}

// newDecoder builds the Avro decoder of a connector, or nil for JSON
// events. conn is the connection string dialled (the emulator's for
// `connection: emulator`).
func newDecoder(spec Spec, conn secret.String, env *environment) (*schemaregistry.Decoder, error) {
	src := spec.Source
	if src.Format != FormatAvro || src.Registry == nil {
		return nil, nil
	}
	r := src.Registry
	var (
		endpoint string
		ca       []byte
	)
	if r.URL == "" && src.Connection.Reveal() == EmulatorConnection {
		emu, ok := env.emu.(registryEmulator)
		if !ok || emu.SchemaRegistryAddr() == "" {
			return nil, errors.New("the emulator serves no schema registry (emulator.schema_registry)")
		}
		endpoint, ca = "https://"+emu.SchemaRegistryAddr(), emu.CertificatePEM()
	}
	reg, err := RegistryClient(src, conn, endpoint, ca)
	if err != nil {
		return nil, err
	}
	framing := schemaregistry.FramingAzure
	if r.Type == RegistryConfluent {
		framing = schemaregistry.FramingConfluent
	}
	var reader hamba.Schema
	if r.ReaderSchema != "" {
		if reader, err = readSchemaFile(r.ReaderSchema); err != nil {
			return nil, fmt.Errorf("reader_schema: %w", err)
		}
	}
	return schemaregistry.NewDecoder(schemaregistry.Options{Registry: reg, Framing: framing, Reader: reader, CacheSize: r.CacheSize})
}

// RegistryClient returns the client of a source's registry
// (src.Registry, which must be set): a *schemaregistry.Confluent or a
// *schemaregistry.Azure with the source's credentials, conn being the
// connection string dialled (empty with a namespace). endpoint, when not
// empty, is used instead of the registry's url, and ca is trusted besides
// its ca_file (the emulator's registry). `ehsink send --avro` registers
// its schemas through it.
func RegistryClient(src SourceSpec, conn secret.String, endpoint string, ca []byte) (schemaregistry.Client, error) {
	r := src.Registry
	if endpoint == "" {
		endpoint = r.URL
	}
	if r.CAFile != "" {
		b, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, err
		}
		ca = append(append([]byte{}, ca...), b...)
	}
	hc, err := schemaregistry.HTTPClient(ca)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	if r.Type == RegistryConfluent {
		return schemaregistry.NewConfluent(endpoint, r.Username, r.Password, hc)
	}
	var tok schemaregistry.TokenSource
	if conn != "" {
		props, err := connstr.EventHubs(conn.Reveal())
		if err != nil {
			return nil, err
		}
		if endpoint == "" {
			endpoint = "https://" + props.FullyQualifiedNamespace
		}
		switch {
		case props.SharedAccessKey != nil && props.SharedAccessKeyName != nil:
			tok = schemaregistry.SASToken(endpoint, *props.SharedAccessKeyName, secret.String(*props.SharedAccessKey))
		case props.SharedAccessSignature != nil:
			sas := *props.SharedAccessSignature
			tok = func(context.Context) (string, error) { return sas, nil }
		}
	} else {
		if endpoint == "" {
			endpoint = "https://" + src.Namespace
		}
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("credential: %w", err)
		}
		tok = func(ctx context.Context) (string, error) {
			t, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{registryScope}})
			return t.Token, err
		}
	}
	return schemaregistry.NewAzure(endpoint, tok, hc)
}

// decode replaces an Avro body by its JSON, appended to the buffer the
// partition reuses batch after batch (sinks do not keep bodies past Write;
// a body sliced out of the buffer stays valid while the buffer grows, as
// append leaves the old array as it was). The error of an event that
// cannot be decoded is returned as poison, its body left as it came. A
// registry that cannot be reached is waited out with the retry backoff
// while the partition heartbeats; only ctx ends the wait (err).
func (pr *partitionRun) decode(ctx context.Context, ev *sinks.Event) (poison, err error) {
	if len(ev.Body) == 0 {
		// No value to decode: a tombstone (a Kafka producer's delete of its
		// key) is handed on as it is, as a JSON connector hands it on.
		return nil, nil
	}
	dec := pr.r.opts.Decoder
	waits := backoff.Backoff{Initial: pr.r.opts.Retry.InitialBackoff, Max: pr.r.opts.Retry.MaxBackoff}
	for attempt := 1; ; attempt++ {
		start := len(pr.decoded)
		out, derr := dec.AppendJSON(ctx, ev.ContentType, ev.Body, pr.decoded)
		if derr == nil {
			pr.decoded = out
			// The bytes as received stay with the event: a dead letter
			// keeps them, not the JSON (sinks.Event.RawBody).
			ev.RawBody = ev.Body
			ev.Body = out[start:len(out):len(out)]
			if a := pr.r.opts.auto; a != nil {
				// AppendJSON cached the writer schema: no registry call.
				if id, w, err := dec.Writer(ctx, ev.ContentType, ev.RawBody); err == nil && a.grows(id, w) {
					return nil, pr.r.errorf(pr.src, "seq %d schema %s: %w", ev.SequenceNumber, id, errColumnsGrew)
				}
			}
			return nil, nil
		}
		if errors.Is(derr, schemaregistry.ErrPoison) {
			return derr, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last schema registry error: %w)", ctx.Err(), derr)
		}
		wait := waits.Jittered()
		pr.log.Warn("schema registry unavailable; retrying", "seq", ev.SequenceNumber, "attempt", attempt, "wait", wait, "error", derr)
		if !sleepOrChange(ctx, wait, nil, pr.beat) {
			return nil, fmt.Errorf("%w (last schema registry error: %w)", ctx.Err(), derr)
		}
	}
}

// formatAttrs names the format for the connector's start line.
func formatAttrs(src SourceSpec) []any {
	if src.Format != FormatAvro || src.Registry == nil {
		return nil
	}
	return []any{"format", FormatAvro, "registry", strings.TrimSpace(src.Registry.Type)}
}

// readsEmulatorRegistry reports whether s reads Avro events whose schemas
// are in the built-in emulator's registries.
func readsEmulatorRegistry(s Spec) bool {
	r := s.Source.Registry
	return s.Source.Format == FormatAvro && r != nil && r.URL == "" && s.Source.Connection.Reveal() == EmulatorConnection
}
