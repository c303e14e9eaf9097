package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"go.uber.org/goleak"

	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	testenv.StopSharedPostgres()
	if code == 0 {
		// Stop must leave none of the harness's goroutines behind; idle
		// keep-alive connections belong to the blob client's transport.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestAzuriteServesBlobs proves the instance speaks the Blob API to the
// azblob SDK through its connection string (which needs
// --skipApiVersionCheck) and that the shared instance is reused.
func TestAzuriteServesBlobs(t *testing.T) {
	az := testenv.Azurite(t)
	if again := testenv.Azurite(t); again != az {
		t.Fatal("Azurite returned a second instance in one test binary")
	}
	ctx := context.Background()
	client, err := azblob.NewClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	container := az.ContainerName(t)
	if _, err := client.CreateContainer(ctx, container, nil); err != nil {
		t.Fatalf("create container %s: %v", container, err)
	}
	if _, err := client.UploadBuffer(ctx, container, "a/b", []byte("hello"), nil); err != nil {
		t.Fatalf("upload: %v", err)
	}
	resp, err := client.DownloadStream(ctx, container, "a/b", nil)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "hello" {
		t.Fatalf("downloaded %q, %v; want hello", got, err)
	}
}

// TestNewAzuriteStops proves a private instance is gone after Stop: its
// port no longer accepts connections (the process group got SIGKILL).
func TestNewAzuriteStops(t *testing.T) {
	az := testenv.NewAzurite(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(az.Port()))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial running instance: %v", err)
	}
	c.Close()
	az.Stop()
	az.Stop() // idempotent
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
}

// TestPersistentAzuriteRestarts proves a persistent instance comes back
// after Stop on the same port with the blobs it had saved.
func TestPersistentAzuriteRestarts(t *testing.T) {
	dir := t.TempDir()
	az := testenv.NewPersistentAzurite(t, dir)
	ctx := context.Background()
	client, err := azblob.NewClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateContainer(ctx, "kept", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UploadBuffer(ctx, "kept", "a/b", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	// Azurite keeps two metadata databases, the blobs' and the extents'
	// (where each blob's bytes live), and saves each every few seconds on
	// its own timer. A blob saved without its extent answers 500 forever
	// after the restart (Azurite finds no extent for it), so wait until
	// both saved files name what the upload made before killing it.
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !saved(dir, "__azurite_db_blob__.json", `"a/b"`) || !saved(dir, "__azurite_db_blob_extent__.json", `"locationId"`) {
		if time.Now().After(deadline) {
			t.Fatalf("Azurite did not save its metadata within a minute (files: %v)", dirNames(dir))
		}
		<-tick.C
	}
	port := az.Port()
	az.Stop()
	if err := az.Start(); err != nil {
		t.Fatal(err)
	}
	if az.Port() != port {
		t.Fatalf("restarted on port %d, want %d", az.Port(), port)
	}
	// A freshly restarted Azurite on a loaded machine may answer 500 (no
	// error code) for a few seconds while it reloads; that is waited out.
	// A missing blob (404) or wrong content fails at once.
	deadline = time.Now().Add(time.Minute)
	for {
		got, err := download(ctx, client)
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusInternalServerError && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("download after the restart: %v", err)
		}
		if got != "hello" {
			t.Fatalf("downloaded %q, want hello", got)
		}
		return
	}
}

func download(ctx context.Context, client *azblob.Client) (string, error) {
	resp, err := client.DownloadStream(ctx, "kept", "a/b", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// saved reports whether Azurite's database file name in dir holds want.
func saved(dir, name, want string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return strings.Contains(string(b), want)
}

func dirNames(dir string) []string {
	es, _ := os.ReadDir(dir)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestContainerName(t *testing.T) {
	az := testenv.Azurite(t)
	tests := []struct{ name string }{{"Simple"}, {"With Spaces_and/Slashes"}, {strings.Repeat("Long", 30)}}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := az.ContainerName(t)
			if len(n) < 3 || len(n) > 63 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
				strings.HasPrefix(n, "-") || strings.Contains(n, "--") {
				t.Fatalf("ContainerName = %q: not a valid container name", n)
			}
			if seen[n] {
				t.Fatalf("ContainerName %q repeated", n)
			}
			seen[n] = true
		})
	}
}
