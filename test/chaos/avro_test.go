package chaos_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	hamba "github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/schemaregistry"
)

// The Avro part of the matrix: a second hub whose events are Avro, written
// with schema v1 and, from the middle of act 1 on, with v2, which adds a
// field with a default. The connector pg-auto (PostgreSQL append, columns:
// auto) derives its columns from the registry's newest schema: a replica
// started before v2 meets a v2 event, restarts the connector and adds the
// column before writing it; one started after creates or finds the column
// at its start. Either way, kills, restarts and cuts included, every event
// is a row once, tag set for v2 events and null for v1 ones.
const (
	avroHub     = "events"
	schemaGroup = "chaos"
	schemaName  = "chaos.Event"
	autoTable   = "chaos_auto"
	avroV1      = `{"type":"record","name":"Event","namespace":"chaos","fields":[
 {"name":"id","type":"string"},
 {"name":"n","type":"long"}]}`
	avroV2 = `{"type":"record","name":"Event","namespace":"chaos","fields":[
 {"name":"id","type":"string"},
 {"name":"n","type":"long"},
 {"name":"tag","type":"string","default":"none"}]}`
	// avroShare: the Avro hub gets a quarter of the JSON hub's events, on
	// the same schedule (a sixth connector on two shared cores).
	avroShare = 4
)

// hubOf is the hub a connector reads.
func hubOf(conn string) string {
	if conn == connAuto {
		return avroHub
	}
	return hubName
}

// hubConn is the connection string of an emulator hub.
func (e *emulatorProc) hubConn(hub string) string {
	return strings.Replace(e.conn, "EntityPath="+hubName+";", "EntityPath="+hub+";", 1)
}

// avroValues are the values of the idx-th event of a partition: a function
// of its place, so the checks recompute them.
func avroValues(pid string, idx int) (id string, n int64, tag string) {
	p, _ := strconv.Atoi(pid)
	return fmt.Sprintf("a%s-%07d", pid, idx), int64(idx)*1000 + int64(p), fmt.Sprintf("t%s-%d", pid, idx%97)
}

// avroIndex parses an id of avroValues.
func avroIndex(id string) (pid string, idx int, ok bool) {
	pid, rest, found := strings.Cut(strings.TrimPrefix(id, "a"), "-")
	idx, err := strconv.Atoi(rest)
	return pid, idx, found && strings.HasPrefix(id, "a") && err == nil
}

// registry is the emulator's Azure Schema Registry, its certificate trusted.
func (h *harness) registry() (*schemaregistry.Azure, error) {
	ca, err := os.ReadFile(h.emu.caFile)
	if err != nil {
		return nil, err
	}
	hc, err := schemaregistry.HTTPClient(ca)
	if err != nil {
		return nil, err
	}
	return schemaregistry.NewAzure(h.emu.registry, nil, hc)
}

// avroProducer sends perPart events to each partition of the Avro hub over
// duration, as producer does (one goroutine per partition, a failed send
// retried with the same events), switching from v1 to v2 at switchAt.
type avroProducer struct {
	sender
	reg        *schemaregistry.Azure
	partitions []string
	perPart    int
	duration   time.Duration
	switchAt   time.Duration // after the producer's start
	v1, v2     hamba.Schema
	v1ID       string

	once  sync.Once
	mu    sync.Mutex // guards the fields below
	v2ID  string
	v2At  time.Time // when v2 was registered
	v2Err error
	inV2  int // events sent with v2
}

func newAvroProducer(ctx context.Context, h *harness, client *azeventhubs.ProducerClient, perPart int, duration time.Duration) (*avroProducer, error) {
	reg, err := h.registry()
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	p := &avroProducer{sender: sender{client: client}, reg: reg, partitions: h.parts, perPart: perPart, duration: duration,
		switchAt: h.k.duration / 2}
	if p.v1, err = avro.ParseSchema(avroV1); err != nil {
		return nil, err
	}
	if p.v2, err = avro.ParseSchema(avroV2); err != nil {
		return nil, err
	}
	// v1 before any replica starts: pg-auto waits for its subject's first
	// schema, holding no partition, until one is registered.
	if p.v1ID, err = reg.Register(ctx, schemaGroup, schemaName, avroV1); err != nil {
		return nil, fmt.Errorf("register v1: %w", err)
	}
	return p, nil
}

