package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/schemaregistry"
)

// avroOrders reads Avro orders (the emulator's Azure Schema Registry)
// into a table the test makes, whose CHECK refuses amounts of 100 and
// more.
const avroOrders = `
    sink:
      type: postgres
      dsn: "${DSN}"
      table: orders
      columns:
        order_id: {from: $.order_id, type: text}
        amount: {from: $.amount, type: integer}
        part: {from: "@partition", type: text}
        seq: {from: "@sequence_number", type: bigint}
`

// TestDeadLettersReplayAction: a running Avro connector stores two dead
// letters, a row the table's CHECK refuses and an event whose schema id
// the registry does not know. The status counts them by reason and the
// gauge says 2 pending. The replay action needs the token; a dry run says
// both would fail again and writes nothing. Once the CHECK is dropped, a
// replay beside the live connector decodes the refused letter's Avro bytes
// with the connector's registry and writes its row; the other fails again
// with the reason it had. The counts follow: 1 pending, 1 replayed.
func TestDeadLettersReplayAction(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const token = "replay-token"
	r := startRigWith(t, ctx, rigSetup{registry: true, token: token, connector: avroOrders, sharedPostgres: true,
		source: `
      format: avro
      registry: {type: azure, url: "${REGISTRY}", ca_file: "${CA}"}`,
		before: func(r *rig) {
			db := r.db(t, ctx)
			if _, err := db.Exec(ctx, `CREATE TABLE orders (order_id text, amount integer CONSTRAINT small CHECK (amount < 100), part text, seq bigint)`); err != nil {
				t.Fatal(err)
			}
		}})

	hc, err := schemaregistry.HTTPClient(r.emu.CertificatePEM())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemaregistry.NewAzure(r.emu.SchemaRegistryAddr(), nil, hc)
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"string"},{"name":"amount","type":"int"}]}`
	id, err := reg.Register(ctx, "g", "Order", schema)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := avro.ParseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := r.producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: new("0")})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range []struct{ json, schemaID string }{
		{`{"order_id":"o-1","amount":5}`, id},
		{`{"order_id":"o-2","amount":500}`, id},
		{`{"order_id":"o-3","amount":7}`, "no-such-schema"},
	} {
		body, err := avro.Encode(parsed, []byte(ev.json))
		if err != nil {
			t.Fatal(err)
		}
		ct := schemaregistry.AzureContentTypePrefix + ev.schemaID
		if err := batch.AddEventData(&azeventhubs.EventData{Body: body, ContentType: &ct}, nil); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := r.producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}

	stored := func() map[string]float64 {
		t.Helper()
		families, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "ehsink_dead_letters_stored" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["connector"] == "orders-pg" {
					out[labels["state"]] = m.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	// The counts follow the letters stored and replayed, well before the
	// recount every minute.
	soon := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		t.Cleanup(cancel)
		return c
	}
	var st connector.ConnectorStatus
	eventually(t, soon(), "the status to count 2 pending letters by reason", func() bool {
		st = r.status(t)
		return st.DeadLetters != nil && st.DeadLetters.Pending == 2 && len(st.DeadLetters.Reasons) == 2
	})
	dl := st.DeadLetters
	var checkReason, schemaReason string
	for _, rc := range dl.Reasons {
		switch {
		case rc.Letters == 1 && strings.Contains(rc.Reason, "constraint small"):
			checkReason = rc.Reason
		case rc.Letters == 1 && strings.Contains(rc.Reason, "schema no-such-schema"):
			schemaReason = rc.Reason
		}
	}
	if checkReason == "" || schemaReason == "" || dl.Replayed != 0 || dl.Error != "" {
		t.Fatalf("dead letters %+v: want 1 refused by the CHECK, 1 of an unknown schema, none replayed", dl)
	}
	if got, want := stored(), map[string]float64{"pending": 2, "replayed": 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("ehsink_dead_letters_stored %v, want %v", got, want)
	}

	const path = "/v1/connectors/orders-pg/deadletters/replay"
	replay := func(body string) (res connector.ReplayResult) {
		t.Helper()
		code, out := r.call(t, "POST", path, body, token)
		if code != http.StatusOK {
			t.Fatalf("replay %s: %d %s", body, code, out)
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("replay %s: %v\n%s", body, err, out)
		}
		return res
	}
	if code, out := r.call(t, "POST", path, `{}`, ""); code != http.StatusUnauthorized {
		t.Errorf("replay without the token: %d %s, want 401", code, out)
	}
	if code, out := r.call(t, "POST", path, `{"reasons":"x"}`, token); code != http.StatusBadRequest || !strings.Contains(string(out), "reasons") {
		t.Errorf("replay with a misspelt filter: %d %s, want 400 naming it", code, out)
	}
	if res := replay(`{"dry_run":true}`); res.Letters != 2 || res.FailedAgain != 2 || !res.DryRun {
		t.Errorf("dry run with the CHECK in place: %+v, want both letters to fail again", res)
	}
	if got := orders(t, ctx, r); !reflect.DeepEqual(got, []string{"o-1|5"}) {
		t.Fatalf("before the replay the table holds %q, want o-1's row only", got)
	}

	if _, err := r.db(t, ctx).Exec(ctx, `ALTER TABLE orders DROP CONSTRAINT small`); err != nil {
		t.Fatal(err)
	}
	res := replay(`{"since":"1h"}`)
	if res.Letters != 2 || res.Replayed != 1 || res.FailedAgain != 1 || len(res.Refused) != 1 || res.Refused[0].Reason != schemaReason {
		t.Fatalf("replay: %+v, want o-2 replayed and the unknown schema's letter refused with its reason %q", res, schemaReason)
	}
	if got, want := orders(t, ctx, r), []string{"o-1|5", "o-2|500"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replay the table holds %q, want %q", got, want)
	}
	eventually(t, soon(), "the status to count 1 pending letter and 1 replayed", func() bool {
		st = r.status(t)
		return st.DeadLetters.Pending == 1 && st.DeadLetters.Replayed == 1
	})
	if rs := st.DeadLetters.Reasons; len(rs) != 1 || rs[0].Reason != schemaReason {
		t.Errorf("pending reasons after the replay %+v, want the unknown schema's", rs)
	}
	if got, want := stored(), map[string]float64{"pending": 1, "replayed": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("ehsink_dead_letters_stored %v, want %v", got, want)
	}
}

// db connects to the rig's database for the test's length.
func (r *rig) db(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// orders returns the Avro test's rows as order_id|amount, by sequence number.
func orders(t *testing.T, ctx context.Context, r *rig) []string {
	t.Helper()
	rows, err := r.db(t, ctx).Query(ctx, `SELECT concat_ws('|', order_id, amount) FROM orders ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
