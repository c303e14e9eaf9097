package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// deadLetterTableBefore is ehsink_dead_letters as releases up to 2dd8b5e
// created it: no content_type.
const deadLetterTableBefore = `CREATE TABLE ehsink_dead_letters (
	id bigserial PRIMARY KEY, connector text NOT NULL, namespace text NOT NULL, eventhub text NOT NULL,
	consumer_group text NOT NULL, table_name text NOT NULL, partition_id text NOT NULL, sequence_number bigint NOT NULL,
	"offset" text NOT NULL, enqueued_time timestamptz, partition_key text, properties jsonb, body bytea,
	reason text NOT NULL, failed_at timestamptz NOT NULL)`

// TestDeadLetterKeepsTheEventAsReceived: a dead letter is stored with what
// replaying its event needs (the body bytes as received, not a decoded
// form; the content type; the properties; the position and enqueued time)
// and with the reason, the connector, the time and the configuration
// revision that refused it, not yet replayed. The table is one an older
// release created without content_type, config_revision and replayed_at,
// with a letter in it:
// replicas starting together (their sinks racing to migrate it) all start,
// the column is added once, and the old letter stays.
func TestDeadLetterKeepsTheEventAsReceived(t *testing.T) {
	dsn := newDB(t)
	ctx := testCtx(t)
	execSQL(t, dsn, appendTable)
	execSQL(t, dsn, deadLetterTableBefore)
	execSQL(t, dsn, `INSERT INTO ehsink_dead_letters (connector, namespace, eventhub, consumer_group, table_name, partition_id,
		sequence_number, "offset", reason, failed_at) VALUES ('old', 'ns', 'orders', '$Default', 'orders', '0', 1, '1', 'before', now())`)

	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	built := make([]*sink, replicas)
	for i := range replicas {
		wg.Go(func() { built[i], errs[i] = newPostgresSink(ctx, appendConfig(t, dsn), testInfo) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: New over the older dead-letter table: %v", i, err)
		}
		t.Cleanup(func() { built[i].Close(context.Background()) })
	}

	w, _, err := built[0].Open(ctx, "3")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	raw := []byte{0, 0, 0, 0, 7, 0x02, 0xff, 0x00} // Confluent framing, schema 7: not JSON, not text
	ct := "avro/binary+7f3c"
	ev := sinktest.Event("3", 41)
	ev.Offset = "8192"
	ev.ContentType = &ct
	ev.Properties = map[string]any{"tenant": "t1", "n": int64(2)}
	ev.RawBody = raw // what the runner's Avro decoding leaves: Body is the JSON
	at := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	letter := sinks.DeadLetter{Event: ev.Received(), Reason: `column "amount": 123456.78 does not fit numeric(5,2)`, FailedAt: at}
	if err := w.(sinks.DeadLetterer).DeadLetter(deadletters.WithRevision(ctx, "0123456789ab"), []sinks.DeadLetter{letter}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var (
		connector, partition, offset, reason string
		seq                                  int64
		enqueued, failed                     time.Time
		contentType, revision                *string
		replayed                             *time.Time
		props                                []byte
		body                                 []byte
	)
	err = conn.QueryRow(ctx, `SELECT connector, partition_id, sequence_number, "offset", enqueued_time, content_type, properties, body, reason, failed_at,
		config_revision, replayed_at FROM ehsink_dead_letters WHERE connector <> 'old'`).Scan(&connector, &partition, &seq, &offset, &enqueued,
		&contentType, &props, &body, &reason, &failed, &revision, &replayed)
	if err != nil {
		t.Fatalf("read the dead letter: %v", err)
	}
	if connector != testInfo.Connector || partition != "3" || seq != 41 || offset != "8192" || !enqueued.Equal(ev.EnqueuedTime) ||
		reason != letter.Reason || !failed.Equal(at) {
		t.Errorf("letter: connector %q partition %q seq %d offset %q enqueued %s reason %q failed %s, want %q 3 41 8192 %s %q %s",
			connector, partition, seq, offset, enqueued, reason, failed, testInfo.Connector, ev.EnqueuedTime, letter.Reason, at)
	}
	if contentType == nil || *contentType != ct {
		t.Errorf("content_type %v, want %q", contentType, ct)
	}
	if revision == nil || *revision != "0123456789ab" || replayed != nil {
		t.Errorf("config_revision %v, replayed_at %v; want the revision the context carried, not replayed", revision, replayed)
	}
	if string(body) != string(raw) {
		t.Errorf("body %x, want the bytes as received %x", body, raw)
	}
	var gotProps map[string]any
	if err := json.Unmarshal(props, &gotProps); err != nil || gotProps["tenant"] != "t1" || gotProps["n"] != float64(2) {
		t.Errorf("properties %s (%v), want tenant t1 and n 2", props, err)
	}
	var old int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM ehsink_dead_letters WHERE connector = 'old' AND content_type IS NULL`).Scan(&old); err != nil || old != 1 {
		t.Errorf("the older release's letter: %d rows, %v; want it kept, with no content type", old, err)
	}
}
