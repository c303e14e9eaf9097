package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"

	"github.com/ehsink/ehsink/internal/logflags"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// sdkRequest sends one request through an Azure SDK pipeline, which logs it
// through the SDK's listener.
func sdkRequest(t *testing.T, url string) {
	t.Helper()
	pl := azruntime.NewPipeline("ehsinktest", "v0.0.0", azruntime.PipelineOptions{}, &policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1},
	})
	req, err := azruntime.NewRequest(t.Context(), http.MethodGet, url)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := pl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestAzureLogBridge runs in a process of its own: the SDK's listener is a
// process-global variable read without synchronisation by SDK goroutines,
// which other tests of this package leave finishing in the background.
func TestAzureLogBridge(t *testing.T) {
	if os.Getenv("EHSINK_TEST_BRIDGE_CHILD") != "1" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestAzureLogBridge$", "-test.count=1")
		cmd.Env = append(os.Environ(), "EHSINK_TEST_BRIDGE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/c;SharedAccessKey=TOPSECRET/blob"

	var debugOut bytes.Buffer
	logger, err := logflags.New(&debugOut, "debug", "text")
	if err != nil {
		t.Fatal(err)
	}
	restore := bridgeAzureLogs(logger)
	sdkRequest(t, url)
	restore()
	out := debugOut.String()
	if !strings.Contains(out, "component=azure-sdk") || !strings.Contains(out, "level=DEBUG") {
		t.Errorf("no SDK debug log:\n%s", out)
	}
	if strings.Contains(out, "TOPSECRET") || !strings.Contains(out, "SharedAccessKey=***") {
		t.Errorf("SDK log not redacted:\n%s", out)
	}

	// After restore, and with debug off, nothing is bridged.
	var infoOut bytes.Buffer
	logger, _ = logflags.New(&infoOut, "info", "text")
	restore = bridgeAzureLogs(logger)
	sdkRequest(t, url)
	restore()
	if infoOut.Len() != 0 || debugOut.String() != out {
		t.Errorf("logs after restore / at info level:\n%s\n%s", infoOut.String(), debugOut.String()[len(out):])
	}
}
