package connector_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// filingDriver serves a sinktest.Memory whose writers are not
// sinks.DeadLetterer (the interface value hides the method): the runner
// stores their dead letters in its files, as for stdout or a custom sink.
type filingDriver struct{ m *sinktest.Memory }

func (d filingDriver) NewConfig() any { return &struct{}{} }
func (d filingDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return filingSink(d), nil
}

type filingSink struct{ m *sinktest.Memory }

func (s filingSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	w, pos, err := s.m.Open(ctx, partition)
	return struct{ sinks.Writer }{w}, pos, err
}
func (s filingSink) Close(ctx context.Context) error { return s.m.Close(ctx) }

// TestDeadLetterDirOnlyWhenWritten: `ehsink run` in a directory, with
// the default errors.dead_letter.dir (.ehsink/dead-letters/NAME), makes
// the folder of a connector only when the runner writes a letter there.
// A connector whose sink keeps its dead letters itself (as postgres,
// parquet and iceberg do) leaves none, even with a dead letter; one whose
// sink does not gets its folder and file.
func TestDeadLetterDirOnlyWhenWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	t.Chdir(work)
	_, conn := startHub(t, "orders", 1, "filing")

	keeps, files := sinktest.NewMemory(), sinktest.NewMemory()
	bad := func(ev *sinks.Event) error {
		if strings.Contains(string(ev.Body), "bad") {
			return errors.New("not an order")
		}
		return nil
	}
	keeps.SetReject(bad)
	files.SetReject(bad)
	var reg sinks.Registry
	reg.Register("keeps", keeps.Driver())
	reg.Register("files", filingDriver{files})
	spec := func(name, group, sink string) connector.Spec {
		src := connector.SourceSpec{Connection: secret.String(conn)}
		src.ConsumerGroup = group
		return connector.Spec{
			Name:       name,
			Source:     src,
			Checkpoint: connector.CheckpointSpec{File: &connector.FileCheckpointSpec{Dir: filepath.Join(work, "checkpoints")}},
			Sink:       connector.SinkSpec{Type: sink},
		}
	}
	cfg := &connector.Config{
		DrainTimeout: 5 * time.Second,
		Connectors:   []connector.Spec{spec("keeps", "$Default", "keeps"), spec("files", "filing", "files")},
	}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Registry: &reg})
	defer func() {
		stop()
		<-done
	}()

	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.WithoutCancel(ctx))
	batch, err := producer.NewEventDataBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"id":1}`, `{"id":"bad"}`, `{"id":3}`} {
		if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	filed := filepath.Join(".ehsink", "dead-letters", "files", "0.jsonl")
	waitUntil(t, ctx, done, "both connectors committed the 3 events, the bad one as a dead letter", func() bool {
		_, err := os.Stat(filed)
		return len(keeps.Committed("0")) == 2 && len(keeps.DeadLetters("0")) == 1 && len(files.Committed("0")) == 2 && err == nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil // for the deferred stop

	if _, err := os.Stat(filepath.Join(".ehsink", "dead-letters", "keeps")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the connector whose sink keeps its dead letters has a dead-letter folder (stat: %v)", err)
	}
	if b, err := os.ReadFile(filed); err != nil || !strings.Contains(string(b), "not an order") {
		t.Errorf("the runner's dead-letter file of the other connector: %q, %v", b, err)
	}
}
