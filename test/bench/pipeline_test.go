//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
)

// Environment of a pipeline child: a drain child that also writes what it
// receives to PostgreSQL, as a consumer written by hand would.
const (
	pipelineEnv = "EHSINK_BENCH_PIPELINE" // append or upsert
	dsnEnv      = "EHSINK_BENCH_DSN"
)

// orderColumns are the fields of an order that a hand-written consumer
// decodes for the columns of columnsYAML.
type orderColumns struct {
	OrderID  string `json:"order_id"`
	Customer struct {
		ID string `json:"id"`
	} `json:"customer"`
	Amount    float64   `json:"amount"`
	Currency  string    `json:"currency"`
	CreatedAt time.Time `json:"created_at"`
}

// pipelineWriter writes the batches of one partition of a pipeline child
// on a connection of its own: each batch decoded with encoding/json, then
// one COPY (append, into raw_append) or one fenced merge transaction
// (upsert, mergeBatch).
type pipelineWriter struct {
	conn  *pgx.Conn
	mode  string
	id    string
	wm    int64
	rows  [][]any
	merge mergeRows
}

func newPipelineWriter(ctx context.Context, mode, dsn, id string) (*pipelineWriter, error) {
	if mode != "append" && mode != "upsert" {
		return nil, fmt.Errorf("%s=%q: want append or upsert", pipelineEnv, mode)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &pipelineWriter{conn: conn, mode: mode, id: id, wm: -1}, nil
}

func (w *pipelineWriter) write(ctx context.Context, evs []*azeventhubs.ReceivedEventData) error {
	w.rows = w.rows[:0]
	w.merge.reset()
	for _, e := range evs {
		var o orderColumns
		if err := json.Unmarshal(e.Body, &o); err != nil {
			return fmt.Errorf("partition %s seq %d: %w", w.id, e.SequenceNumber, err)
		}
		if w.mode == "append" {
			w.rows = append(w.rows, []any{o.OrderID, o.Customer.ID, o.Amount, o.Currency, o.CreatedAt, w.id, e.SequenceNumber, *e.EnqueuedTime})
		} else {
			w.merge.add(o.OrderID, o.Customer.ID, o.Amount, o.Currency, o.CreatedAt, w.id, e.SequenceNumber, *e.EnqueuedTime)
		}
	}
	if w.mode == "upsert" {
		return mergeBatch(ctx, w.conn, w.id, &w.wm, &w.merge)
	}
	_, err := w.conn.CopyFrom(ctx, pgx.Identifier{"raw_append"}, rowColumns, pgx.CopyFromRows(w.rows))
	return err
}

func (w *pipelineWriter) close(ctx context.Context) { _ = w.conn.Close(ctx) }