func (p *avroProducer) run(ctx context.Context) error {
	return eachPartition(p.partitions, func(idx int, pid string) error {
		return paced(ctx, p.perPart, p.duration, func(start time.Time, next, n int) error { return p.sendBatch(ctx, start, pid, next, n) })
	})
}

// registerV2 registers v2, retrying until the registry takes it; every
// batch from the first call on is written with it.
func (p *avroProducer) registerV2(ctx context.Context) {
	p.once.Do(func() {
		for {
			id, err := p.reg.Register(ctx, schemaGroup, schemaName, avroV2)
			p.mu.Lock()
			p.v2ID, p.v2Err, p.v2At = id, err, time.Now()
			p.mu.Unlock()
			if err == nil || ctx.Err() != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

func (p *avroProducer) sendBatch(ctx context.Context, start time.Time, pid string, next, n int) error {
	v2 := time.Since(start) >= p.switchAt
	schema, id := p.v1, p.v1ID
	if v2 {
		p.registerV2(ctx)
		p.mu.Lock()
		schema, id = p.v2, p.v2ID
		err := p.v2Err
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("register v2: %w", err)
		}
	}
	ct := schemaregistry.AzureContentTypePrefix + id
	evs := make([]*azeventhubs.EventData, 0, n)
	ids := make([]string, 0, n)
	for i := next; i < next+n; i++ {
		eid, num, tag := avroValues(pid, i)
		line := fmt.Appendf(nil, `{"id":%q,"n":%d}`, eid, num)
		if v2 {
			line = fmt.Appendf(nil, `{"id":%q,"n":%d,"tag":%q}`, eid, num, tag)
		}
		b, err := avro.Encode(schema, line)
		if err != nil {
			return fmt.Errorf("encode %s: %w", eid, err)
		}
		evs = append(evs, &azeventhubs.EventData{Body: b, ContentType: &ct})
		ids = append(ids, eid)
	}
	if err := p.send(ctx, pid, evs, ids); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v2 {
		p.inV2 += n
	}
	return nil
}

// avroEvent is an event read back from the Avro hub, decoded with its
// writer schema by hamba/avro (not ehsink's decoder).
type avroEvent struct {
	pos
	v2  bool
	id  string
	n   int64
	tag string
}

// readAvroHub reads the Avro hub back and checks each event holds the
// values of its index, written with v1 or v2.
func (h *harness) readAvroHub(ctx context.Context, ap *avroProducer) ([]avroEvent, error) {
	ap.mu.Lock()
	v2ID := ap.v2ID
	ap.mu.Unlock()
	var out []avroEvent
	var bad []string
	err := h.readPartitions(ctx, avroHub, func(p string, e *azeventhubs.ReceivedEventData) {
		ev := avroEvent{pos: pos{p, e.SequenceNumber}}
		schema := ap.v1
		switch ct := deref(e.ContentType); ct {
		case schemaregistry.AzureContentTypePrefix + ap.v1ID:
		case schemaregistry.AzureContentTypePrefix + v2ID:
			ev.v2, schema = true, ap.v2
		default:
			bad = append(bad, fmt.Sprintf("p%s/%d: content type %q is neither v1's nor v2's", p, e.SequenceNumber, ct))
			return
		}
		var rec struct {
			ID  string `avro:"id"`
			N   int64  `avro:"n"`
			Tag string `avro:"tag"`
		}
		if err := hamba.Unmarshal(schema, e.Body, &rec); err != nil {
			bad = append(bad, fmt.Sprintf("p%s/%d: %v", p, e.SequenceNumber, err))
			return
		}
		ev.id, ev.n, ev.tag = rec.ID, rec.N, rec.Tag
		pid, idx, ok := avroIndex(rec.ID)
		id, n, tag := avroValues(pid, idx)
		if !ok || pid != p || rec.ID != id || rec.N != n || ev.v2 && rec.Tag != tag {
			bad = append(bad, fmt.Sprintf("p%s/%d: %+v is not the event of its id", p, e.SequenceNumber, rec))
		}
		out = append(out, ev)
	})
	if len(bad) > 0 {
		h.fail("the Avro hub holds %d events unlike what was sent: %s", len(bad), head(bad, 10))
	}
	return out, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// autoStats is what the checks found of the schema change.
type autoStats struct {
	v1, v2     int      // the hub's events by schema
	ackedLost  int      // acknowledged events the hub lacks
	columns    []string // the table's columns, in order
	v2At       time.Time
	wrongValue []string
}

// compareAuto checks pg-auto's table against the Avro hub: every event
// once (compareRows), n as sent, tag as sent for a v2 event and null for a
// v1 one.
func (h *harness) compareAuto(ctx context.Context, conn *pgx.Conn, events []avroEvent, ap *avroProducer, res *results) {
	st := &res.auto
	ap.mu.Lock()
	st.v2At = ap.v2At
	ap.mu.Unlock()
	want := map[pos]bool{}
	byPos := map[pos]*hubEvent{}
	byAvro := map[pos]*avroEvent{}
	ids := map[string]int{}
	for i := range events {
		e := &events[i]
		want[e.pos] = true
		byPos[e.pos] = &hubEvent{pos: e.pos, body: body{ID: e.id}}
		byAvro[e.pos] = e
		ids[e.id]++
		if e.v2 {
			st.v2++
		} else {
			st.v1++
		}
	}
	if lost := ap.lost(ids); len(lost) > 0 {
		st.ackedLost = len(lost)
		h.fail("the Avro hub lost %d events it had acknowledged to the producer: %s", len(lost), head(lost, 20))
	}
	if st.v1 == 0 || st.v2 == 0 {
		h.fail("%s: the hub holds %d v1 and %d v2 events: no schema change mid-run", connAuto, st.v1, st.v2)
	}
	cols, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`, autoTable)
	if err == nil {
		for cols.Next() {
			var c string
			if err = cols.Scan(&c); err != nil {
				break
			}
			st.columns = append(st.columns, c)
		}
		cols.Close()
	}
	if err != nil {
		h.fail("reading %s's columns: %v", autoTable, err)
		return
	}
	rows, err := conn.Query(ctx, `SELECT "partition", seq, id, n, tag FROM `+autoTable)
	if err != nil {
		h.fail("reading %s: %v", autoTable, err)
		return
	}
	var got []row
	for rows.Next() {
		var r row
		var n *int64
		var tag *string
		if err := rows.Scan(&r.part, &r.seq, &r.id, &n, &tag); err != nil {
			rows.Close()
			h.fail("reading %s: %v", autoTable, err)
			return
		}
		got = append(got, r)
		e := byAvro[r.pos]
		if e == nil || e.id != r.id {
			continue // compareRows says so
		}
		switch {
		case n == nil || *n != e.n:
			st.wrongValue = append(st.wrongValue, fmt.Sprintf("p%s/%d n %s, sent %d", r.part, r.seq, ptrText(n), e.n))
		case e.v2 && (tag == nil || *tag != e.tag):
			st.wrongValue = append(st.wrongValue, fmt.Sprintf("p%s/%d (v2) tag %s, sent %q", r.part, r.seq, ptrText(tag), e.tag))
		case !e.v2 && tag != nil:
			st.wrongValue = append(st.wrongValue, fmt.Sprintf("p%s/%d (v1) tag %s, want null", r.part, r.seq, ptrText(tag)))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		h.fail("reading %s: %v", autoTable, err)
		return
	}
	res.byConn[connAuto] = h.compareRows(connAuto, want, got, byPos)
	if len(st.wrongValue) > 0 {
		h.fail("%s: %d rows whose values are not their event's: %s", connAuto, len(st.wrongValue), head(st.wrongValue, 10))
	}
}

func ptrText[T any](v *T) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", fmt.Sprint(*v))
}

// writeCertificate writes a self-signed certificate for 127.0.0.1 and its
// key under dir, for the emulator's schema registry: its clients trust
// the certificate itself.
func writeCertificate(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "ehsink chaos registry"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "registry-cert.pem"), filepath.Join(dir, "registry-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
