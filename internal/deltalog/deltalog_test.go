package deltalog

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	os.Exit(code)
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func str(s string) *string { return &s }

// sampleCommit is version 0 of a table as the tests write it.
func sampleCommit() []Action {
	ts := int64(1767322800000)
	return []Action{
		{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &Metadata{ID: "id-1", Format: Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString:     `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`,
			PartitionColumns: []string{"p"}, Configuration: map[string]string{}, CreatedTime: &ts}},
		{Add: &Add{Path: "p=x/part-1.parquet", PartitionValues: map[string]*string{"p": str("x")}, Size: 10, ModificationTime: ts, DataChange: true, Stats: `{"numRecords":1}`}},
		{Txn: &Txn{AppID: "app", Version: 7, LastUpdated: &ts}},
		{CommitInfo: map[string]any{"operation": "WRITE"}},
	}
}

func TestEncodeParseRoundTrip(t *testing.T) {
	data, err := Encode(sampleCommit())
	if err != nil {
		t.Fatal(err)
	}
	// "Delta files are stored as JSON in a newline-delimited format":
	// one action per line, each line one object with one key.
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`) {
		t.Fatalf("commit:\n%s", data)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[:4], sampleCommit()[:4]) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, sampleCommit())
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for name, line := range map[string]string{
		"not json":     `{"add":`,
		"two keys":     `{"add":{"path":"a"},"txn":{"appId":"x","version":1}}`,
		"no key":       `{}`,
		"null action":  `{"add":null}`,
		"wrong type":   `{"txn":{"appId":"x","version":"seven"}}`,
		"not object":   `[1,2]`,
		"second line":  "{\"commitInfo\":{}}\n{\"add\"",
		"scalar value": `7`,
	} {
		if _, err := Parse([]byte(line)); err == nil {
			t.Errorf("%s: Parse(%q) succeeded", name, line)
		}
	}
	// Actions this package does not model are kept as unknown, not refused:
	// a reader "must ignore" what it does not need.
	acts, err := Parse([]byte(`{"domainMetadata":{"domain":"d","configuration":"{}","removed":false}}`))
	if err != nil || len(acts) != 1 || acts[0].Unknown != "domainMetadata" {
		t.Fatalf("unknown action: %+v, %v", acts, err)
	}
}

func FuzzParse(f *testing.F) {
	data, _ := Encode(sampleCommit())
	f.Add(data)
	f.Add([]byte(`{"remove":{"path":"a","dataChange":true}}`))
	f.Add([]byte("\n\n{\"txn\":{\"appId\":\"a\",\"version\":1}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		acts, err := Parse(b)
		if err != nil {
			return
		}
		// What parses encodes, and parses again to the same actions.
		var known []Action
		for _, a := range acts {
			if a.Unknown == "" {
				known = append(known, a)
			}
		}
		enc, err := Encode(known)
		if err != nil {
			return // an action whose fields are all empty
		}
		again, err := Parse(enc)
		if err != nil || len(again) != len(known) {
			t.Fatalf("re-parse of %q: %v (%d actions, want %d)", enc, err, len(again), len(known))
		}
	})
}

// TestSnapshotRules names the replay rules of the protocol the writer
// relies on.
func TestSnapshotRules(t *testing.T) {
	s := NewSnapshot()
	if err := s.Apply(1, nil); err == nil {
		t.Error("version 1 before 0 applied: versions must be contiguous")
	}
	if err := s.Apply(0, []Action{{Add: &Add{Path: "a"}}}); err == nil {
		t.Error("version 0 without protocol and metaData applied")
	}
	s = NewSnapshot()
	if err := s.Apply(0, sampleCommit()); err != nil {
		t.Fatal(err)
	}
	t.Run("latest txn per appId wins", func(t *testing.T) {
		if err := s.Apply(1, []Action{{Txn: &Txn{AppID: "app", Version: 9}}, {Txn: &Txn{AppID: "other", Version: 1}}}); err != nil {
			t.Fatal(err)
		}
		if v, ok := s.TxnVersion("app"); !ok || v != 9 {
			t.Fatalf("txn app: %d %v, want 9", v, ok)
		}
	})
	t.Run("remove ends a file, paths compared URI-decoded", func(t *testing.T) {
		if err := s.Apply(2, []Action{{Add: &Add{Path: "p=a%20b/f.parquet"}}, {Remove: &Remove{Path: "p=x/part-1.parquet"}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(3, []Action{{Remove: &Remove{Path: "p=a b/f.parquet"}}}); err != nil {
			t.Fatal(err)
		}
		if len(s.Files) != 0 {
			t.Fatalf("live files %v, want none", s.Files)
		}
	})
}

func TestCheckWritable(t *testing.T) {
	for _, tc := range []struct {
		p  Protocol
		ok bool
	}{
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 1}, true},
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, true},
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, false}, // CHECK constraints
		{Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, false}, // column mapping
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants"}}, true},
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "rowTracking"}}, false},
		{Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, false},
		{Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}, false},
	} {
		err := CheckWritable(&tc.p)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrProtocol) {
			t.Errorf("CheckWritable(%+v) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

// TestCheckpointRoundTrip writes a classic checkpoint and reads it back:
// protocol, metaData, every txn and every live file.
func TestCheckpointRoundTrip(t *testing.T) {
	s := NewSnapshot()
	if err := s.Apply(0, sampleCommit()); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(1, []Action{{Txn: &Txn{AppID: "b", Version: 3}}, {Add: &Add{Path: "p=y/f2.parquet", PartitionValues: map[string]*string{"p": str("y")}, Size: 5, DataChange: true}}}); err != nil {
		t.Fatal(err)
	}
	data, n, err := EncodeCheckpoint(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // protocol, metaData, 2 txn, 2 add
		t.Fatalf("checkpoint of %d actions, want 6", n)
	}
	got, err := DecodeCheckpoint(1, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Protocol, s.Protocol) || !reflect.DeepEqual(got.Txns["b"], s.Txns["b"]) || got.Txns["app"].Version != 7 {
		t.Fatalf("protocol %+v txns %+v", got.Protocol, got.Txns)
	}
	if got.Metadata.SchemaString != s.Metadata.SchemaString || !reflect.DeepEqual(got.Metadata.PartitionColumns, []string{"p"}) {
		t.Fatalf("metadata %+v", got.Metadata)
	}
	if len(got.Files) != 2 || *got.Files["p=y/f2.parquet"].PartitionValues["p"] != "y" || got.Files["p=x/part-1.parquet"].Stats != `{"numRecords":1}` {
		t.Fatalf("files %+v", got.Files)
	}
}

// storeCases checks a Store's create-if-absent: of writers creating one
// name at once, exactly one wins; the others get ErrExists and the file
// holds the winner's bytes.
func storeCases(t *testing.T, st Store) {
	t.Helper()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = st.Create(ctx(t), CommitName(0), []byte{byte('a' + i)}) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both created the commit", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, ErrExists):
			t.Fatalf("writer %d: %v, want ErrExists", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer created the commit")
	}
	data, err := st.Read(ctx(t), CommitName(0))
	if err != nil || string(data) != string(rune('a'+won)) {
		t.Fatalf("commit holds %q (%v), want the winner's", data, err)
	}
	if _, err := st.Read(ctx(t), CommitName(1)); !isNotExist(err) {
		t.Fatalf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := st.Put(ctx(t), "x/y.parquet", []byte("1")); err != nil {
		t.Fatal(err)
	}
	names, err := st.List(ctx(t), Dir)
	if err != nil || len(names) != 1 || names[0].Name != CommitName(0) || names[0].Size != 1 || names[0].ModTime.IsZero() {
		t.Fatalf("List(%s) = %v, %v", Dir, names, err)
	}
	if err := st.Remove(ctx(t), "x/y.parquet"); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(ctx(t), "x/y.parquet"); err != nil {
		t.Fatalf("Remove of a missing file: %v", err)
	}
}

func TestLocalStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	st, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeCases(t, st)
	// No temporary file is left beside the commit.
	entries, _ := os.ReadDir(filepath.Join(dir, "_delta_log"))
	if len(entries) != 1 {
		t.Fatalf("_delta_log holds %d entries, want the commit alone", len(entries))
	}
}

// TestBlobStore runs the same cases on Azurite, which answers a
// create-only upload of an existing blob with 409 where Azure answers
// 412.
func TestBlobStore(t *testing.T) {
	az := testenv.Azurite(t)
	name := az.ContainerName(t)
	client, err := connstr.ContainerClient(az.ConnectionString(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Create(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	storeCases(t, NewBlobStore(client, name, "lake/t"))
}

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"interval 30 days": 30 * 24 * time.Hour, "INTERVAL 1 week": 7 * 24 * time.Hour,
		"interval 12 hours": 12 * time.Hour, "interval 0 seconds": 0, "interval 5 minute": 5 * time.Minute,
	} {
		if got, err := ParseInterval(in); err != nil || got != want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"30 days", "interval -1 days", "interval 3 fortnights", "interval x days", ""} {
		if _, err := ParseInterval(in); err == nil {
			t.Errorf("ParseInterval(%q) succeeded", in)
		}
	}
}

// answer412 is a Blob service that refuses every upload as Azure refuses a
// create-only upload of an existing blob: 412 ConditionNotMet (Azurite
// answers 409 BlobAlreadyExists, which TestBlobStore meets).
type answer412 struct{}

func (answer412) Do(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("x-ms-error-code", "ConditionNotMet")
	return &http.Response{StatusCode: http.StatusPreconditionFailed, Status: "412 The condition specified using HTTP conditional header(s) is not met.",
		Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func TestBlobCreate412IsALostRace(t *testing.T) {
	opts := &container.ClientOptions{}
	opts.Transport = answer412{}
	opts.Retry.MaxRetries = -1
	client, err := container.NewClientWithNoCredential("https://acct.blob.core.windows.net/lake", opts)
	if err != nil {
		t.Fatal(err)
	}
	err = NewBlobStore(client, "lake", "t").Create(ctx(t), CommitName(3), []byte("{}"))
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Create answered 412: %v, want ErrExists", err)
	}
}
