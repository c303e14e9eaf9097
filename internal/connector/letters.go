package connector

import (
	"context"
	"errors"
	"fmt"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/sinks"
)

// LetterReplayer returns the replayer of spec's letters in store: each
// letter's event is decoded with dec (the connector's Avro decoder; nil
// for JSON events) as the running connector decodes it before its filter,
// then judged by spec's filter.
func LetterReplayer(spec *Spec, store deadletters.Store, dec *schemaregistry.Decoder) deadletters.Replayer {
	format := ChangeEvents(spec.Sink.Config)
	r := deadletters.Replayer{
		Store:    store,
		Revision: spec.Revision(),
		Keep:     func(ev *sinks.Event) (bool, error) { return spec.Filter.Keeps(ev, format) },
	}
	if dec != nil {
		r.Prepare = func(ctx context.Context, ev *sinks.Event) (string, error) { return decodeLetter(ctx, dec, ev) }
	}
	return r
}

// decodeLetter replaces a letter's Avro body by its JSON, keeping the
// bytes in RawBody as the runner's decode does. An event the registry's
// answer cannot decode (a schema it still does not know) is refused with
// the reason the runner gave it; a registry that cannot be reached is
// the error: the replay stops rather than mark letters with an outage.
func decodeLetter(ctx context.Context, dec *schemaregistry.Decoder, ev *sinks.Event) (refused string, err error) {
	if len(ev.Body) == 0 {
		return "", nil // a tombstone, handed on as the runner hands it on
	}
	out, err := dec.AppendJSON(ctx, ev.ContentType, ev.Body, nil)
	if errors.Is(err, schemaregistry.ErrPoison) {
		return err.Error(), nil
	}
	if err != nil {
		return "", fmt.Errorf("schema registry: %w", err)
	}
	ev.RawBody, ev.Body = ev.Body, out
	return "", nil
}

// ReplayDecoder returns spec's Avro decoder for a replay outside the
// running process (`ehsink deadletters replay`), or nil for JSON events.
// The built-in emulator's registry lives in the process that runs it: a
// connector reading it replays through that process's operations API.
func ReplayDecoder(spec *Spec) (*schemaregistry.Decoder, error) {
	if spec.Source.Format != FormatAvro {
		return nil, nil
	}
	if spec.Source.Connection.Reveal() == EmulatorConnection {
		if readsEmulatorRegistry(*spec) {
			return nil, errors.New("source.registry: the built-in emulator's registry is served by the `ehsink run` process: " +
				"replay through its operations API (POST /v1/connectors/" + spec.Name + "/deadletters/replay)")
		}
		return newDecoder(*spec, "", &environment{})
	}
	return newDecoder(*spec, spec.Source.Connection, &environment{})
}
