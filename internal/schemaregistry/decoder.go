package schemaregistry

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/avro"
)

// Framing says where an event carries its schema id.
type Framing uint8

const (
	// FramingAzure: the content type avro/binary+<id> (Azure Schema
	// Registry's serializers), the body is the Avro value.
	FramingAzure Framing = iota + 1
	// FramingConfluent: byte 0, the id as 4 bytes big-endian, then the
	// Avro value (Confluent's serializers, Kafka clients).
	FramingConfluent
)

// ErrPoison is matched by every [PoisonError].
var ErrPoison = errors.New("undecodable Avro event")

// PoisonError is the error of an event that cannot be decoded whatever
// the registry answers later: it goes to the dead letters.
type PoisonError struct {
	Reason string
	Err    error
}

func (e *PoisonError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap returns ErrPoison and the cause.
func (e *PoisonError) Unwrap() []error { return []error{ErrPoison, e.Err} }

// DefaultCacheSize is the number of schemas a Decoder keeps when its
// options say none.
const DefaultCacheSize = 1000

// unknownFor is how long an id the registry does not know is answered
// from the cache, so that a run of poison events does not ask once each.
const unknownFor = 30 * time.Second

// Options configure a Decoder.
type Options struct {
	// Registry fetches the schemas. Required.
	Registry Client
	// Framing says where the schema id is. Required.
	Framing Framing
	// Reader, if not nil, is the schema every body is resolved into (its
	// fields are what the mapping sees); if nil, each body is read with
	// its writer schema.
	Reader hamba.Schema
	// CacheSize bounds the schemas kept (least recently used go first).
	// If zero, DefaultCacheSize.
	CacheSize int
	// now is the clock of the unknown-id entries; nil: time.Now.
	now func() time.Time
}

// Decoder decodes the Avro events of a connector. It is safe for
// concurrent use: the partitions of a connector share one, and one fetch
// serves every partition waiting for the same id.
type Decoder struct {
	opts Options

	mu      sync.Mutex // guards entries and lru
	entries map[string]*list.Element
	lru     list.List // of *entry, most recent first
}

type entry struct {
	id    string
	ready chan struct{} // closed once prog or err is set
	prog  *avro.Program
	// writer is the schema prog reads (set with prog).
	writer hamba.Schema
	err    error // a *PoisonError (nil while fetching or with prog)
	// transient is the registry's error of a failed fetch (prog and err
	// nil); the entry is then forgotten.
	transient error
	until     time.Time
}

// NewDecoder returns a decoder.
func NewDecoder(o Options) (*Decoder, error) {
	if o.Registry == nil || (o.Framing != FramingAzure && o.Framing != FramingConfluent) {
		return nil, errors.New("schemaregistry: a decoder needs a registry and a framing")
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.now == nil {
		o.now = time.Now
	}
	return &Decoder{opts: o, entries: map[string]*list.Element{}}, nil
}

// Registry returns the registry the decoder fetches schemas from.
func (d *Decoder) Registry() Client { return d.opts.Registry }

// AzureContentTypePrefix starts the content type of an Azure Schema
// Registry Avro event; the schema id follows.
const AzureContentTypePrefix = "avro/binary+"

// SchemaID returns the schema id of an event and its Avro value.
func (d *Decoder) SchemaID(contentType *string, body []byte) (id string, value []byte, err error) {
	switch d.opts.Framing {
	case FramingAzure:
		if contentType == nil {
			return "", nil, &PoisonError{Reason: "no content type: want avro/binary+<schema id> (Azure Schema Registry)"}
		}
		ct := strings.TrimSpace(*contentType)
		if len(ct) <= len(AzureContentTypePrefix) || !strings.EqualFold(ct[:len(AzureContentTypePrefix)], AzureContentTypePrefix) {
			return "", nil, &PoisonError{Reason: fmt.Sprintf("content type %q: want avro/binary+<schema id> (Azure Schema Registry)", ct)}
		}
		return ct[len(AzureContentTypePrefix):], body, nil
	default:
		if len(body) < 5 || body[0] != 0 {
			return "", nil, &PoisonError{Reason: "no Confluent framing: want magic byte 0 and a 4-byte schema id before the Avro value"}
		}
		return strconv.FormatUint(uint64(binary.BigEndian.Uint32(body[1:5])), 10), body[5:], nil
	}
}

// AppendJSON appends the JSON of an event's Avro value to dst. A
// *PoisonError belongs to the event; any other error is the registry's,
// transient (dst is then as it was).
func (d *Decoder) AppendJSON(ctx context.Context, contentType *string, body, dst []byte) ([]byte, error) {
	id, value, err := d.SchemaID(contentType, body)
	if err != nil {
		return dst, err
	}
	prog, err := d.program(ctx, id)
	if err != nil {
		return dst, err
	}
	out, err := prog.AppendJSON(dst, value)
	if err != nil {
		return dst, &PoisonError{Reason: "schema " + id, Err: err}
	}
	return out, nil
}

// Writer returns the schema id of an event and the schema it was written
// with, as AppendJSON finds them (from the cache after AppendJSON decoded
// the event). Errors are AppendJSON's.
func (d *Decoder) Writer(ctx context.Context, contentType *string, body []byte) (string, hamba.Schema, error) {
	id, _, err := d.SchemaID(contentType, body)
	if err != nil {
		return "", nil, err
	}
	e, err := d.ready(ctx, id)
	if err != nil {
		return "", nil, err
	}
	return id, e.writer, nil
}

// program returns the compiled program of id, from the cache or the
// registry.
func (d *Decoder) program(ctx context.Context, id string) (*avro.Program, error) {
	e, err := d.ready(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.prog, nil
}

// ready returns the entry of id once it holds a program, or its error.
func (d *Decoder) ready(ctx context.Context, id string) (*entry, error) {
	e, fetch := d.lookup(id)
	if fetch {
		d.fetch(ctx, e)
	}
	select {
	case <-e.ready: // a schema in the cache decodes whatever ctx says
	default:
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e.prog == nil && e.err == nil {
		// The fetch failed and the entry is forgotten: the next call
		// (the caller's retry) asks the registry again.
		return nil, e.transient
	}
	if e.err != nil {
		return nil, e.err
	}
	return e, nil
}

// lookup returns the entry of id, creating it (fetch true: the caller
// fetches it) when there is none usable.
func (d *Decoder) lookup(id string) (*entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.entries[id]; ok {
		e := el.Value.(*entry)
		if e.until.IsZero() || d.opts.now().Before(e.until) {
			d.lru.MoveToFront(el)
			return e, false
		}
		d.lru.Remove(el)
		delete(d.entries, id)
	}
	e := &entry{id: id, ready: make(chan struct{})}
	d.entries[id] = d.lru.PushFront(e)
	for d.lru.Len() > d.opts.CacheSize {
		old := d.lru.Back()
		d.lru.Remove(old)
		delete(d.entries, old.Value.(*entry).id)
	}
	return e, true
}

func (d *Decoder) fetch(ctx context.Context, e *entry) {
	defer close(e.ready)
	text, err := d.opts.Registry.Schema(ctx, e.id)
	switch {
	case errors.Is(err, ErrUnknownSchema):
		e.err = &PoisonError{Reason: "schema " + e.id, Err: err}
		d.mu.Lock()
		e.until = d.opts.now().Add(unknownFor)
		d.mu.Unlock()
		return
	case err != nil:
		// Transient: forget the entry, so that the next event asks again.
		e.transient = fmt.Errorf("fetch schema %s: %w", e.id, err)
		d.forget(e)
		return
	}
	w, err := avro.ParseSchema(text)
	if err != nil {
		e.err = &PoisonError{Reason: "schema " + e.id + " is not a valid Avro schema", Err: err}
		return
	}
	prog, err := avro.Compile(w, d.opts.Reader)
	if err != nil {
		e.err = &PoisonError{Reason: "schema " + e.id, Err: err}
		return
	}
	e.prog, e.writer = prog, w
}

func (d *Decoder) forget(e *entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.entries[e.id]; ok && el.Value.(*entry) == e {
		d.lru.Remove(el)
		delete(d.entries, e.id)
	}
}
