package cli

import (
	"strings"
	"testing"
)

// TestValidateNamesEveryConnectionString is issue 28 item 4: one file,
// three connectors, one malformed connection string each (the Event Hubs
// source, the checkpoint store, the Parquet sink's Blob Storage), and the
// Parquet sink's block has a second mistake (an unknown key). validate and
// run report all four with their paths in one run and exit 2. Main named
// two: the SDK's storage parser takes an empty AccountKey (a client
// without credentials), and a sink block that did not decode was never
// validated, so its connection string went unchecked.
func TestValidateNamesEveryConnectionString(t *testing.T) {
	path := writeConfig(t, `
connectors:
  - name: hub
    source:
      connection: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey="
      eventhub: orders
    checkpoint: {file: {dir: ${STATE:-/tmp/ehsink-test-state}}}
    sink: {type: stdout}
  - name: store
    source: {connection: "`+ehConn+`"}
    checkpoint:
      blob: {connection: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1", container: checkpoints}
    sink: {type: stdout}
  - name: files
    source: {connection: "`+ehConn+`"}
    checkpoint: {file: {dir: ${STATE:-/tmp/ehsink-test-state}}}
    sink:
      type: parquet
      blob: {connection: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1", container: orders}
      max_rows: 1000
      max_age: 1 minute
      columns: {order_id: $.order_id}
`)
	want := []string{
		"connectors[0].source.connection: not a valid Event Hubs connection string: SharedAccessKey is empty",
		"connectors[1].checkpoint.blob.connection: not a valid storage connection string: AccountKey is empty",
		"connectors[2].sink.blob.connection: not a valid storage connection string",
		`connectors[2].sink.max_age: "1 minute" is not a duration`,
	}
	wantProblems(t, path, want)
	// No key shows: the strings' keys are not quoted.
	_, _, errOut := cli(t, "validate", "-c", path)
	if strings.Contains(errOut, "EHKEYSECRET") {
		t.Errorf("stderr shows a key:\n%s", errOut)
	}
}
